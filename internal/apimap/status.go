package apimap

import (
	"cmp"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// The CRD's bounds on the status fields this file fills (api/v1alpha1). A list longer than its bound is
// cut and reported in ResumePlanStatus.Truncated; a string longer than its bound is cut with "…", so a
// status write never fails on a bound whatever the engine reported.
const (
	maxMessage         = 1024
	maxPlanSteps       = 256
	maxStepID          = 128
	maxNoteLines       = 32
	maxNoteLine        = 1024
	maxUnattributed    = 64
	maxClaimed         = 256
	maxUnpromised      = 256
	maxFilePath        = 1024
	maxTruncationItems = 8
	maxRedactions      = 32
	maxPatternName     = 128
	maxSchemaVersion   = 1000
)

// reasonRE is the CRD's pattern for reason codes.
var reasonRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,63}$`)

// patternNameRE is the CRD's pattern and length for a redaction pattern's name.
var patternNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,` + strconv.Itoa(maxPatternName-1) + `}$`)

// SessionRecording is what a verify result says about an intact session, in the API's terms: the
// counts, the usage with its prompt-cache split, whether the log was closed by session_end, the
// schema version, the redaction counts by pattern name (cut to the CRD's bound) and whether there is
// a vault. The cost is the session's calls priced with prices.
func SessionRecording(v *task.VerifyResult, prices *price.Table) v1alpha1.SessionRecording {
	state := v1alpha1.LogOpen
	if v.Ended {
		state = v1alpha1.LogClosed
	}
	rec := v1alpha1.SessionRecording{
		EventsHash: v.EventsHash,
		LogState:   state,
		Events:     new(v.Events),
		Steps:      new(v.Steps),
		ModelCalls: new(v.ModelCalls),
		ToolCalls:  new(v.ToolCalls),
		Blobs:      new(v.Blobs),
		Bytes:      new(v.Bytes),
		Usage:      Usage(v.Usage, prices),
	}
	if v.AddedBytes > 0 { // a result from before addedBytes has none: a session's log alone is more than 0
		rec.AddedBytes = new(v.AddedBytes)
	}
	rec.SchemaVersion = int32(min(max(v.SchemaVersion, 0), maxSchemaVersion))
	rec.Vault = v1alpha1.VaultAbsent
	if v.Vault {
		rec.Vault = v1alpha1.VaultPresent
	}
	rec.RedactedSecrets, rec.RedactedPatterns, rec.Redactions = redactionCounts(v.Redactions)
	return rec
}

// redactionCounts is the total of a verify result's counts by pattern, how many patterns there are,
// and the maxRedactions that replaced the most, by name. A pattern name the CRD would refuse (the
// name is meta.json's, which a push from anywhere may carry) is counted but not listed.
func redactionCounts(counts []task.PatternCount) (total *int64, patterns *int32, listed []v1alpha1.RedactionCount) {
	var sum int64
	for _, c := range counts {
		sum += max(c.Count, 0)
		if patternNameRE.MatchString(c.Pattern) {
			listed = append(listed, v1alpha1.RedactionCount{Pattern: c.Pattern, Count: new(max(c.Count, 0))})
		}
	}
	if len(listed) > maxRedactions {
		slices.SortStableFunc(listed, func(a, b v1alpha1.RedactionCount) int { return cmp.Compare(*b.Count, *a.Count) })
		listed = listed[:maxRedactions]
	}
	slices.SortFunc(listed, func(a, b v1alpha1.RedactionCount) int { return strings.Compare(a.Pattern, b.Pattern) })
	listed = slices.CompactFunc(listed, func(a, b v1alpha1.RedactionCount) bool { return a.Pattern == b.Pattern })
	return new(sum), new(int32(min(len(counts), math.MaxInt32))), listed
}

// ResumePlanVerdicts is a resume-plan result in the API's terms: every verdict field of a
// ResumePlanStatus, with lists and strings cut to the CRD's bounds. Conditions, observedGeneration and
// evaluatedAt are left to the controller.
func ResumePlanVerdicts(r *task.ResumePlanResult) (v1alpha1.ResumePlanStatus, error) {
	rep := r.Report
	var out v1alpha1.ResumePlanStatus
	var err error
	if out.Verdict, err = ResumeVerdict(rep.Resume.Verdict); err != nil {
		return out, err
	}
	if out.Reason, err = reasonCode("resume reason", string(rep.Resume.Reason)); err != nil {
		return out, err
	}
	out.Message = Message(rep.Resume.Message)
	out.ResumeSHA = rep.Resume.ResumeSHA
	if a := rep.Resume.ResumeAfterStep; a != nil && *a >= 0 {
		out.ResumeAfterStep = new(*a)
	}
	out.ResidualSteps = new(int32(len(rep.Resume.Residual)))

	var cuts truncations
	residual := cuts.cut("residual", rep.Resume.Residual, maxPlanSteps)
	for _, id := range residual {
		out.Residual = append(out.Residual, v1alpha1.PlanStep{ID: cutString(id, maxStepID)})
	}
	verified := cut(&cuts, "verified", rep.Resume.Verified, maxPlanSteps)
	for _, s := range verified {
		out.Verified = append(out.Verified, v1alpha1.PlanStep{ID: cutString(s.ID, maxStepID), SHA: s.SHA})
	}

	out.Stop = runStop(rep.Reachability.Stop)
	if out.Reachability, err = reachabilityStatus(rep); err != nil {
		return out, err
	}
	if out.Rewind, err = rewindPlan(rep.Rewind, &cuts); err != nil {
		return out, err
	}
	if out.Convergence, err = convergenceStatus(rep); err != nil {
		return out, err
	}
	if out.Drift.Verdict, err = PlanDriftVerdict(rep.Drift.Verdict); err != nil {
		return out, err
	}
	if ev := rep.Drift.Evidence; ev != nil {
		var files []string
		seen := map[string]bool{}
		for _, p := range ev.Unattributed {
			if p.Path != "" && !seen[p.Path] {
				seen[p.Path] = true
				files = append(files, cutString(p.Path, maxFilePath))
			}
		}
		out.Drift.UnattributedFiles = cuts.cut("unattributedFiles", files, maxUnattributed)
	}
	out.Drift.Suggestion = Message(rep.Drift.Suggestion)

	rc := rep.Reconciliation
	out.Reconciliation = v1alpha1.Reconciliation{
		Promised:               new(int32(rc.Promised)),
		MarkedDone:             new(int32(rc.MarkedDone)),
		Evidenced:              new(int32(rc.Evidenced)),
		ClaimedWithoutEvidence: cutEach(cuts.cut("claimedWithoutEvidence", rc.Claimed, maxClaimed), maxStepID),
		UnpromisedFiles:        cutEach(cuts.cut("unpromisedFiles", rc.Unpromised, maxUnpromised), maxFilePath),
	}

	out.Evidence = v1alpha1.PlanEvidence{EventsHash: r.Evidence.EventsHash, ResolvedCommit: r.Evidence.ResolvedCommit, Plan: v1alpha1.PlanAbsent}
	if r.Evidence.PlanPresent {
		out.Evidence.Plan = v1alpha1.PlanDeclared
	}
	out.Truncated = cuts.list
	return out, nil
}

func reachabilityStatus(rep task.Report) (v1alpha1.ReachabilityStatus, error) {
	state, err := Reachability(rep.Reachability.Reachability)
	if err != nil {
		return v1alpha1.ReachabilityStatus{}, err
	}
	reason, err := reasonCode("reachability reason", string(rep.Reachability.Reason))
	if err != nil {
		return v1alpha1.ReachabilityStatus{}, err
	}
	return v1alpha1.ReachabilityStatus{State: state, Reason: string(reason), Message: Message(rep.Reachability.Message)}, nil
}

func rewindPlan(rw task.RewindView, cuts *truncations) (v1alpha1.RewindPlan, error) {
	decision, err := RewindDecision(rw.Decision)
	if err != nil {
		return v1alpha1.RewindPlan{}, err
	}
	reason, err := reasonCode("rewind reason", string(rw.Reason))
	if err != nil {
		return v1alpha1.RewindPlan{}, err
	}
	out := v1alpha1.RewindPlan{Decision: decision, Reason: reason, Message: Message(rw.Message), TranscriptDigest: rw.TranscriptDigest}
	if decision == v1alpha1.DecisionRewind {
		out.RewindToTurn = new(int32(rw.RewindToTurn))
		out.DroppedTurns = new(int32(len(rw.DroppedTurns)))
	}
	var lines []string
	for _, l := range rw.Note.Lines {
		if l != "" { // an empty line is not a line the CRD admits
			lines = append(lines, cutString(l, maxNoteLine))
		}
	}
	out.NoGoodNote = cuts.cut("noGoodNote", lines, maxNoteLines)
	return out, nil
}

func convergenceStatus(rep task.Report) (v1alpha1.Convergence, error) {
	c := rep.Convergence
	verdict, err := ConvergenceVerdict(c.Verdict)
	if err != nil {
		return v1alpha1.Convergence{}, err
	}
	reason, err := reasonCode("convergence reason", string(c.Reason))
	if err != nil {
		return v1alpha1.Convergence{}, err
	}
	return v1alpha1.Convergence{Verdict: verdict, Reason: reason, Message: Message(c.Message),
		Window: new(int32(c.Window)), Observations: new(int32(c.Observations)), Changes: new(int32(c.Changes))}, nil
}

// reasonCode checks an engine reason against the CRD's pattern: a reason is a machine-readable token,
// so one that does not fit is an engine this mapping does not know, never something to cut.
func reasonCode(kind, s string) (v1alpha1.ReasonCode, error) {
	if !reasonRE.MatchString(s) {
		return "", &UnknownValueError{Kind: kind, Value: s}
	}
	return v1alpha1.ReasonCode(s), nil
}

// Message is s cut to the 1024 bytes a status message holds.
func Message(s string) string { return cutString(s, maxMessage) }

// cutString cuts s to at most max bytes on a rune boundary, ending in "…" when it was cut.
func cutString(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ellipsis = "…"
	n := max - len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

func cutEach(items []string, max int) []string {
	for i := range items {
		items[i] = cutString(items[i], max)
	}
	return items
}

// truncations collects the lists that were cut to their bound.
type truncations struct{ list []v1alpha1.ListTruncation }

// cut returns items cut to max, noting the cut; an empty list is nil, which the CRD's MinItems admits.
func cut[T any](t *truncations, field string, items []T, max int) []T {
	if len(items) == 0 {
		return nil
	}
	if len(items) > max {
		if len(t.list) < maxTruncationItems {
			t.list = append(t.list, v1alpha1.ListTruncation{Field: field, Total: int64(len(items))})
		}
		items = items[:max]
	}
	return append([]T(nil), items...)
}

func (t *truncations) cut(field string, items []string, max int) []string {
	return cut(t, field, items, max)
}

// VerifyProblemReason is the Verified condition's reason for the problem a verify task found:
// DigestMismatch when stored bytes do not hash to their recorded digest, else SessionCorrupt.
func VerifyProblemReason(v *task.VerifyResult) string {
	if v.ProblemKind == task.ProblemDigestMismatch {
		return v1alpha1.ReasonDigestMismatch
	}
	return v1alpha1.ReasonSessionCorrupt
}

// runStop is the API's word for how a run stopped. A stop this build does not name, and one the
// recording cannot tell (its recorder died or was stopped first), is Interrupted.
func runStop(stop ledger.StopReason) v1alpha1.RunStop {
	switch stop {
	case ledger.StopSuspended:
		return v1alpha1.RunSuspended
	case ledger.StopFinished:
		return v1alpha1.RunFinished
	case ledger.StopFailed:
		return v1alpha1.RunFailed
	case ledger.StopKilled:
		return v1alpha1.RunKilled
	case ledger.StopDeadline:
		return v1alpha1.RunDeadlineExceeded
	}
	return v1alpha1.RunInterrupted
}

// RunEnd is the engine's form of how a recorded agent ended (AgentSession status.agentEnd); ok is
// false when the status holds none.
func RunEnd(e v1alpha1.AgentEnd) (end ledger.RunEnd, ok bool) {
	end = ledger.RunEnd{How: ledger.EndHow(e.How), Signal: e.Signal}
	if !end.How.Known() || end.How == ledger.EndStopped {
		return ledger.RunEnd{}, false
	}
	if e.ExitCode != nil {
		end.ExitCode = new(int(*e.ExitCode))
	}
	return end, true
}
