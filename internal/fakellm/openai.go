package fakellm

import (
	"encoding/json"
	"net/http"
	"strings"
)

// openaiAPI is the OpenAI Chat Completions wire format.
type openaiAPI struct{}

type openaiRequest struct {
	Model    *string `json:"model"`
	Messages *[]struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (openaiAPI) decode(_ Endpoint, body []byte) (*facts, string) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
	}
	var req openaiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "Invalid request body: " + err.Error()
	}
	switch {
	case req.Model == nil || *req.Model == "":
		return nil, "you must provide a model parameter"
	case req.Messages == nil:
		return nil, "Missing required parameter: 'messages'."
	case len(*req.Messages) == 0:
		return nil, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."
	}
	msgs := *req.Messages
	f := &facts{model: *req.Model, step: 1, stream: req.Stream, usage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	var system []string
	for _, m := range msgs {
		switch m.Role {
		case "system", "developer":
			system = append(system, contentText(m.Content))
		case "assistant":
			f.step++
		}
	}
	f.system = strings.Join(system, "\n")
	f.last = contentText(msgs[len(msgs)-1].Content)
	f.prompt = estimateTokens(len(marshal(map[string]json.RawMessage{"messages": obj["messages"], "tools": obj["tools"]})))
	f.canonic = canonical(obj)
	return f, ""
}

var openaiFinish = map[stop]string{stopEnd: "stop", stopTool: "tool_calls", stopLength: "length", stopSequence: "stop"}

type openaiFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type openaiToolCall struct {
	Index    *int           `json:"index,omitempty"`
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function openaiFunction `json:"function"`
}

type openaiUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
		AudioTokens  int64 `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int64 `json:"reasoning_tokens"`
		AudioTokens              int64 `json:"audio_tokens"`
		AcceptedPredictionTokens int64 `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int64 `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

func usageOf(a *answer) *openaiUsage {
	return &openaiUsage{PromptTokens: a.input, CompletionTokens: a.output, TotalTokens: a.input + a.output}
}

func (openaiAPI) message(a *answer) []byte {
	type message struct {
		Role        string           `json:"role"`
		Content     *string          `json:"content"`
		Refusal     *string          `json:"refusal"`
		ToolCalls   []openaiToolCall `json:"tool_calls,omitempty"`
		Annotations []any            `json:"annotations"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		Logprobs     *string `json:"logprobs"`
		FinishReason string  `json:"finish_reason"`
	}
	m := message{Role: "assistant", Annotations: []any{}}
	if a.text != "" || len(a.toolCalls) == 0 {
		m.Content = &a.text
	}
	for _, c := range a.toolCalls {
		m.ToolCalls = append(m.ToolCalls, openaiToolCall{ID: "call_" + c.id, Type: "function", Function: openaiFunction{Name: c.name, Arguments: c.arguments}})
	}
	return marshal(struct {
		ID                string       `json:"id"`
		Object            string       `json:"object"`
		Created           int64        `json:"created"`
		Model             string       `json:"model"`
		Choices           []choice     `json:"choices"`
		Usage             *openaiUsage `json:"usage"`
		ServiceTier       string       `json:"service_tier"`
		SystemFingerprint string       `json:"system_fingerprint"`
	}{"chatcmpl-" + a.id, "chat.completion", a.created, a.model,
		[]choice{{Message: m, FinishReason: openaiFinish[a.stop]}}, usageOf(a), "default", "fp_fakellm"})
}

// events is the stream the API sends: a chunk with the role, the content in pieces, each tool call
// opening with its id and name and then its arguments in pieces, a chunk with the finish reason, a
// usage chunk with no choices when stream_options.include_usage asked for it, and data: [DONE].
func (openaiAPI) events(a *answer) [][]byte {
	type delta struct {
		Role      string           `json:"role,omitempty"`
		Content   *string          `json:"content,omitempty"`
		Refusal   *string          `json:"refusal,omitempty"`
		ToolCalls []openaiToolCall `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		Logprobs     *string `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	}
	type chunk struct {
		ID                string       `json:"id"`
		Object            string       `json:"object"`
		Created           int64        `json:"created"`
		Model             string       `json:"model"`
		ServiceTier       string       `json:"service_tier"`
		SystemFingerprint string       `json:"system_fingerprint"`
		Choices           []choice     `json:"choices"`
		Usage             *openaiUsage `json:"usage,omitempty"`
	}
	type chunkWithNullUsage struct {
		chunk
		Usage *openaiUsage `json:"usage"`
	}
	var out [][]byte
	send := func(c chunk) {
		c.ID, c.Object, c.Created, c.Model, c.ServiceTier, c.SystemFingerprint = "chatcmpl-"+a.id, "chat.completion.chunk", a.created, a.model, "default", "fp_fakellm"
		var data []byte
		if a.usage && c.Usage == nil {
			data = marshal(chunkWithNullUsage{chunk: c}) // with include_usage every chunk says "usage": null
		} else {
			data = marshal(c)
		}
		out = append(out, []byte("data: "+string(data)+"\n\n"))
	}
	sendDelta := func(d delta) { send(chunk{Choices: []choice{{Delta: d}}}) }

	empty := ""
	sendDelta(delta{Role: "assistant", Content: &empty})
	for _, p := range pieces(a.text, a.chunk) {
		sendDelta(delta{Content: &p})
	}
	for i, c := range a.toolCalls {
		sendDelta(delta{ToolCalls: []openaiToolCall{{Index: &i, ID: "call_" + c.id, Type: "function", Function: openaiFunction{Name: c.name}}}})
		for _, p := range pieces(c.arguments, a.chunk) {
			sendDelta(delta{ToolCalls: []openaiToolCall{{Index: &i, Function: openaiFunction{Arguments: p}}}})
		}
	}
	finish := openaiFinish[a.stop]
	send(chunk{Choices: []choice{{Delta: delta{}, FinishReason: &finish}}})
	if a.usage {
		send(chunk{Choices: []choice{}, Usage: usageOf(a)})
	}
	return append(out, []byte("data: [DONE]\n\n"))
}

func (openaiAPI) countTokens(*facts) []byte { return nil } // OpenAI has no such endpoint here

func (openaiAPI) errorBody(status int, message, _ string) []byte {
	typ, code := "invalid_request_error", (*string)(nil)
	switch {
	case status == http.StatusTooManyRequests:
		typ = "requests"
		c := "rate_limit_exceeded"
		code = &c
	case status == http.StatusUnauthorized:
		c := "invalid_api_key"
		code = &c
	case status == http.StatusNotFound:
		c := "unknown_url"
		code = &c
	case status >= 500:
		typ = "server_error"
	}
	type apiError struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	return marshal(struct {
		Error apiError `json:"error"`
	}{apiError{message, typ, nil, code}})
}

func (openaiAPI) streamError(message string) []byte {
	return []byte("data: " + string(openaiAPI{}.errorBody(http.StatusInternalServerError, message, "")) + "\n\n")
}

func (openaiAPI) requestIDHeader() string { return "x-request-id" }
