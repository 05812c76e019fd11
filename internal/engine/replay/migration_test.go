package replay

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// migratedEvent is what the schema-1 migration decides for an event, beside what it keeps.
type migratedEvent struct {
	Step, Seq     int64
	Kind          session.Kind
	SchemaVersion int
	Author        session.Author
	Usage         *session.Usage
	ResponseUsage *session.Usage
	Blobs         map[string]string
}

// TestV1FixtureReplaysUnchanged reads testdata/v1-triage, a triage run written by hand in seed 002's
// schema-1 shapes (see testdata/README.md): no authors, float dollar costs, a blobs map on every call,
// two fields externalised. Migration fills in each author from the kind and turns every cost into
// exact micro-dollars (rounded, not truncated: $0.000249 is 248.99999999999997 micro-dollars as a
// float); today's engine then replays it with the same trajectory and no live call.
func TestV1FixtureReplaysUnchanged(t *testing.T) {
	s, err := session.Open(filepath.Join("testdata", "v1-triage"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Meta.SchemaVersion != 1 {
		t.Fatalf("the fixture is schema %d, not 1", s.Meta.SchemaVersion)
	}
	const (
		resultBlob  = "ba8487cd2e13b0856f54e77ddfe207f22b2ade6fa7d782b4a2975e3c2531116b"
		requestBlob = "0ad377e40559747b92a8a9772849cabda41492409e97984ca0e75954a826f21b"
	)
	plan := &session.Usage{InputTokens: 31, OutputTokens: 6, CostMicroUSD: 249}
	decide := &session.Usage{InputTokens: 4788, OutputTokens: 3, CostMicroUSD: 14373}
	v2 := session.CurrentSchemaVersion
	want := []migratedEvent{
		{Step: 0, Seq: 0, Kind: session.KindSessionStart, SchemaVersion: v2, Author: session.AuthorRecorder},
		{Step: 1, Seq: 1, Kind: session.KindEntropy, SchemaVersion: v2, Author: session.AuthorRecorder},
		{Step: 2, Seq: 2, Kind: session.KindEntropy, SchemaVersion: v2, Author: session.AuthorRecorder},
		{Step: 3, Seq: 3, Kind: session.KindModelCall, SchemaVersion: v2, Author: session.AuthorThirdParty, Usage: plan, ResponseUsage: plan},
		{Step: 4, Seq: 4, Kind: session.KindToolCall, SchemaVersion: v2, Author: session.AuthorThirdParty,
			Blobs: map[string]string{"result": resultBlob}},
		{Step: 5, Seq: 5, Kind: session.KindModelCall, SchemaVersion: v2, Author: session.AuthorThirdParty, Usage: decide, ResponseUsage: decide,
			Blobs: map[string]string{"request": requestBlob}},
		{Step: 6, Seq: 6, Kind: session.KindToolCall, SchemaVersion: v2, Author: session.AuthorThirdParty},
		{Step: 7, Seq: 7, Kind: session.KindSessionEnd, SchemaVersion: v2, Author: session.AuthorRecorder},
	}
	var got []migratedEvent
	for _, ev := range s.Events {
		m := migratedEvent{Step: ev.Step, Seq: ev.Seq, Kind: ev.Kind, SchemaVersion: ev.SchemaVersion, Author: ev.Author, Usage: ev.Usage, Blobs: ev.Blobs}
		if ev.Response != nil {
			m.ResponseUsage = ev.Response.Usage
		}
		got = append(got, m)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("migrated events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(session.Usage{InputTokens: 4819, OutputTokens: 9, CostMicroUSD: 14622}, Trace(s.Events).Usage()); diff != "" {
		t.Errorf("run total (-want +got):\n%s", diff)
	}
	// The externalised fields came back from their blobs, and every stored fingerprint is the one
	// today's engine computes for the stored request or arguments.
	for _, ev := range s.Events {
		var fp, stored string
		switch ev.Kind {
		case session.KindModelCall:
			fp, err = fingerprint.Of(GenericCodec{}.StripVolatile(*ev.Request), fingerprint.Options{})
			stored = ev.RequestHash
		case session.KindToolCall:
			fp, err = fingerprint.OfJSON(ev.Args, fingerprint.Options{})
			stored = ev.ArgsHash
		default:
			continue
		}
		if err != nil || fp != stored || (ev.Kind == session.KindToolCall && len(ev.Result) == 0) {
			t.Errorf("step %d: stored fingerprint %s, recomputed %s (%v); result %d bytes", ev.Step, stored, fp, err, len(ev.Result))
		}
	}

	res, err := Replay(context.Background(), ReplayOptions{Config: liveEntropy(), Session: s, Model: failingModel{t},
		Tools: failingTools(t, "search_issues", "add_label")}, triageAgent(triageSystem))
	if err != nil {
		t.Fatalf("the v1 recording no longer replays: %v", err)
	}
	if diff := cmp.Diff(trajectory(s.Events), trajectory(res.Events)); diff != "" {
		t.Fatalf("the replay differs from the v1 recording (-recorded +replayed):\n%s", diff)
	}
	if res.LiveCalls != 0 || len(res.Drifts) != 0 || len(res.Reorders) != 0 {
		t.Fatalf("live calls %d, drifts %v, reorders %v", res.LiveCalls, res.Drifts, res.Reorders)
	}
}
