package replay

import (
	"errors"
	"testing"
)

// TestCheckAtStepAllowsOnlyTheSessionsSteps: a fork may go live at steps 0 to steps-1; one at or past
// the end is an *AtStepError with the session's step count, a negative one an error of its own.
func TestCheckAtStepAllowsOnlyTheSessionsSteps(t *testing.T) {
	for _, tc := range []struct {
		at, steps int64
		want      string // "" when allowed
	}{
		{0, 13, ""},
		{12, 13, ""},
		{13, 13, "step 13 is past the end of session s, which has 13 steps (0 to 12)"},
		{500, 13, "step 500 is past the end of session s, which has 13 steps (0 to 12)"},
		{0, 0, "step 0 is past the end of session s, which has no steps"},
		{-1, 13, "step -1 is negative"},
	} {
		err := CheckAtStep(tc.at, "s", tc.steps)
		if tc.want == "" {
			if err != nil {
				t.Errorf("CheckAtStep(%d, %d) = %v, want nil", tc.at, tc.steps, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("CheckAtStep(%d, %d) = %v, want %q", tc.at, tc.steps, err, tc.want)
		}
		var ae *AtStepError
		if tc.at >= 0 && (!errors.As(err, &ae) || ae.Steps != tc.steps || ae.AtStep != tc.at) {
			t.Errorf("CheckAtStep(%d, %d) is not an *AtStepError: %#v", tc.at, tc.steps, err)
		}
	}
}
