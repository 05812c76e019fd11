package convergence

import (
	"fmt"
	"slices"
)

// Verdict is the convergence verdict.
type Verdict string

const (
	Converging   Verdict = "CONVERGING"
	Complete     Verdict = "COMPLETE"
	Thrashing    Verdict = "THRASHING"
	Starved      Verdict = "STARVED"
	Insufficient Verdict = "INSUFFICIENT"
)

// Known reports whether v is one of the five verdicts.
func (v Verdict) Known() bool {
	switch v {
	case Converging, Complete, Thrashing, Starved, Insufficient:
		return true
	}
	return false
}

// ShouldSurface reports whether v is a ground-truth stop signal: the residual has no fixpoint.
func (v Verdict) ShouldSurface() bool { return v == Thrashing || v == Starved }

// Reason is the machine-readable cause of a convergence verdict.
type Reason string

const (
	ReasonNoHistory      Reason = "NoResidualHistory"
	ReasonShortHistory   Reason = "HistoryShorterThanWindow"
	ReasonResidualEmpty  Reason = "ResidualEmpty"
	ReasonNewLow         Reason = "ResidualReachedNewLow"
	ReasonMotionNoGain   Reason = "ResidualChangedWithoutProgress"
	ReasonResidualStatic Reason = "ResidualUnchanged"
)

// DefaultWindow is how many turns a trend is judged over. A single step can legitimately take a few
// turns (read, write, run the tests, fix), so the window is generous: STARVED needs eight turns in a
// row in which not one step was re-verified.
const DefaultWindow = 8

// Policy shapes the verdict.
type Policy struct {
	// Window is the number of most recent turns judged; values below 1 mean DefaultWindow.
	Window int `json:"window"`
}

// Snapshot is the residual after one turn.
type Snapshot struct {
	// Turn is the 0-based index of the turn (model call) the snapshot was taken after.
	Turn int `json:"turn"`
	// Residual is the set of step ids still to do.
	Residual []string `json:"residual"`
}

// Result is the convergence verdict with its evidence.
type Result struct {
	Verdict Verdict `json:"verdict"`
	Reason  Reason  `json:"reason"`
	Message string  `json:"message"`
	// Window is the number of turns judged; Observations the number of snapshots available.
	Window       int `json:"window"`
	Observations int `json:"observations"`
	// Latest is the latest residual size; BestBefore the smallest size before the window, BestInWindow
	// the smallest inside it (both -1 when not computed).
	Latest       int `json:"latest"`
	BestBefore   int `json:"bestBefore"`
	BestInWindow int `json:"bestInWindow"`
	// Changes counts the turns within the window whose residual differed from the turn before.
	Changes int `json:"changes"`
}

// Classify judges a residual history (oldest first). It is pure.
func Classify(history []Snapshot, policy Policy) Result {
	w := policy.Window
	if w < 1 {
		w = DefaultWindow
	}
	r := Result{Window: w, Observations: len(history), Latest: -1, BestBefore: -1, BestInWindow: -1}
	if len(history) == 0 {
		return r.with(Insufficient, ReasonNoHistory, "no residual history: the run declared no measurable steps or took no turn")
	}
	r.Latest = len(history[len(history)-1].Residual)
	if r.Latest == 0 {
		return r.with(Complete, ReasonResidualEmpty, "the residual is empty: every declared step is re-verified")
	}
	if w >= len(history) { // also keeps w+1 from overflowing for a huge configured window
		return r.with(Insufficient, ReasonShortHistory, fmt.Sprintf(
			"%d turn(s) observed; judging a trend over a %d-turn window needs more than %d", len(history), w, w))
	}
	return judgeWindow(history, r)
}

// judgeWindow applies CONVERGING / THRASHING / STARVED to the last Window transitions.
func judgeWindow(history []Snapshot, r Result) Result {
	start := len(history) - r.Window - 1 // the snapshot the window is measured from
	r.BestBefore = minSize(history[:start+1])
	r.BestInWindow = minSize(history[start+1:])
	r.Changes = changes(history[start:])
	switch {
	case r.BestInWindow < r.BestBefore:
		return r.with(Converging, ReasonNewLow, fmt.Sprintf(
			"the residual reached %d step(s) within the last %d turns, below the %d it never went under before",
			r.BestInWindow, r.Window, r.BestBefore))
	case r.Changes > 0:
		return r.with(Thrashing, ReasonMotionNoGain, fmt.Sprintf(
			"the residual changed %d time(s) in the last %d turns without going below %d step(s): motion without progress",
			r.Changes, r.Window, r.BestBefore))
	default:
		return r.with(Starved, ReasonResidualStatic, fmt.Sprintf(
			"the residual stayed at the same %d step(s) for the last %d turns: no step was re-verified",
			r.Latest, r.Window))
	}
}

func (r Result) with(v Verdict, reason Reason, msg string) Result {
	r.Verdict, r.Reason, r.Message = v, reason, msg
	return r
}

func minSize(snaps []Snapshot) int {
	m := len(snaps[0].Residual)
	for _, s := range snaps[1:] {
		m = min(m, len(s.Residual))
	}
	return m
}

// changes counts transitions whose residual set differs. Order is ignored: re-ordering the same steps
// is neither progress nor motion.
func changes(snaps []Snapshot) int {
	n := 0
	for i := 1; i < len(snaps); i++ {
		if !sameSet(snaps[i-1].Residual, snaps[i].Residual) {
			n++
		}
	}
	return n
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
