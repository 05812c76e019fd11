package evidence

// A hostile test of the residual history. Its comment tells the defect it found; the test holds the
// fix.

import (
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/convergence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// hostileStarvedRun is a run judged without a workspace: s1 (write a.go) is done in turn 0, s2 (write
// b.go) never is; the agent spends `idle` turns reading, then in its last turn writes a.go once more
// (a reformat, a retry). In truth the residual is [s2] from turn 0 on: nothing was verified for far
// more than the convergence window, which is STARVED.
func hostileStarvedRun(idle int) *session.Session {
	var evs []session.Event
	add := func(ev session.Event) { ev.Step = int64(len(evs)); evs = append(evs, ev) }
	add(model("go"))
	add(led(session.AuthorAgent, ledger.Intent("r", "g", "", ledger.Step{ID: "s1", Text: "write a.go", Paths: []string{"a.go"}},
		ledger.Step{ID: "s2", Text: "write b.go", Paths: []string{"b.go"}})))
	add(tool("write_file", map[string]any{"path": "a.go"}, nil))
	for range idle {
		add(model("again"))
		add(tool("read_file", map[string]any{"path": "notes.txt"}, nil))
	}
	add(model("last"))
	add(tool("write_file", map[string]any{"path": "a.go"}, nil)) // s1's file touched again
	return &session.Session{Meta: session.Meta{ID: "starved"}, Events: evs}
}

// The recorder's witness of a step is credited to the turn of the LATEST call behind it
// (Witness.AtStep = max(CallSteps)), not the first. A step done in turn 0 and touched again in the last
// turn is counted as still to do for every turn between, so a run stuck for 10 turns shows a "new low"
// in its last turn and reads CONVERGING instead of STARVED: the stop signal (and the rewind it fires)
// is lost.
func TestALateCallDoesNotHideAStarvedRun(t *testing.T) {
	s := hostileStarvedRun(10)
	g, err := Gather(s, nil, verdict.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range g.Facts.History[:3] {
		if len(snap.Residual) != 1 {
			t.Errorf("turn %d residual %v: s1 was written in turn 0, the residual after it is [s2]", snap.Turn, snap.Residual)
		}
	}
	r := verdict.Evaluate(g.Facts, verdict.DefaultPolicy())
	if r.Convergence.Verdict != convergence.Starved {
		t.Errorf("convergence %s (%s), want STARVED: nothing was verified after turn 0 for 11 turns", r.Convergence.Verdict, r.Convergence.Message)
	}

	// Control: the same run without the final rewrite of a.go is STARVED, as it should be.
	s.Events = s.Events[:len(s.Events)-1]
	g, _ = Gather(s, nil, verdict.DefaultPolicy())
	if r := verdict.Evaluate(g.Facts, verdict.DefaultPolicy()); r.Convergence.Verdict != convergence.Starved {
		t.Errorf("control: convergence %s, want STARVED", r.Convergence.Verdict)
	}
}
