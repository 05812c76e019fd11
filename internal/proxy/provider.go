package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// WireCodec is what the proxy needs of a provider codec (internal/engine/codec/<provider>).
type WireCodec interface {
	replay.Codec
	NormalizeRequest(body []byte) (session.Request, error)
	DenormalizeRequest(req session.Request) ([]byte, error)
	NormalizeResponse(body []byte) (session.Response, error)
	DenormalizeResponse(resp session.Response) ([]byte, error)
	NormalizeStream(sse []byte) (session.Response, []session.Chunk, error)
	RebuildStream(chunks []session.Chunk) []byte
	SynthesizeStream(resp session.Response) ([]session.Chunk, error)
}

// Provider is one model API the proxy speaks: a small table entry.
type Provider struct {
	// Name is the provider's name in flags, metrics and the codec ("anthropic").
	Name string
	// Path is the model endpoint; CountTokensPath the token counting one ("" when there is none).
	Path, CountTokensPath string
	// Site is the model endpoint's default call site and metrics label ("anthropic.messages").
	Site  string
	Codec WireCodec
	// DefaultUpstream is the base URL the endpoint paths are appended to upstream.
	DefaultUpstream string
	// AuthHeader carries the credential, after AuthPrefix ("x-api-key", or "Authorization" + "Bearer ").
	AuthHeader, AuthPrefix string
	// AltAuthHeaders are other credential headers the API accepts from an agent (Anthropic's SDK sends
	// an auth token as Authorization: Bearer), forwarded as sent when the proxy holds no key.
	AltAuthHeaders []string
	// Forward are the request headers passed upstream unchanged (API version, beta flags).
	Forward []string
	// ErrorBody is the provider's error document for an HTTP status and a message.
	ErrorBody func(status int, message string) []byte
	// Chunk turns one server-sent event into the codec's chunk data; nil skips the event.
	Chunk func(event string, data []byte) json.RawMessage
	// StreamOpen is the event a stream must begin with (pings and errors aside); "" when any data
	// event opens it. A stream that ends before it is refused.
	StreamOpen string
	// StreamEnds are the events that finish a stream (none when only the [DONE] data does): once one
	// has reached the agent, the answer is whole, so an agent that hangs up then does not cut it.
	StreamEnds []string
	// LanesEnd reports whether an event ends the stream's open text lanes (a content block, an output
	// item): a secret's head that a lane ended with is then no longer held back for its tail.
	LanesEnd func(event string) bool
}

// closesLanes reports whether a codec chunk's event ends the open lanes. The chunks the proxy
// writes begin with their event's name, when they have one.
func (p *Provider) closesLanes(chunk []byte) bool {
	const head = `{"event":"`
	if p.LanesEnd == nil || !bytes.HasPrefix(chunk, []byte(head)) {
		return false
	}
	name, _, ok := bytes.Cut(chunk[len(head):], []byte(`"`))
	return ok && p.LanesEnd(string(name))
}

// ends reports whether the event finishes the provider's stream.
func (p *Provider) ends(event string, data []byte) bool {
	return string(data) == "[DONE]" || (event != "" && slices.Contains(p.StreamEnds, event))
}

func (p *Provider) streamUnit() string {
	if p.StreamOpen == "" {
		return "chunk"
	}
	return p.StreamOpen
}

// Anthropic is the Anthropic Messages API.
var Anthropic = &Provider{
	Name:            anthropic.Provider,
	Path:            "/v1/messages",
	CountTokensPath: "/v1/messages/count_tokens",
	Site:            "anthropic.messages",
	Codec:           anthropic.Codec{},
	DefaultUpstream: "https://api.anthropic.com",
	AuthHeader:      "X-Api-Key",
	AltAuthHeaders:  []string{"Authorization"},
	Forward:         []string{"Anthropic-Version", "Anthropic-Beta"},
	ErrorBody:       anthropicError,
	Chunk:           anthropicChunk,
	StreamOpen:      "message_start",
	StreamEnds:      []string{"message_stop"},
	LanesEnd: func(event string) bool {
		return event == "content_block_stop" || event == "message_delta" || event == "message_stop"
	},
}

// OpenAI is the OpenAI Chat Completions API. Its SDK's base URL is <proxy>/v1.
var OpenAI = &Provider{
	Name:            openai.Provider,
	Path:            "/v1/chat/completions",
	Site:            "openai.chat_completions",
	Codec:           openai.Codec{},
	DefaultUpstream: "https://api.openai.com",
	AuthHeader:      "Authorization",
	AuthPrefix:      "Bearer ",
	Forward:         []string{"OpenAI-Organization", "OpenAI-Project"},
	ErrorBody:       openaiError,
	Chunk:           openaiChunk,
}

// OpenAIResponses is the OpenAI Responses API, a provider of its own: a session records one
// provider's calls, and its requests and answers map to the neutral types their own way. It shares
// the OpenAI upstream and key flags; its SDK's base URL is <proxy>/v1 as well.
var OpenAIResponses = &Provider{
	Name:            openai.ResponsesProvider,
	Path:            "/v1/responses",
	Site:            "openai.responses",
	Codec:           openai.ResponsesCodec{},
	DefaultUpstream: "https://api.openai.com",
	AuthHeader:      "Authorization",
	AuthPrefix:      "Bearer ",
	Forward:         []string{"OpenAI-Organization", "OpenAI-Project"},
	ErrorBody:       openaiError,
	Chunk:           openaiChunk,
	StreamOpen:      "response.created",
	StreamEnds:      []string{"response.completed", "response.incomplete", "response.failed"},
	LanesEnd: func(event string) bool {
		return strings.HasSuffix(event, ".done") || event == "response.completed" || event == "response.incomplete" || event == "response.failed"
	},
}

// Providers are every model API the proxy speaks, the default first.
var Providers = []*Provider{Anthropic, OpenAI, OpenAIResponses}

func openaiError(status int, message string) []byte {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusConflict:
		typ = driftErrorType
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	return marshalNoEscape(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil}})
}

// openaiChunk is the openai codec's chunk for one event: {"event"?, "data"?} or {"done": true} for
// the [DONE] terminator.
func openaiChunk(event string, data []byte) json.RawMessage {
	if event == "" && data == nil {
		return nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	if event != "" {
		b.WriteString(`"event":`)
		b.Write(marshalNoEscape(event))
	}
	switch {
	case string(data) == "[DONE]":
		if event != "" {
			b.WriteByte(',')
		}
		b.WriteString(`"done":true`)
	case data != nil:
		if event != "" {
			b.WriteByte(',')
		}
		var c bytes.Buffer
		if err := json.Compact(&c, data); err != nil {
			c.Reset()
			c.Write(data)
		}
		b.WriteString(`"data":`)
		b.Write(c.Bytes())
	}
	b.WriteByte('}')
	return b.Bytes()
}

// anthropicErrorTypes are the API's error types by status.
var anthropicErrorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusMethodNotAllowed:      "invalid_request_error",
	http.StatusConflict:              driftErrorType,
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusServiceUnavailable:    "overloaded_error",
}

// driftErrorType names the proxy's own error: a request the recording does not hold.
const driftErrorType = "rewind_drift_error"

func anthropicError(status int, message string) []byte {
	typ, ok := anthropicErrorTypes[status]
	if !ok {
		typ = "api_error"
	}
	return marshalNoEscape(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}})
}

// anthropicChunk is the anthropic codec's chunk for one event: {"event": name, "data": compact data},
// data omitted when the event had none — the shape its NormalizeStream gives and RebuildStream reads.
func anthropicChunk(event string, data []byte) json.RawMessage {
	if event == "" && data == nil {
		return nil
	}
	var b bytes.Buffer
	b.WriteString(`{"event":`)
	b.Write(marshalNoEscape(event))
	if data != nil {
		var c bytes.Buffer
		if err := json.Compact(&c, data); err != nil {
			c.Reset()
			c.Write(data) // not JSON: NormalizeStream refuses the stream at its end
		}
		b.WriteString(`,"data":`)
		b.Write(c.Bytes())
	}
	b.WriteByte('}')
	return b.Bytes()
}

// marshalNoEscape encodes v as JSON without HTML escaping, as the providers do.
func marshalNoEscape(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}
