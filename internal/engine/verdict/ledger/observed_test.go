package ledger

import (
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// What ran the agent saw of its end stands in for the recording's END only where the recording cannot
// tell: no END, or an END from a recorder that was stopped without seeing the agent end. The
// recorder's own word on how the agent ended, and a pause the agent asked for, are never overridden
// by a clean exit.
func TestAnObservedEndStandsInOnlyWhereTheRecordingCannotTell(t *testing.T) {
	code := 3
	killed := RunEnd{How: EndKilled, Signal: "SIGKILL"}
	finished := RunEnd{How: EndFinished}
	failed := RunEnd{How: EndFailed, ExitCode: &code}
	end := func(e RunEnd) session.Event { return rec(session.AuthorRecorder, End(e)) }
	pause := rec(session.AuthorRecorder, Suspend(1, "d1", ""))
	cases := []struct {
		name          string
		events        []session.Event
		observed      RunEnd
		wantStop      StopReason
		wantSuspended bool
	}{
		{"no END, killed", nil, killed, StopKilled, true},
		{"no END, finished", nil, finished, StopFinished, false},
		{"a stopped recorder, failed", []session.Event{end(RunEnd{How: EndStopped})}, failed, StopFailed, true},
		{"a stopped recorder, finished", []session.Event{end(RunEnd{How: EndStopped})}, finished, StopFinished, false},
		{"the recorder saw it fail", []session.Event{end(failed)}, finished, StopFailed, true},
		{"the recorder saw it finish", []session.Event{end(finished)}, killed, StopFinished, false},
		{"a pause, then a clean exit", []session.Event{pause, end(RunEnd{How: EndStopped})}, finished, StopSuspended, true},
		{"a pause, then killed", []session.Event{pause}, killed, StopKilled, true},
		{"nothing observed", []session.Event{end(RunEnd{How: EndStopped})}, RunEnd{}, StopStopped, false},
		{"an agent's END is no END", []session.Event{rec(session.AuthorAgent, End(finished))}, killed, StopKilled, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Fold(tc.events).Observed(tc.observed)
			if s.Stop != tc.wantStop || s.Suspended != tc.wantSuspended {
				t.Fatalf("stop %q suspended %v, want %q %v", s.Stop, s.Suspended, tc.wantStop, tc.wantSuspended)
			}
		})
	}
}

// A run's end round-trips through its text, and text that is not one names the part it cannot read.
func TestARunsEndReadsBackAsWritten(t *testing.T) {
	code := 137
	for _, e := range []RunEnd{{How: EndFinished}, {How: EndFailed, ExitCode: new(3)}, {How: EndKilled, Signal: "SIGKILL"},
		{How: EndKilled, ExitCode: &code, Signal: "SIGKILL"}, {How: EndDeadline}} {
		got, err := ParseEnd(e.String())
		if err != nil || got.String() != e.String() {
			t.Errorf("ParseEnd(%q) = %+v, %v", e.String(), got, err)
		}
	}
	for _, bad := range []string{"", "finished", "Killed:", "Failed:256", "Failed:-1", "Failed:3:4", "Killed:SIGKILL:SIGTERM",
		"Killed:sigkill", "Killed:SIG", "Failed:9999999999999999999999", "Killed:SIGKILL\x00", "Finished:\xff"} {
		if _, err := ParseEnd(bad); err == nil {
			t.Errorf("ParseEnd(%q) succeeded", bad)
		}
	}
}
