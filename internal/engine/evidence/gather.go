package evidence

import (
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
// names no run id takes the session's id.
func Gather(s *session.Session, ws *Workspace, policy verdict.Policy) Gathered {
	state := ledger.Fold(s.Events)
	if state.RunID == "" {
		state.RunID = s.Meta.ID
	}
	var g Gathered
	var facts resume.AncestryFacts
	if ws != nil {
		f, rep := ws.Facts(state, policy.Resume)
		facts, g.Git = f, &rep
	}
	g.Facts = verdict.Facts{
		Ledger:   state,
		Ancestry: facts,
		History:  verdict.ResidualHistory(s.Events, facts, policy.Resume),
		Turns:    Turns(s.Events),
		Env:      EnvError(s.Events),
		Rounds:   Rounds(s.Events),
	}
	return g
}
