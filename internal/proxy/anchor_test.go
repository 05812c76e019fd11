package proxy

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// TestACheckpointAnchorsWithoutParkingTheRun records two runs through the proxy. A POST /v1/checkpoint
// mints an anchor the rewind verdict finds, and the run is not suspended for it; an agent's SUSPEND
// with nothing after it is. Either way the proxy records that it was stopped, which is all it can see
// of the agent's end. The agent can write neither an ANCHOR nor an END.
func TestACheckpointAnchorsWithoutParkingTheRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		park      bool
		suspended bool
		stop      ledger.StopReason
	}{
		{"a checkpoint", false, false, ledger.StopStopped},
		{"a pause", true, true, ledger.StopSuspended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			up := newUpstream(t, weatherScript)
			r := start(t, Options{Mode: Record, Dir: dir, ID: "run", Upstreams: map[string]string{"anthropic": up.url}})
			ask(t, r, "hello")
			if status, b := postJSON(t, r.url+"/v1/checkpoint", map[string]any{}); status != http.StatusOK || string(b) != `{"minted":"ANCHOR"}` {
				t.Fatalf("checkpoint: %d %s", status, b)
			}
			for _, op := range []string{"ANCHOR", "END"} {
				if status, b := postJSON(t, r.url+"/v1/ledger", map[string]any{"op": op, "end": "Finished", "turnIndex": 0}); status != http.StatusBadRequest {
					t.Errorf("an agent's %s: %d %s, want 400", op, status, b)
				}
			}
			if tc.park {
				if status, b := postJSON(t, r.url+"/v1/ledger", map[string]any{"op": "SUSPEND"}); status != http.StatusOK {
					t.Fatalf("suspend: %d %s", status, b)
				}
			}
			r.stop(t)
			st := ledger.Fold(openSession(t, dir).Events)
			if !st.Checkpoint.Present || st.Checkpoint.TurnIndex != 0 {
				t.Errorf("checkpoint %+v, want turn 0 anchored", st.Checkpoint)
			}
			if st.Suspended != tc.suspended || st.Stop != tc.stop || st.End == nil || st.End.How != ledger.EndStopped {
				t.Errorf("suspended %v, stop %q, end %+v; want %v, %q and the proxy's Stopped", st.Suspended, st.Stop, st.End, tc.suspended, tc.stop)
			}
		})
	}
}
