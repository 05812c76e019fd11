package replay

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// TestEndOfReadsHowTheAgentEnded maps what a harness returned to the recorder's END, with real
// processes for an exit status and a signal.
func TestEndOfReadsHowTheAgentEnded(t *testing.T) {
	exitErr := func(script string) error {
		err := exec.Command("sh", "-c", script).Run()
		if err == nil {
			t.Fatalf("%q exited 0", script)
		}
		return fmt.Errorf("the agent: %w", err)
	}
	three := 3
	for _, tc := range []struct {
		name string
		err  error
		want ledger.RunEnd
	}{
		{"returned", nil, ledger.RunEnd{How: ledger.EndFinished}},
		{"exited non-zero", exitErr("exit 3"), ledger.RunEnd{How: ledger.EndFailed, ExitCode: &three}},
		{"killed by a signal", exitErr("kill -KILL $$"), ledger.RunEnd{How: ledger.EndKilled, Signal: "killed"}},
		{"out of time", fmt.Errorf("waiting: %w", context.DeadlineExceeded), ledger.RunEnd{How: ledger.EndDeadline}},
		{"cancelled", context.Canceled, ledger.RunEnd{How: ledger.EndKilled}},
		{"panicked", fmt.Errorf("%w: boom", ErrHarnessPanicked), ledger.RunEnd{How: ledger.EndFailed}},
		{"failed", errors.New("no such file"), ledger.RunEnd{How: ledger.EndFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, EndOf(tc.err)); diff != "" {
				t.Errorf("EndOf(%v) (-want +got):\n%s", tc.err, diff)
			}
		})
	}
}

// TestARecordingEndsWithTheRecordersEnd records a run that pauses, goes on and returns, and one that
// fails: the END is the recorder's, and only the failed run is suspended. Config.RunEnd overrides the
// harness's word, as a proxy that cannot see the agent does.
func TestARecordingEndsWithTheRecordersEnd(t *testing.T) {
	model := &fakeModel{answer: func(req session.Request) string { return "ok" }}
	pauseAndGoOn := func(fail error) Harness {
		return func(ctx context.Context, ac AgentContext) error {
			if err := ac.Suspend(ctx); err != nil {
				return err
			}
			if _, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("go on")}}); err != nil {
				return err
			}
			return fail
		}
	}
	for _, tc := range []struct {
		name      string
		fail      error
		runEnd    func(error) ledger.RunEnd
		end       ledger.EndHow
		suspended bool
	}{
		{"paused, went on and finished", nil, nil, ledger.EndFinished, false},
		{"paused, went on and failed", errors.New("exit status 1"), nil, ledger.EndFailed, true},
		{"stopped by a proxy", nil, func(error) ledger.RunEnd { return ledger.RunEnd{How: ledger.EndStopped} }, ledger.EndStopped, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if _, err := Record(context.Background(), RecordOptions{Dir: dir, ID: "run", Model: model, Config: Config{RunEnd: tc.runEnd}},
				pauseAndGoOn(tc.fail)); err != nil {
				t.Fatal(err)
			}
			s := mustOpen(t, dir)
			last := s.Events[len(s.Events)-2]
			if last.Kind != session.KindLedger || last.Author != session.AuthorRecorder {
				t.Fatalf("the event before session_end is %s by %s, want the recorder's END", last.Kind, last.Author)
			}
			st := ledger.Fold(s.Events)
			if st.End == nil || st.End.How != tc.end || st.Suspended != tc.suspended {
				t.Errorf("end %+v suspended %v, want %s and %v", st.End, st.Suspended, tc.end, tc.suspended)
			}
		})
	}
}
