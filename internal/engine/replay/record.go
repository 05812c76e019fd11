package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/version"
)

// RecordOptions describe a recording.
type RecordOptions struct {
	Config
	// Dir is the session directory to create; ID names the session (default: a random UUID).
	Dir string
	ID  string
	// Model and Tools are the live boundary.
	Model Model
	Tools map[string]Tool
}

// RecordResult is a committed recording.
type RecordResult struct {
	Meta   session.Meta
	Events []session.Event
	// HarnessErr is what the harness returned; the recording is committed either way.
	HarnessErr error
}

// Record runs the harness against the live model and tools and records every boundary crossing into
// a new session directory: redacted, with large fields in blobs, the vault sealed, and meta.json last.
// When only the vault could not be sealed, the recording is still committed and returned together with
// an error wrapping ErrVaultNotSealed.
func Record(ctx context.Context, opts RecordOptions, harness Harness) (*RecordResult, error) {
	r := newRunner(opts.Config)
	r.model, r.tools, r.atStep = opts.Model, opts.Tools, 0
	if err := r.prepare(nil); err != nil {
		return nil, err
	}
	id := opts.ID
	if id == "" {
		id = r.cfg.NewUUID()
	}
	rec, harnessErr, err := r.recordInto(ctx, opts.Dir, r.newMeta(id), session.WriterOptions{}, harness)
	if rec != nil {
		rec.HarnessErr = harnessErr
	}
	return rec, err
}

func (r *runner) newMeta(id string) session.Meta {
	return session.Meta{ID: id, CreatedAt: r.cfg.Now().UnixMilli(), RecorderVersion: version.Get().Version, SchemaVersion: session.CurrentSchemaVersion,
		Provider: r.cfg.Codec.Name(), FingerprintMode: string(r.cfg.FingerprintMode),
		Redaction: session.RedactionInfo{Enabled: true, Patterns: r.cfg.Redactor.PatternNames()}}
}

// recordInto runs the harness with events written to a new session in dir, framed by session_start
// and session_end, and commits it. The harness's own error is returned separately: a run that failed is
// still a recording worth keeping.
func (r *runner) recordInto(ctx context.Context, dir string, meta session.Meta, wopts session.WriterOptions, harness Harness) (*RecordResult, error, error) {
	w, err := session.Create(dir, meta, wopts)
	if err != nil {
		return nil, nil, err
	}
	r.writer = w
	harnessErr := r.run(ctx, meta, harness)
	if r.writeErr != nil {
		w.Abort()
		return nil, nil, fmt.Errorf("recording %s: %w", dir, r.writeErr)
	}
	// A vault that cannot be sealed must not cost the recording: the run is committed without it (its
	// secrets stay redacted) and the error says so.
	sealErr := r.sealVault(ctx, w)
	committed, err := w.Close(func(m *session.Meta) { m.Redaction.Counts = r.cfg.Redactor.Counts() })
	if err != nil {
		return nil, nil, err
	}
	rec := &RecordResult{Meta: committed, Events: r.events}
	if sealErr != nil {
		return rec, harnessErr, fmt.Errorf("%w: %s was committed, but redacted secrets cannot be restored on replay: %w", ErrVaultNotSealed, dir, sealErr)
	}
	return rec, harnessErr, nil
}

// run frames the harness with session_start and session_end and waits for every event to be emitted.
// The recorder's END goes just before session_end.
func (r *runner) run(ctx context.Context, meta session.Meta, harness Harness) error {
	start := r.begin(ctx, session.KindSessionStart, nil, "session")
	ev := r.event(start, session.KindSessionStart)
	ev.Meta = &meta
	r.finish(&ev)
	r.mintStart(ctx)

	harnessErr := runHarness(withLane(ctx, r.root), r, harness)
	r.mintEnd(ctx, harnessErr)

	end := r.begin(ctx, session.KindSessionEnd, nil, "session")
	ev = r.event(end, session.KindSessionEnd)
	ok := harnessErr == nil
	ev.OK = &ok
	r.finish(&ev)
	r.drain()
	return harnessErr
}

// sealVault writes the encrypted token→secret map when there is a key and something to keep.
func (r *runner) sealVault(ctx context.Context, w *session.Writer) error {
	if r.cfg.Keys == nil {
		return nil
	}
	v := redact.NewVault()
	if r.vault != nil {
		if err := v.Merge(r.vault.Secrets()); err != nil {
			return err
		}
	}
	if err := v.Merge(r.cfg.Redactor.Secrets()); err != nil {
		return err
	}
	if v.Len() == 0 {
		return nil
	}
	sealed, err := v.Seal(ctx, r.cfg.Keys)
	if err != nil {
		return err
	}
	return w.SetVault(sealed)
}

// openVault loads the recording's vault when a key is configured and the session has one.
func (r *runner) openVault(ctx context.Context, s *session.Session) error {
	if r.cfg.Keys == nil || s.Dir == "" {
		return nil
	}
	sealed, err := os.ReadFile(filepath.Join(s.Dir, session.VaultFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	r.vault, err = redact.OpenVault(ctx, r.cfg.Keys, sealed)
	return err
}

// runHarness calls the harness, turning a panic into an error: a crashed agent is exactly the run a
// recording must survive, so the session is still framed and committed.
func runHarness(ctx context.Context, ac AgentContext, harness Harness) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrHarnessPanicked, p)
		}
	}()
	return harness(ctx, ac)
}
