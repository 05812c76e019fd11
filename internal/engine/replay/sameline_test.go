package replay

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestConcurrentCallsOfOneLaneRecordAnOpenableSession: calls a harness makes at once from one lane get
// their lane seq and global step together, so the log, written in step order, shows each lane's seqs
// in order and the reader accepts it. (A seq taken before the step let two racing calls swap them.)
func TestConcurrentCallsOfOneLaneRecordAnOpenableSession(t *testing.T) {
	for run := 0; run < 20; run++ {
		dir := filepath.Join(t.TempDir(), "run")
		_, err := Record(context.Background(), RecordOptions{Config: liveEntropy(), Dir: dir, ID: "run"},
			func(ctx context.Context, ac AgentContext) error {
				var wg sync.WaitGroup
				for range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _ = ac.Random(ctx)
					}()
				}
				wg.Wait()
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := session.Open(dir); err != nil {
			t.Fatalf("run %d: the recording cannot be opened: %v", run, err)
		}
	}
}
