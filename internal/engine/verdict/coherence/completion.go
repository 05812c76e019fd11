package coherence

import (
	"fmt"
	"slices"
	"strings"
)

// EvidenceKind says what backs (or contradicts) a step's completion.
type EvidenceKind string

const (
	// EvidenceAssertion: the deliverable is not observable (research, unknown); accepted as asserted.
	EvidenceAssertion EvidenceKind = "assertion"
	// EvidenceFileWritten: a write attributed to this step.
	EvidenceFileWritten EvidenceKind = "file-written"
	// EvidenceRunWideMutation: the step names no file, and something was written in the run.
	EvidenceRunWideMutation EvidenceKind = "run-wide-mutation"
	// EvidenceDelivered: a commit, push or PR call succeeded.
	EvidenceDelivered EvidenceKind = "delivered"
	// EvidenceCommandRan: a run tool ran and did not fail.
	EvidenceCommandRan EvidenceKind = "command-ran"
	// EvidenceReadBack: a file the step names was read back.
	EvidenceReadBack EvidenceKind = "read-back"
	// EvidenceToolAnswered: a tool the step names answered successfully.
	EvidenceToolAnswered EvidenceKind = "tool-answered"
	// EvidenceContradicted: the last command failed.
	EvidenceContradicted EvidenceKind = "contradicted"
	// EvidenceNone: nothing in the tool stream backs the step.
	EvidenceNone EvidenceKind = "none"
)

// Observed reports whether the evidence is something the recorder saw happen to this step: a path it
// promised written, its named tool answering, its command passing, its file read back. An assertion
// and a write somewhere in the run are accepted for steering, but neither shows the step's own work.
func (k EvidenceKind) Observed() bool {
	switch k {
	case EvidenceFileWritten, EvidenceDelivered, EvidenceCommandRan, EvidenceReadBack, EvidenceToolAnswered:
		return true
	}
	return false
}

// Completion says whether the tool stream holds evidence that a step happened.
type Completion struct {
	ID       string       `json:"id"`
	Kind     Kind         `json:"kind"`
	Kinds    []Kind       `json:"kinds,omitempty"`
	Accepted bool         `json:"accepted"`
	Evidence EvidenceKind `json:"evidence"`
	Paths    []string     `json:"paths,omitempty"`
	Rounds   []int        `json:"rounds,omitempty"`
	// CallSteps are the log steps of the recorded calls behind the evidence, in log order.
	CallSteps    []int64 `json:"callSteps,omitempty"`
	Contradicted bool    `json:"contradicted"`
	Why          string  `json:"why"`
	// Remedy tells the run what to do next when the step is not accepted.
	Remedy string `json:"remedy,omitempty"`
}

// AcceptCompletion judges one step against the tool stream. A done with no artefact is a claim, not a
// completion — so the evidence required depends on the step's kind:
//
//	write    a write whose path attributes to this step (or, for a step naming no file, any write)
//	command  a run tool that ran; contradicted if the last one failed
//	deliver  git_commit / git_push / gh_pr, or a run whose command is a commit or push
//	verify   a run, or a read-back of a path this step names
//	research and unknown: nothing observable — accepted as an assertion, deliberately, unless the
//	         step names its tools: then one of them must have answered successfully
//
// The last row is the point, not a gap: "decide which library to use" produces knowledge that lives
// in the model's reply, and refusing it would fail correct work. The result says "assertion" so the
// boundary is documented rather than hidden. plan supplies the other steps, so attribution can see them.
func AcceptCompletion(step Step, plan Plan, rounds []Round) Completion {
	kind, kinds := ClassifyStep(step.Text)
	c := Completion{ID: step.ID, Kind: kind, Kinds: kinds}
	steps := plan.Steps
	if len(steps) == 0 {
		steps = []Step{step}
	}
	calls := flatten(rounds)
	mine := func(p string) bool {
		a, ok := Attribute(p, steps)
		return ok && a.StepID == step.ID
	}
	switch kind {
	case KindWrite:
		return acceptWrite(c, step, calls, mine)
	case KindDeliver:
		return acceptDeliver(c, calls)
	case KindCommand:
		return acceptCommand(c, calls)
	case KindVerify:
		return acceptVerify(c, calls, mine)
	}
	if len(step.Tools) > 0 {
		return acceptTool(c, step, calls)
	}
	c.Accepted, c.Evidence = true, EvidenceAssertion
	c.Why = fmt.Sprintf("this step's deliverable is not observable in the tool stream (kind %s), so the assertion is "+
		"accepted as-is — refusing it would fail correct work", kind)
	return c
}

func acceptWrite(c Completion, step Step, calls []call, mine func(string) bool) Completion {
	var anyWrite bool
	for _, fc := range calls {
		if !fc.mutated || len(fc.paths) == 0 {
			continue
		}
		anyWrite = true
		for _, p := range fc.paths {
			if mine(p) {
				c.Paths = appendNew(c.Paths, p)
				c.Rounds = appendNew(c.Rounds, fc.label)
				c.CallSteps = appendNew(c.CallSteps, fc.step)
			}
		}
	}
	if len(c.Paths) > 0 {
		c.Accepted, c.Evidence, c.Why = true, EvidenceFileWritten, "a file this step names was written or edited"
		return c
	}
	named := StepTargets(step.Text).Paths
	if len(named) == 0 && anyWrite {
		// The weakest true statement available, and still worth making: a write step in a run that
		// wrote nothing at all is provably unfinished, and any write anywhere satisfies it.
		c.Accepted, c.Evidence = true, EvidenceRunWideMutation
		c.Why = "this step names no file, so it cannot be attributed — but files were written in this run, " +
			"the only check available, and it passes"
		return c
	}
	c.Evidence = EvidenceNone
	c.Why = "this step asks for something to be written and no file was written or edited in this session at all"
	if len(named) > 0 {
		c.Why = fmt.Sprintf("this step names %s and no tool call in this session wrote or edited it", quoteAll(named))
	}
	c.Remedy = "write the file, then mark the step done — or leave it unmarked with a note of what stopped you, " +
		"which keeps it visible instead of hiding it"
	return c
}

// acceptEveryCall accepts c as evidence of kind on every successful call match picks, each one's round
// and step noted, the first one's name in Why.
func acceptEveryCall(c Completion, calls []call, match func(call) bool, saw string, kind EvidenceKind) Completion {
	for _, fc := range calls {
		if fc.ok && match(fc) {
			c.Rounds = appendNew(c.Rounds, fc.label)
			c.CallSteps = appendNew(c.CallSteps, fc.step)
			if c.Evidence == "" {
				c.Why = fc.name + saw
			}
			c.Accepted, c.Evidence = true, kind
		}
	}
	return c
}

func acceptDeliver(c Completion, calls []call) Completion {
	c = acceptEveryCall(c, calls, func(fc call) bool {
		return DeliverTools[fc.name] || (fc.isRun && deliverCommand.MatchString(commandOf(fc)))
	}, " succeeded in this session", EvidenceDelivered)
	if c.Accepted {
		return c
	}
	c.Evidence = EvidenceNone
	c.Why = "this step is a commit, push or pull request and no such call succeeded in this session"
	c.Remedy = "do it now — this is the step that gets lost when the turns run out, so do it before anything more interesting"
	return c
}

func acceptCommand(c Completion, calls []call) Completion {
	last, ran := lastRun(calls)
	if !ran {
		c.Evidence = EvidenceNone
		c.Why = "this step asks for something to be run and no command, program or evaluation ran in this session"
		c.Remedy = "run it and read the output — a step like this cannot be finished by describing what the command would print"
		return c
	}
	c.Rounds, c.CallSteps = []int{last.label}, []int64{last.step}
	what := commandOf(last)
	if what == "" {
		what = last.name
	}
	if !last.ok {
		// Only the latest run counts: an earlier green run says nothing about the code as it is now.
		c.Evidence = EvidenceNone
		c.Why = fmt.Sprintf("the last run in this session (`%s`) errored before it could report, so there is no result to accept", what)
		c.Remedy = "run it again and read the output — an earlier green run does not cover the changes made since"
		return c
	}
	if runFailed(last.result) {
		c.Evidence, c.Contradicted = EvidenceContradicted, true
		c.Why = fmt.Sprintf("the last command in this session (`%s`) failed (exit code %v)", what, exitCodeOf(last.result))
		c.Remedy = "fix what it reported and run it again, or leave the step unmarked with a note carrying the error — " +
			"a done over a red command is exactly the claim this check exists to catch"
		return c
	}
	c.Accepted, c.Evidence, c.Why = true, EvidenceCommandRan, last.name+" ran and did not fail"
	return c
}

func acceptVerify(c Completion, calls []call, mine func(string) bool) Completion {
	if last, ran := lastRun(calls); ran && last.ok {
		c.Accepted, c.Evidence = true, EvidenceCommandRan
		c.Rounds, c.CallSteps, c.Why = []int{last.label}, []int64{last.step}, "a command ran in this session, which is how a check gets made"
		return c
	}
	for _, fc := range calls {
		p, _ := fc.args["path"].(string)
		if p = NormPath(p); fc.isOrient && fc.ok && p != "" && mine(p) {
			c.Paths = appendNew(c.Paths, p)
			c.Rounds = appendNew(c.Rounds, fc.label)
			c.CallSteps = appendNew(c.CallSteps, fc.step)
		}
	}
	if len(c.Paths) > 0 {
		c.Accepted, c.Evidence, c.Why = true, EvidenceReadBack, "a file this step names was read back after the work"
		return c
	}
	c.Evidence = EvidenceNone
	c.Why = "this step asks for something to be checked and nothing was run, and nothing it names was read back"
	c.Remedy = `run the check, or read the artefact back and say what you saw — "it should work" is the claim, not the check`
	return c
}

// acceptTool judges a step whose work is not a file or a command (a search, a tracker update) but which
// names its tools: a successful answer of one of them is the evidence. Any successful call counts, as
// for a delivery: a later retry that failed does not undo what already happened.
func acceptTool(c Completion, step Step, calls []call) Completion {
	c = acceptEveryCall(c, calls, func(fc call) bool { return slices.Contains(step.Tools, fc.name) },
		" answered successfully in this session", EvidenceToolAnswered)
	if c.Accepted {
		return c
	}
	c.Evidence = EvidenceNone
	c.Why = fmt.Sprintf("this step names %s and no call of it answered successfully in this session", quoteAll(step.Tools))
	c.Remedy = "call the tool and read its answer, then mark the step done"
	return c
}

// lastRun is the latest call that ran something, whether or not it errored: only the latest run
// counts, so an errored last run is never covered by an earlier green one (the seed skipped errored
// runs; decided otherwise, see the package doc).
func lastRun(calls []call) (call, bool) {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].isRun {
			return calls[i], true
		}
	}
	return call{}, false
}

func exitCodeOf(result map[string]any) any {
	if v, ok := result["exitCode"]; ok {
		return v
	}
	return "non-zero"
}

func appendNew[T comparable](list []T, v T) []T {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

func quoteAll(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = "`" + p + "`"
	}
	return strings.Join(q, ", ")
}
