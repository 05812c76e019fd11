package task

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// MaxTerminationMessage is the kubelet's limit on a container's termination message.
const MaxTerminationMessage = 4096

// Summary is the termination message of an engine Job: enough for a controller to set a condition
// when the result object cannot be read, and for `kubectl describe pod` to say what happened.
type Summary struct {
	APIVersion string        `json:"apiVersion"`
	Task       Name          `json:"task"`
	JobUID     string        `json:"jobUID"`
	Outcome    Outcome       `json:"outcome"`
	Reason     FailureReason `json:"reason,omitempty"`
	// Headline is the task's finding in a few words: a verdict, "intact", "passed", "goal reached".
	Headline string `json:"headline,omitempty"`
	Message  string `json:"message,omitempty"`
	// Truncated is true when Message was cut to fit the limit.
	Truncated bool `json:"truncated,omitempty"`
}

// TerminationMessage summarises a result in at most MaxTerminationMessage bytes of JSON. A long
// failure message is cut at a rune boundary, never mid-character, and the cut is flagged.
func TerminationMessage(r *Result) []byte {
	s := Summary{APIVersion: APIVersion, Task: r.Task, JobUID: r.JobUID, Outcome: r.Outcome, Headline: headline(r)}
	if r.Failure != nil {
		s.Reason, s.Message = r.Failure.Reason, r.Failure.Message
	}
	out, _ := json.Marshal(s)
	for len(out) > MaxTerminationMessage {
		// JSON escaping can grow a byte into six, so cut by the overshoot and measure again.
		over := len(out) - MaxTerminationMessage
		s.Message, s.Truncated = cutRunes(s.Message, len(s.Message)-over-len("…")), true
		s.Message += "…"
		if s.Message == "…" {
			s.JobUID, s.Headline = clip(s.JobUID, 253), clip(s.Headline, 256)
		}
		out, _ = json.Marshal(s)
	}
	return out
}

// DecodeSummary reads a termination message.
func DecodeSummary(data []byte) (*Summary, error) {
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("termination message: %w", err)
	}
	if s.APIVersion != APIVersion {
		return nil, fmt.Errorf("termination message: apiVersion %q, want %q", s.APIVersion, APIVersion)
	}
	return &s, nil
}

func headline(r *Result) string {
	switch {
	case r.Outcome == Failed:
		return "failed"
	case r.Verify != nil:
		if !r.Verify.Intact {
			return "corrupt"
		}
		if !r.Verify.Ended {
			return "intact, not ended"
		}
		return "intact"
	case r.ResumePlan != nil:
		rep := r.ResumePlan.Report
		return fmt.Sprintf("%s %s %s", rep.Resume.Verdict, rep.Reachability.Reachability, rep.Rewind.Decision)
	case r.Replay != nil:
		if r.Replay.Passed {
			return "passed"
		}
		return "diverged"
	case r.Fork != nil:
		switch {
		case r.Fork.DivergedAtStep != nil:
			return fmt.Sprintf("diverged at step %d", *r.Fork.DivergedAtStep)
		case r.Fork.ReachedGoal == nil:
			return "finished"
		case *r.Fork.ReachedGoal:
			return "goal reached"
		}
		return "goal missed"
	case r.Checkpoint != nil:
		if r.Checkpoint.Deduplicated {
			return "unchanged"
		}
		return "captured"
	case r.GCSweep != nil:
		return fmt.Sprintf("deleted %d blob(s)", r.GCSweep.DeletedBlobs)
	}
	return ""
}

// cutRunes returns the longest prefix of s of at most n bytes that ends on a rune boundary.
func cutRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutRunes(s, n)
}
