package convergence

import (
	"math"
	"strings"
	"testing"
)

// hist builds a history from residuals written as strings of step letters, e.g. "abc", "bc", "".
func hist(residuals ...string) []Snapshot {
	out := make([]Snapshot, len(residuals))
	for i, r := range residuals {
		out[i] = Snapshot{Turn: i, Residual: strings.Split(r, "")}
		if r == "" {
			out[i].Residual = nil
		}
	}
	return out
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name    string
		history []Snapshot
		window  int
		want    Verdict
		reason  Reason
		changes int
	}{
		{"no history is insufficient", nil, 3, Insufficient, ReasonNoHistory, 0},
		{"an empty latest residual is complete even on a short history", hist("ab", ""), 3, Complete, ReasonResidualEmpty, 0},
		{"fewer turns than the window needs is insufficient", hist("abc", "abc", "abc"), 3, Insufficient, ReasonShortHistory, 0},
		{"a new low inside the window is converging", hist("abc", "abc", "bc", "bc"), 3, Converging, ReasonNewLow, 1},
		{"steady shrinking is converging", hist("abcd", "bcd", "cd", "d"), 3, Converging, ReasonNewLow, 3},
		{"a new low followed by a regression still counts as progress", hist("abc", "abc", "c", "bc"), 3, Converging, ReasonNewLow, 2},
		{"oscillating without a new low is thrashing", hist("abc", "bc", "abc", "bc", "abc"), 3, Thrashing, ReasonMotionNoGain, 3},
		{"a re-plan that swaps steps without progress is thrashing", hist("ab", "ab", "cd", "cd"), 3, Thrashing, ReasonMotionNoGain, 1},
		{"a growing residual is thrashing", hist("a", "a", "ab", "abc"), 3, Thrashing, ReasonMotionNoGain, 2},
		{"an unchanged residual through the window is starved", hist("abc", "bc", "bc", "bc", "bc"), 3, Starved, ReasonResidualStatic, 0},
		{"re-ordering the same steps is not motion", hist("ab", "ba", "ab", "ba"), 3, Starved, ReasonResidualStatic, 0},
		{"progress before the window does not rescue a starved window", hist("abcd", "a", "a", "a", "a"), 3, Starved, ReasonResidualStatic, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Classify(tc.history, Policy{Window: tc.window})
			if r.Verdict != tc.want || r.Reason != tc.reason {
				t.Fatalf("Classify = %s/%s, want %s/%s (%s)", r.Verdict, r.Reason, tc.want, tc.reason, r.Message)
			}
			if r.Changes != tc.changes {
				t.Errorf("changes = %d, want %d", r.Changes, tc.changes)
			}
			if r.Message == "" || r.Observations != len(tc.history) {
				t.Errorf("result = %+v", r)
			}
		})
	}
}

func TestClassifyDefaultsTheWindow(t *testing.T) {
	r := Classify(hist("ab", "ab"), Policy{})
	if r.Window != DefaultWindow || r.Verdict != Insufficient {
		t.Fatalf("result = %+v", r)
	}
}

func TestShouldSurfaceOnlyTheNoFixpointVerdicts(t *testing.T) {
	for _, v := range []Verdict{Converging, Complete, Thrashing, Starved, Insufficient, Verdict("X")} {
		want := v == Thrashing || v == Starved
		if v.ShouldSurface() != want {
			t.Errorf("%s.ShouldSurface() = %v", v, !want)
		}
		if v.Known() != (v != "X") {
			t.Errorf("%s.Known() wrong", v)
		}
	}
}

func TestAHugeWindowIsInsufficientNotAPanic(t *testing.T) {
	history := []Snapshot{{Residual: []string{"a"}}, {Residual: []string{"a"}}}
	if got := Classify(history, Policy{Window: math.MaxInt}); got.Verdict != Insufficient {
		t.Fatalf("got %s", got.Verdict)
	}
}
