package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// An Exchange is one recorded Responses call: the request as the agent sent it and the response it
// got.
type Exchange struct {
	Request  session.Request
	Response session.Response
}

// ErrBrokenChain: a recorded response's previous_response_id names a response the recording does
// not hold, so its conversation cannot be rebuilt.
var ErrBrokenChain = errors.New("the recording does not hold the response the chain continues")

// maxChain bounds how many responses a chain is followed through: a recording with a cycle of ids
// (which no provider mints) must not loop.
const maxChain = 100000

// ExpandPrevious rewrites a request that continues a recorded response (previous_response_id names
// one the lookup holds) into one that carries the whole conversation as input items: every
// recorded request's input, oldest first, each followed by its response's output items, then the
// request's own input; previous_response_id is dropped. A fork sends such a request to a live
// provider that never saw the recorded responses its served prefix handed the agent. Instructions
// are not carried over, as the API does not carry them over a chain either. A request that names
// no recorded response is returned unchanged, and ok is false.
func (ResponsesCodec) ExpandPrevious(req session.Request, recorded func(id string) (Exchange, bool)) (out session.Request, ok bool, err error) {
	id, has := previousID(req)
	if !has {
		return req, false, nil
	}
	if _, found := recorded(id); !found {
		return req, false, nil
	}
	var chain [][]session.Message // newest first
	for n := 0; has; n++ {
		ex, found := recorded(id)
		if !found {
			return req, false, fmt.Errorf("response %q: %w", id, ErrBrokenChain)
		}
		if n == maxChain {
			return req, false, fmt.Errorf("response %q: the chain is longer than %d responses", id, maxChain)
		}
		items, err := outputMessages(ex.Response)
		if err != nil {
			return req, false, fmt.Errorf("response %q: %w", id, err)
		}
		chain = append(chain, append(ex.Request.Messages, items...))
		id, has = previousID(ex.Request)
	}
	var msgs []session.Message
	for i := len(chain) - 1; i >= 0; i-- {
		msgs = append(msgs, chain[i]...)
	}
	out = req
	out.Messages = append(msgs, req.Messages...)
	out.Params = maps.Clone(req.Params)
	delete(out.Params, "previous_response_id")
	delete(out.Params, "input") // the input is items now
	return out, true, nil
}

// previousID is the request's previous_response_id, when it names one.
func previousID(req session.Request) (string, bool) {
	var id string
	raw := req.Params["previous_response_id"]
	if jsonobj.Kind(raw) != '"' || json.Unmarshal(raw, &id) != nil || id == "" {
		return "", false
	}
	return id, true
}

// outputMessages are a response's output items as the messages that denormalize to them as input
// items (the API takes its own output items back as input): an output message under its role, with
// its other members, any other item whole under its type.
func outputMessages(resp session.Response) ([]session.Message, error) {
	if resp.Content == nil {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(resp.Content, &items); err != nil {
		return nil, fmt.Errorf("its output is not an array: %w", ErrWrongType)
	}
	msgs := make([]session.Message, 0, len(items))
	for i, item := range items {
		m, err := itemMessage("ExpandPrevious", fmt.Sprintf("output[%d]", i), item)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}
