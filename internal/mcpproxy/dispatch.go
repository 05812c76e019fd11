package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Upstream is a live MCP server.
type Upstream interface {
	// Call sends a request and waits for its answer: the result, an *mcp.RPCError when the server
	// answered with an error, or another error when there was no answer.
	Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// callKey carries the request being answered to the live tool: the engine hands a tool the recorded
// arguments (params without _meta), while the server must get the params the client sent.
type callKey struct{}

type callInfo struct {
	id     json.RawMessage
	params json.RawMessage
}

func withCall(ctx context.Context, c callInfo) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callOf(ctx context.Context) callInfo {
	c, _ := ctx.Value(callKey{}).(callInfo)
	return c
}

// ClientID is the JSON-RPC id the client gave the request a live call answers.
func ClientID(ctx context.Context) json.RawMessage { return callOf(ctx).id }

// Tools are the live tools of a server, one per recorded method, for replay.RecordOptions. up is
// asked for the server on every call, so a server started late (or gone) is seen as it is.
func Tools(server string, up func() Upstream) map[string]replay.Tool {
	tools := map[string]replay.Tool{}
	for _, method := range mcp.Methods {
		tools[mcp.ToolName(server, method)] = func(ctx context.Context, _ json.RawMessage) (any, error) {
			u := up()
			if u == nil {
				return nil, fmt.Errorf("%w: %s has no server to call", mcp.ErrServerUnavailable, server)
			}
			result, err := u.Call(ctx, method, callOf(ctx).params)
			if rpc, ok := err.(*mcp.RPCError); ok {
				return nil, mcp.RecordedError(rpc)
			}
			if err != nil {
				return nil, err
			}
			return result, nil
		}
	}
	return tools
}

// Answer answers one client request through the run's AgentContext: recorded (and relayed) in record
// mode, served from the recording in replay, by the fork's rules in a fork. ping is answered here.
// recording is the session a replay or fork serves (nil when recording): a drift with no unserved
// call left names the nearest one it already served.
func Answer(ctx context.Context, ac replay.AgentContext, server string, req mcp.Message, recording *session.Session) mcp.Message {
	if req.Method == mcp.MethodPing {
		return mcp.Response(req.ID, nil)
	}
	if !mcp.Recorded(req.Method) {
		return mcp.ErrorResponse(req.ID, &mcp.RPCError{Code: mcp.CodeMethodNotFound,
			Message: fmt.Sprintf("agentrewind does not relay %q: a replay could not answer it (relayed: %s)", req.Method, strings.Join(mcp.Methods, ", "))})
	}
	args, err := mcp.Args(req.Method, req.Params)
	if err != nil {
		return mcp.ErrorResponse(req.ID, &mcp.RPCError{Code: -32602, Message: err.Error()})
	}
	ctx = withCall(ctx, callInfo{id: req.ID, params: req.Params})
	name := mcp.ToolName(server, req.Method)
	result, callErr := ac.Tool(ctx, name, args, replay.Site(mcp.Site(server)))
	var drift *replay.DriftError
	if errors.As(callErr, &drift) && drift.Nearest == nil && drift.Expected == nil && recording != nil {
		return mcp.ErrorResponse(req.ID, mcp.DriftAnswerWith(drift, mcp.NearestRecorded(recording.Events, name, args)))
	}
	res, rpcErr := mcp.AnswerOf(result, callErr)
	if rpcErr != nil {
		return mcp.ErrorResponse(req.ID, rpcErr)
	}
	return mcp.Response(req.ID, res)
}
