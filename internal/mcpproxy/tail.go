package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
)

// tailServer is a real server a fork's tail relays to, over stdio or HTTP.
type tailServer interface {
	Upstream
	// notify sends the server a notification.
	notify(ctx context.Context, m mcp.Message) error
}

// initializeTail readies srv for a fork's tail, whose first call is method. The prefix answered the
// client's initialize from the recording, so the server has not seen it: unless the tail starts with
// initialize itself, srv is initialized here with init, the params the client initialized this run
// with (the recorded ones lack clientInfo, which a recording does not keep).
func initializeTail(ctx context.Context, srv tailServer, method string, init json.RawMessage) error {
	if method == "initialize" {
		return nil
	}
	if init == nil {
		return fmt.Errorf("%w: the fork's tail reached %s before the client initialized", mcp.ErrServerUnavailable, method)
	}
	if _, err := srv.Call(ctx, "initialize", init); err != nil {
		return fmt.Errorf("%w: initializing the fork's server: %v", mcp.ErrServerUnavailable, err)
	}
	if err := srv.notify(ctx, mcp.Message{Method: "notifications/initialized"}); err != nil {
		return fmt.Errorf("%w: telling the fork's server it is initialized: %v", mcp.ErrServerUnavailable, err)
	}
	return nil
}
