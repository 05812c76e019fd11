package replaytest

import (
	"context"
	"errors"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// FromSession replays the recording in dir against harness under the Strict drift policy and returns
// the trajectory. A corrupt recording, a drift or a harness error fails tb with a message that says
// which step drifted, what the recording expected there and how the request differs.
func FromSession(tb testing.TB, dir string, harness replay.Harness, cfg replay.Config) *replay.ReplayResult {
	tb.Helper()
	s, err := session.Open(dir)
	if err != nil {
		tb.Fatalf("replaytest: the recording in %s cannot be used: %v", dir, err)
		return nil
	}
	res, err := replay.Replay(context.Background(), replay.ReplayOptions{Config: cfg, Session: s}, harness)
	var drift *replay.DriftError
	switch {
	case errors.As(err, &drift):
		tb.Fatalf("replaytest: the agent no longer behaves as recorded in %s (session %s):\n%v\n"+
			"If the change is intended, record the session again.", dir, s.Meta.ID, drift)
	case err != nil:
		tb.Fatalf("replaytest: replaying %s: %v", dir, err)
	}
	return res
}
