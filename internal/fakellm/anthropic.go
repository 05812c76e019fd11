package fakellm

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// anthropicAPI is the Anthropic Messages wire format.
type anthropicAPI struct{}

type anthropicRequest struct {
	Model     *string         `json:"model"`
	MaxTokens *int64          `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  *[]struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
}

func (anthropicAPI) decode(e Endpoint, body []byte) (*facts, string) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, "There was an error parsing the body of your request: the body is not a JSON object"
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "There was an error parsing the body of your request: " + err.Error()
	}
	switch {
	case req.Model == nil || *req.Model == "":
		return nil, "model: Field required"
	case req.Messages == nil:
		return nil, "messages: Field required"
	case len(*req.Messages) == 0:
		return nil, "messages: at least one message is required"
	case e == AnthropicMessages && req.MaxTokens == nil:
		return nil, "max_tokens: Field required"
	case req.MaxTokens != nil && *req.MaxTokens < 1:
		return nil, "max_tokens: Input should be greater than or equal to 1"
	}
	msgs := *req.Messages
	f := &facts{model: *req.Model, system: contentText(req.System), step: 1, stream: req.Stream}
	for i, m := range msgs {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, "messages." + strconv.Itoa(i) + ".role: Input should be 'user' or 'assistant'"
		}
		if m.Role == "assistant" {
			f.step++
		}
	}
	f.last = contentText(msgs[len(msgs)-1].Content)
	f.prompt = estimateTokens(len(marshal(map[string]json.RawMessage{"system": obj["system"], "messages": obj["messages"], "tools": obj["tools"]})))
	f.canonic = canonical(obj)
	return f, ""
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens,omitempty"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens,omitempty"`
	OutputTokens             int64  `json:"output_tokens"`
}

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

var anthropicStops = map[stop]string{stopEnd: "end_turn", stopTool: "tool_use", stopLength: "max_tokens", stopSequence: "stop_sequence"}

func anthropicInputUsage(a *answer, output int64) anthropicUsage {
	zero := int64(0)
	return anthropicUsage{InputTokens: &a.input, CacheCreationInputTokens: &zero, CacheReadInputTokens: &zero, OutputTokens: output}
}

func (anthropicAPI) message(a *answer) []byte {
	stopReason := anthropicStops[a.stop]
	m := anthropicMessage{ID: "msg_" + a.id, Type: "message", Role: "assistant", Model: a.model,
		StopReason: &stopReason, Usage: anthropicInputUsage(a, a.output)}
	if a.text != "" || len(a.toolCalls) == 0 {
		m.Content = append(m.Content, anthropicText{Type: "text", Text: a.text})
	}
	for _, c := range a.toolCalls {
		m.Content = append(m.Content, anthropicToolUse{Type: "tool_use", ID: "toolu_" + c.id, Name: c.name, Input: json.RawMessage(c.arguments)})
	}
	return marshal(m)
}

// events is the stream the API sends: message_start, then per content block a start, its deltas
// and a stop (a ping after the first start), then message_delta with the stop reason and usage, and
// message_stop.
func (anthropicAPI) events(a *answer) [][]byte {
	var out [][]byte
	event := func(name string, data any) {
		out = append(out, []byte("event: "+name+"\ndata: "+string(marshal(data))+"\n\n"))
	}
	type delta struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	type blockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta delta  `json:"delta"`
	}
	type blockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	type blockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	type typeOnly struct {
		Type string `json:"type"`
	}

	event("message_start", struct {
		Type    string           `json:"type"`
		Message anthropicMessage `json:"message"`
	}{"message_start", anthropicMessage{ID: "msg_" + a.id, Type: "message", Role: "assistant", Model: a.model,
		Content: []any{}, Usage: anthropicInputUsage(a, 1)}})
	index := 0
	started := func(block any) {
		event("content_block_start", blockStart{"content_block_start", index, block})
		if index == 0 {
			event("ping", typeOnly{"ping"})
		}
	}
	if a.text != "" || len(a.toolCalls) == 0 {
		started(anthropicText{Type: "text", Text: ""})
		for _, p := range pieces(a.text, a.chunk) {
			event("content_block_delta", blockDelta{"content_block_delta", index, delta{Type: "text_delta", Text: &p}})
		}
		event("content_block_stop", blockStop{"content_block_stop", index})
		index++
	}
	for _, c := range a.toolCalls {
		started(anthropicToolUse{Type: "tool_use", ID: "toolu_" + c.id, Name: c.name, Input: json.RawMessage("{}")})
		for _, p := range pieces(c.arguments, a.chunk) {
			event("content_block_delta", blockDelta{"content_block_delta", index, delta{Type: "input_json_delta", PartialJSON: &p}})
		}
		event("content_block_stop", blockStop{"content_block_stop", index})
		index++
	}
	stopReason := anthropicStops[a.stop]
	event("message_delta", struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   *string `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage anthropicUsage `json:"usage"`
	}{Type: "message_delta", Delta: struct {
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}{StopReason: &stopReason}, Usage: anthropicUsage{OutputTokens: a.output}})
	event("message_stop", typeOnly{"message_stop"})
	return out
}

func (anthropicAPI) countTokens(f *facts) []byte {
	return marshal(struct {
		InputTokens int64 `json:"input_tokens"`
	}{f.prompt})
}

// anthropicErrorTypes are the API's error types by status.
var anthropicErrorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusPaymentRequired:       "billing_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusGatewayTimeout:        "timeout_error",
	529:                              "overloaded_error",
}

func (anthropicAPI) errorBody(status int, message, requestID string) []byte {
	typ, ok := anthropicErrorTypes[status]
	switch {
	case ok:
	case status >= 500:
		typ = "api_error"
	default:
		typ = "invalid_request_error"
	}
	type apiError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	return marshal(struct {
		Type      string   `json:"type"`
		Error     apiError `json:"error"`
		RequestID string   `json:"request_id"`
	}{"error", apiError{typ, message}, requestID})
}

func (anthropicAPI) streamError(message string) []byte {
	type apiError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	return []byte("event: error\ndata: " + string(marshal(struct {
		Type  string   `json:"type"`
		Error apiError `json:"error"`
	}{"error", apiError{"overloaded_error", message}})) + "\n\n")
}

func (anthropicAPI) requestIDHeader() string { return "request-id" }
