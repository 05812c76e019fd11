package ledger

import (
	"fmt"
	"strconv"
	"strings"
)

// Observed is s with end taken for how the run ended, when the recording cannot tell: it holds no END
// (its recorder died first) or one that says the recorder was stopped without seeing the agent end
// (a proxy beside the agent). end is what ran the agent saw instead (the kubelet's word on the agent's
// container), which the agent cannot write either. An END that says how the agent ended is kept.
func (s State) Observed(end RunEnd) State {
	if (s.End != nil && s.End.How != EndStopped) || !end.How.Known() || end.How == EndStopped {
		return s
	}
	paused := s.Stop == StopSuspended // a pending pause is the one thing stopOf read besides the end
	s.End = &end
	s.Stop, s.Suspended = stopOf(paused, s.End)
	return s
}

// String writes e as ParseEnd reads it: the way it ended, then the exit code or the signal.
func (e RunEnd) String() string {
	out := string(e.How)
	if e.ExitCode != nil {
		out += ":" + strconv.Itoa(*e.ExitCode)
	}
	if e.Signal != "" {
		out += ":" + e.Signal
	}
	return out
}

// ParseEnd reads a run's end as RunEnd.String writes it: Finished, Failed:3, Killed:SIGKILL,
// Killed:137:SIGKILL or DeadlineExceeded.
func ParseEnd(text string) (RunEnd, error) {
	parts := strings.Split(text, ":")
	e := RunEnd{How: EndHow(parts[0])}
	if !e.How.Known() {
		return RunEnd{}, fmt.Errorf("run end %q: %q is not one of Finished, Failed, Killed, DeadlineExceeded or Stopped", text, parts[0])
	}
	for _, p := range parts[1:] {
		if code, err := strconv.Atoi(p); err == nil && e.ExitCode == nil && e.Signal == "" && code >= 0 && code <= 255 {
			e.ExitCode = &code
			continue
		}
		if strings.HasPrefix(p, "SIG") && len(p) > 3 && len(p) <= 16 && e.Signal == "" && strings.Trim(p[3:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-") == "" {
			e.Signal = p
			continue
		}
		return RunEnd{}, fmt.Errorf("run end %q: %q is neither an exit code (0 to 255) nor a signal (SIGKILL), or comes twice", text, p)
	}
	return e, nil
}
