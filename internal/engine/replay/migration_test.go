package replay

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestV1FixtureReplaysUnchanged replays a recording frozen in the schema-1 layout (no authors, float
// dollar costs) with today's engine: migrations bring it to the current schema and every call matches.
// The fixture is the triage agent recorded with deterministic entropy (ARW_WRITE_V1_FIXTURE=1 writes a
// current recording to testdata/v1-triage-current) and then written back in the schema-1 layout: no
// author fields, usage.costUsd in dollars, schemaVersion 1, eventsHash recomputed.
func TestV1FixtureReplaysUnchanged(t *testing.T) {
	if os.Getenv("ARW_WRITE_V1_FIXTURE") != "" {
		dir := filepath.Join("testdata", "v1-triage-current")
		_ = os.RemoveAll(dir)
		if _, err := Record(context.Background(), RecordOptions{Config: liveEntropy(), Dir: dir, ID: "v1-triage",
			Model: triageModel(), Tools: triageTools(&counter{})}, triageAgent(triageSystem)); err != nil {
			t.Fatal(err)
		}
		t.Skip("wrote", dir)
	}
	s, err := session.Open(filepath.Join("testdata", "v1-triage"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Meta.SchemaVersion != 1 {
		t.Fatalf("the fixture is schema %d, not 1", s.Meta.SchemaVersion)
	}
	for _, ev := range s.Events {
		if ev.SchemaVersion != session.CurrentSchemaVersion || ev.Author == "" {
			t.Fatalf("step %d not migrated: schema %d author %q", ev.Step, ev.SchemaVersion, ev.Author)
		}
	}
	if got := Trace(s.Events).Usage().CostMicroUSD; got != 14 {
		t.Fatalf("migrated cost %d micro-dollars, want 14 (2 calls × $0.000007)", got)
	}
	model := triageModel()
	res, err := Replay(context.Background(), ReplayOptions{Session: s}, triageAgent(triageSystem))
	if err != nil {
		t.Fatalf("the v1 recording no longer replays: %v", err)
	}
	if model.calls.Load() != 0 || len(res.Events) != len(s.Events) {
		t.Fatalf("replay made %d live calls and %d events (recording: %d)", model.calls.Load(), len(res.Events), len(s.Events))
	}
}
