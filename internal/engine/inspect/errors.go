package inspect

import (
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// StepError says a step is not what an inspection asked for.
type StepError struct {
	Step int64
	Want session.Kind
	Got  session.Kind // "" when the step does not exist
}

func (e *StepError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("step %d does not exist in this session", e.Step)
	}
	return fmt.Sprintf("step %d is a %s, not a %s", e.Step, e.Got, e.Want)
}
