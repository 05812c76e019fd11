package fakellm

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// responsesAPI is the OpenAI Responses wire format. Unlike the other APIs it has state: a request
// may continue an earlier response by naming it in previous_response_id, so the server remembers
// how far each conversation it answered had got, and refuses an id it never minted as the API does.
type responsesAPI struct{ chains *chains }

// chains are the responses the server answered: id -> the assistant turns of the conversation up to
// and including that response.
type chains struct {
	mu    sync.Mutex
	turns map[string]int
}

func (c *chains) lookup(id string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.turns[id]
	return n, ok
}

func (c *chains) remember(id string, turns int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turns == nil {
		c.turns = map[string]int{}
	}
	c.turns[id] = turns
}

// responsesItem is the part of an input item the fake reads.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

// assistantAuthored reports whether an input item is the model's own output handed back: an
// assistant message, a tool call or a reasoning item. A run of them is one assistant turn, as one
// response's output is.
func (it responsesItem) assistantAuthored() bool {
	switch {
	case it.Role != "":
		return it.Role == "assistant"
	case strings.HasSuffix(it.Type, "_output"), it.Type == "item_reference", it.Type == "message":
		return false
	}
	return true // function_call, reasoning, custom_tool_call, ...
}

func (it responsesItem) text() string {
	if it.Role == "" && it.Output != nil {
		return contentText(it.Output)
	}
	return contentText(it.Content)
}

func (api responsesAPI) decode(_ Endpoint, body []byte) (*facts, string) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
	}
	var req struct {
		Model        *string         `json:"model"`
		Instructions *string         `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Previous     *string         `json:"previous_response_id"`
		Stream       bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "Invalid request body: " + err.Error()
	}
	if req.Model == nil || *req.Model == "" {
		return nil, "Missing required parameter: 'model'."
	}
	var items []responsesItem
	var last string
	switch {
	case len(req.Input) == 0 || string(req.Input) == "null":
	case req.Input[0] == '"':
		_ = json.Unmarshal(req.Input, &last)
		items = []responsesItem{{Role: "user", Content: req.Input}}
	default:
		if err := json.Unmarshal(req.Input, &items); err != nil {
			return nil, "Invalid type for 'input': expected a string or an array of input items."
		}
		if len(items) > 0 {
			last = items[len(items)-1].text()
		}
	}
	turns, inTurn := 0, false
	if req.Previous != nil && *req.Previous != "" {
		n, ok := api.chains.lookup(*req.Previous)
		if !ok {
			return nil, fmt.Sprintf("Previous response with id '%s' not found.", *req.Previous)
		}
		turns, inTurn = n, true // a response's output ends its conversation
	}
	for _, it := range items {
		authored := it.assistantAuthored()
		if authored && !inTurn {
			turns++
		}
		inTurn = authored
	}
	f := &facts{model: *req.Model, step: turns + 1, stream: req.Stream, last: last}
	if req.Instructions != nil {
		f.system = *req.Instructions
	}
	f.prompt = estimateTokens(len(marshal(map[string]json.RawMessage{"input": obj["input"], "tools": obj["tools"]})))
	f.canonic = canonical(obj)
	return f, ""
}

type responsesContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type responsesOutput struct {
	ID        string             `json:"id"`
	Type      string             `json:"type"`
	Status    string             `json:"status"`
	Role      string             `json:"role,omitempty"`
	Content   []responsesContent `json:"content,omitempty"`
	CallID    string             `json:"call_id,omitempty"`
	Name      string             `json:"name,omitempty"`
	Arguments *string            `json:"arguments,omitempty"`
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type responsesObject struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	CreatedAt         int64             `json:"created_at"`
	Status            string            `json:"status"`
	Error             any               `json:"error"`
	IncompleteDetails any               `json:"incomplete_details"`
	Model             string            `json:"model"`
	Output            []responsesOutput `json:"output"`
	ParallelToolCalls bool              `json:"parallel_tool_calls"`
	ToolChoice        string            `json:"tool_choice"`
	Tools             []any             `json:"tools"`
	Usage             *responsesUsage   `json:"usage"`
}

// response is the answer as a response object: a message with the text (when there is text or no
// tool call), then one function_call item per tool call. It remembers the response for chains.
func (api responsesAPI) response(a *answer) responsesObject {
	r := responsesObject{ID: "resp_" + a.id, Object: "response", CreatedAt: a.created, Status: "completed",
		Model: a.model, ParallelToolCalls: true, ToolChoice: "auto", Tools: []any{}}
	if a.stop == stopLength {
		r.Status, r.IncompleteDetails = "incomplete", map[string]string{"reason": "max_output_tokens"}
	}
	if a.text != "" || len(a.toolCalls) == 0 {
		r.Output = append(r.Output, responsesOutput{ID: "msg_" + a.id, Type: "message", Status: "completed", Role: "assistant",
			Content: []responsesContent{{Type: "output_text", Text: a.text, Annotations: []any{}}}})
	}
	for _, c := range a.toolCalls {
		args := c.arguments
		r.Output = append(r.Output, responsesOutput{ID: "fc_" + c.id, Type: "function_call", Status: "completed",
			CallID: "call_" + c.id, Name: c.name, Arguments: &args})
	}
	u := &responsesUsage{InputTokens: a.input, OutputTokens: a.output, TotalTokens: a.input + a.output}
	r.Usage = u
	api.chains.remember(r.ID, a.step)
	return r
}

func (api responsesAPI) message(a *answer) []byte { return marshal(api.response(a)) }

// events is the stream the API sends: response.created and response.in_progress (in progress, no
// output, no usage); per output item its output_item.added, a message's content_part.added, text
// deltas in pieces, output_text.done and content_part.done, a function call's argument deltas in
// pieces and function_call_arguments.done, then output_item.done; last response.completed (or
// response.incomplete) with the whole response. Every event is named by its type and numbered.
func (api responsesAPI) events(a *answer) [][]byte {
	full := api.response(a)
	var out [][]byte
	send := func(typ string, members map[string]any) {
		members["type"] = typ
		members["sequence_number"] = len(out)
		out = append(out, []byte("event: "+typ+"\ndata: "+string(marshal(members))+"\n\n"))
	}
	started := full
	started.Status, started.IncompleteDetails, started.Output, started.Usage = "in_progress", nil, []responsesOutput{}, nil
	send("response.created", map[string]any{"response": started})
	send("response.in_progress", map[string]any{"response": started})
	for i, item := range full.Output {
		added := item
		added.Status = "in_progress"
		if item.Type == "message" {
			added.Content = []responsesContent{}
		} else {
			empty := ""
			added.Arguments = &empty
		}
		send("response.output_item.added", map[string]any{"output_index": i, "item": added})
		for ci, part := range item.Content {
			at := map[string]any{"item_id": item.ID, "output_index": i, "content_index": ci}
			with := func(k string, v any) map[string]any {
				m := map[string]any{k: v}
				for k, v := range at {
					m[k] = v
				}
				return m
			}
			send("response.content_part.added", with("part", responsesContent{Type: part.Type, Annotations: []any{}}))
			for _, p := range pieces(part.Text, a.chunk) {
				send("response.output_text.delta", with("delta", p))
			}
			send("response.output_text.done", with("text", part.Text))
			send("response.content_part.done", with("part", part))
		}
		if item.Arguments != nil {
			for _, p := range pieces(*item.Arguments, a.chunk) {
				send("response.function_call_arguments.delta", map[string]any{"item_id": item.ID, "output_index": i, "delta": p})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": i, "arguments": *item.Arguments})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	terminal := "response.completed"
	if full.Status == "incomplete" {
		terminal = "response.incomplete"
	}
	send(terminal, map[string]any{"response": full})
	return out
}

func (responsesAPI) countTokens(*facts) []byte { return nil }

func (responsesAPI) errorBody(status int, message, reqID string) []byte {
	return openaiAPI{}.errorBody(status, message, reqID)
}

// streamError is the API's error event: it ends the stream.
func (responsesAPI) streamError(message string) []byte {
	data := marshal(map[string]any{"type": "error", "code": "server_error", "message": message, "param": nil})
	return []byte("event: error\ndata: " + string(data) + "\n\n")
}

func (responsesAPI) requestIDHeader() string { return "x-request-id" }
