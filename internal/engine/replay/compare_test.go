package replay

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func TestCompareFindsTheFirstDivergentStep(t *testing.T) {
	golden, _ := recordTriage(t, liveEntropy())
	again, _ := recordTriage(t, liveEntropy())
	if d := Compare(golden.Events, again.Events); d != nil {
		t.Fatalf("two recordings of the same deterministic run differ: %v", d)
	}
	dir := filepath.Join(t.TempDir(), "changed")
	if _, err := Record(context.Background(), RecordOptions{Config: liveEntropy(), Dir: dir, Model: triageModel(), Tools: triageTools(&counter{})},
		triageAgent("You are a terse triage bot.")); err != nil {
		t.Fatal(err)
	}
	changed, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := Compare(golden.Events, changed.Events)
	if d == nil || d.Step != 3 || !strings.Contains(d.Error(), `request.system: "You are a triage bot." → "You are a terse triage bot."`) {
		t.Fatalf("got %v", d)
	}
	d = Compare(golden.Events, golden.Events[:4])
	if d == nil || d.Step != 4 || !strings.Contains(d.Error(), "the candidate stopped after 3 boundary calls; the golden run made 6") {
		t.Fatalf("truncated candidate: %v", d)
	}
}

func TestDiffShowsWhereLongStringsDiffer(t *testing.T) {
	long := "You are a triage bot for the editor team. Label each new issue."
	lines := diffJSON([]byte(`{"system":"`+long+`"}`), []byte(`{"system":"`+long+` Check CODEOWNERS first."}`))
	if len(lines) != 1 || !strings.Contains(lines[0], `…"h new issue."`) || !strings.Contains(lines[0], `…"h new issue. Check CODEOWNERS first."`) {
		t.Fatalf("diff %q", lines)
	}
}
