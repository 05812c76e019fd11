package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// ErrNotFound says a source holds no session by the id asked for.
var ErrNotFound = errors.New("no such session")

// Source is where the sessions shown come from: a session directory, a store or a cluster.
type Source interface {
	// Sessions lists the sessions without loading their events.
	Sessions(ctx context.Context) ([]Listing, error)
	// Open loads and verifies the session id; an error wrapping ErrNotFound when there is none.
	Open(ctx context.Context, id string) (*session.Session, error)
	// Checkpoints lists the workspace checkpoints the source holds for the session id.
	Checkpoints(ctx context.Context, id string) ([]CheckpointView, error)
}

// PlanSource is a Source that stores verdicts of its own (a cluster's ResumePlans); the server shows
// them instead of asking the engine.
type PlanSource interface {
	// StoredPlan returns the stored verdict on the session id, or nil when there is none.
	StoredPlan(ctx context.Context, id string) (*PlanView, error)
}

// RevisionSource is a Source whose sessions may be replaced under the same id while served (a
// directory re-recorded in place). Revision names the recording id holds now, cheaply (without
// loading events), so the server loads it again when it changed rather than serve the one it cached.
type RevisionSource interface {
	Revision(ctx context.Context, id string) (string, error)
}

// revisionOf names a recording by its meta: another recording has another log hash or creation time.
func revisionOf(m session.Meta) string {
	return fmt.Sprintf("%d\x00%d\x00%s", m.CreatedAt, m.Events, m.EventsHash)
}

// Listing is a session as the list shows it.
type Listing struct {
	ID           string `json:"id"`
	Parent       string `json:"parent,omitempty"`
	ForkedAtStep *int64 `json:"forkedAtStep,omitempty"`
	Events       int64  `json:"events"`
	CreatedAt    int64  `json:"createdAt,omitempty"`
	// Verdict and VerdictReason are the resume verdict and why, when known.
	Verdict       string `json:"verdict,omitempty"`
	VerdictReason string `json:"verdictReason,omitempty"`
	// Object names the cluster object the session is, namespace/name, and Phase its phase.
	Object string `json:"object,omitempty"`
	Phase  string `json:"phase,omitempty"`
	// ForkRun names the ForkRun that made the session, with its outcome.
	ForkRun string `json:"forkRun,omitempty"`
	// Problem says why the session cannot be shown, when it cannot.
	Problem string `json:"problem,omitempty"`
}

// listingOf is the listing of a session's meta.
func listingOf(id string, m session.Meta) Listing {
	return Listing{ID: id, Parent: m.Parent, ForkedAtStep: m.ForkedAtStep, Events: m.Events, CreatedAt: m.CreatedAt}
}

// maxIDBytes bounds a session id taken from a URL.
const maxIDBytes = 253

// CheckID refuses a session id that could name anything but one entry of a source: empty, ".", "..",
// a path separator, a control character or invalid UTF-8. The directory source relies on it to keep
// every path under its root.
func CheckID(id string) error {
	switch {
	case id == "" || id == "." || id == "..":
		return fmt.Errorf("session id %q is not a session name", id)
	case len(id) > maxIDBytes:
		return fmt.Errorf("session id is %d bytes long, more than %d", len(id), maxIDBytes)
	case !utf8.ValidString(id):
		return errors.New("session id is not valid UTF-8")
	case strings.ContainsAny(id, `/\`):
		return fmt.Errorf("session id %q holds a path separator", id)
	}
	for i, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("session id holds a control character at byte %d", i)
		}
	}
	return nil
}
