package evidence

import (
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// Gathered is the facts for the verdicts and what the workspace showed.
type Gathered struct {
	Facts verdict.Facts
	// Git is nil when no workspace was given: then nothing is re-verified (the safe floor) and the
	// lane is taken as not advanced, since there is nothing to measure it against.
	Git *GitReport
}

// Gather collects the facts of one session, against the workspace when ws is not nil. A ledger that
// names no run id takes the session's id. A workspace that cannot be read is an error: the task fails
// and says why, rather than judging a run on evidence it could not see.
func Gather(s *session.Session, ws *Workspace, policy verdict.Policy) (Gathered, error) {
	state := ledger.Fold(s.Events)
	if state.RunID == "" {
		state.RunID = s.Meta.ID
	}
	var g Gathered
	rounds := Rounds(s.Events)
	witness := verdict.RecorderRung(state, rounds)
	// Without a workspace the recorder's rung is the only evidence; the zero value would demand git.
	facts := resume.AncestryFacts{NoWorkspace: true}
	if ws != nil {
		f, rep, err := ws.Facts(state, witness, policy.Resume)
		if err != nil {
			return Gathered{}, fmt.Errorf("gathering evidence from %s: %w", ws.Source(), err)
		}
		facts, g.Git = f, &rep
	}
	// With or without a workspace the residual shrinks as steps are verified turn by turn: by git and
	// the recorder together, or by the recorder alone.
	history := verdict.ResidualHistory(s.Events, facts, rounds, policy.Resume)
	g.Facts = verdict.Facts{
		Ledger:   state,
		Ancestry: facts,
		History:  history,
		Turns:    Turns(s.Events),
		Env:      EnvError(s.Events),
		Rounds:   rounds,
	}
	return g, nil
}
