package rewindtest

import (
	"context"
	"errors"
	"testing"

	"github.com/agentrewind/agentrewind/pkg/rewind"
)

// FromSession replays the recording in dir against harness under the Strict drift policy and returns
// the trajectory. A corrupt recording, a drift or a harness error fails tb with a message that says
// which step drifted, what the recording expected there and how the request differs.
func FromSession(tb testing.TB, dir string, harness rewind.Harness, cfg rewind.Config) *rewind.ReplayResult {
	tb.Helper()
	s, err := rewind.Open(dir)
	if err != nil {
		tb.Fatalf("rewindtest: the recording in %s cannot be used: %v", dir, err)
		return nil
	}
	res, err := rewind.Replay(context.Background(), rewind.ReplayOptions{Config: cfg, Session: s}, harness)
	var drift *rewind.DriftError
	switch {
	case errors.As(err, &drift):
		tb.Fatalf("rewindtest: the agent no longer behaves as recorded in %s (session %s):\n%v\n"+
			"If the change is intended, record the session again.", dir, s.Meta.ID, drift)
	case err != nil:
		tb.Fatalf("rewindtest: replaying %s: %v", dir, err)
	}
	return res
}
