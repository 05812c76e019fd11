package session

import (
	"encoding/json"
)

// Kind is the type of a recorded event.
type Kind string

const (
	KindSessionStart Kind = "session_start"
	KindModelCall    Kind = "model_call"
	KindToolCall     Kind = "tool_call"
	KindEntropy      Kind = "entropy"
	KindNote         Kind = "note"
	KindLedger       Kind = "ledger"
	KindSessionEnd   Kind = "session_end"
)

// Known reports whether k is a kind this build understands.
func (k Kind) Known() bool {
	switch k {
	case KindSessionStart, KindModelCall, KindToolCall, KindEntropy, KindNote, KindLedger, KindSessionEnd:
		return true
	}
	return false
}

// IsBoundary reports whether events of kind k are boundary crossings that replay must serve: the
// steps a fork counts and a matcher resolves.
func (k Kind) IsBoundary() bool {
	return k == KindModelCall || k == KindToolCall || k == KindEntropy
}

// Author says who produced the bytes of an event. Verdicts trust recorder- and third-party-authored
// bytes; what the agent says about itself is a claim to be checked against evidence.
type Author string

const (
	// AuthorRecorder bytes were observed or minted by the recorder at the boundary (entropy draws,
	// session markers, transcript digests).
	AuthorRecorder Author = "OS_RECORDED"
	// AuthorThirdParty bytes came from a model provider or a tool.
	AuthorThirdParty Author = "THIRD_PARTY"
	// AuthorAgent bytes are something the agent told the recorder: notes and ledger claims.
	AuthorAgent Author = "AGENT_AUTHORED"
)

// DefaultAuthor is the author of an event of kind k when the recorder does not say otherwise.
func DefaultAuthor(k Kind) Author {
	switch k {
	case KindModelCall, KindToolCall:
		return AuthorThirdParty
	case KindNote, KindLedger:
		return AuthorAgent
	default:
		return AuthorRecorder
	}
}

// Provenance says where a forked run's answer came from.
type Provenance string

const (
	ProvenanceRecorded Provenance = "recorded"
	ProvenanceLive     Provenance = "live"
	ProvenanceStub     Provenance = "stub"
)

// EntropySource is what an entropy draw virtualises.
type EntropySource string

const (
	SourceClock  EntropySource = "clock"
	SourceRandom EntropySource = "random"
	SourceUUID   EntropySource = "uuid"
)

// Event is one line of events.jsonl. The fields used depend on Kind; the rest stay empty.
type Event struct {
	// Seq is the event's index within its lane, assigned when the call was initiated.
	Seq int64 `json:"seq"`
	// Step is the global index in initiation order across lanes.
	Step int64 `json:"step"`
	// TS is wall-clock milliseconds; informational, never used for matching.
	TS int64 `json:"ts"`
	// Lane identifies the concurrent branch of the agent that made the call; "0" is the root.
	Lane string `json:"lane"`
	// CallSite is a stable name for where in the agent the call was made.
	CallSite      string `json:"callSite"`
	Kind          Kind   `json:"kind"`
	SchemaVersion int    `json:"schemaVersion"`
	// Author is who produced the event's bytes.
	Author Author `json:"author,omitempty"`
	// Provenance is set on the events of a forked run.
	Provenance Provenance `json:"provenance,omitempty"`

	// model_call
	Provider    string    `json:"provider,omitempty"`
	Request     *Request  `json:"request,omitempty"`
	RequestHash string    `json:"requestHash,omitempty"`
	Response    *Response `json:"response,omitempty"`

	// tool_call
	Name     string          `json:"name,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	ArgsHash string          `json:"argsHash,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`

	// model_call and tool_call
	Error     *SerializedError `json:"error,omitempty"`
	Stream    []Chunk          `json:"stream,omitempty"`
	Usage     *Usage           `json:"usage,omitempty"`
	LatencyMs int64            `json:"latencyMs,omitempty"`
	// Blobs maps an externalised field's name to the hash of the blob holding it.
	Blobs map[string]string `json:"blobs,omitempty"`

	// entropy
	Source EntropySource   `json:"source,omitempty"`
	Value  json.RawMessage `json:"value,omitempty"`

	// note
	Text string `json:"text,omitempty"`

	// ledger: an intent-ledger record, kept as written and interpreted by the verdicts.
	Ledger json.RawMessage `json:"ledger,omitempty"`

	// session_start
	Meta *Meta `json:"meta,omitempty"`

	// session_end
	OK *bool `json:"ok,omitempty"`

	// Stored form only (schema 3, see dedup.go): the reader resolves these and returns them empty,
	// except DefBlobs, kept so that push, pull and pack find every blob a session needs.
	//
	// Defs defines content first used on this line, by the sha256 hex digest of its bytes.
	Defs map[string]json.RawMessage `json:"defs,omitempty"`
	// Joins defines content that embeds an earlier definition, by the digest of its bytes.
	Joins map[string][]JoinPart `json:"joins,omitempty"`
	// Lists defines message lists first used on this line, by chain digest (ListDef).
	Lists map[string]ListDef `json:"lists,omitempty"`
	// DefBlobs are definitions too large for the line, stored as blobs/<sha256>.
	DefBlobs []string `json:"defBlobs,omitempty"`
	// Refs says which parts of the request and response are taken from definitions.
	Refs *Refs `json:"refs,omitempty"`
	// StreamText says which stream chunks take their text from the response (streamtext.go).
	StreamText []TextSpan `json:"streamText,omitempty"`
}

// Message is one message of a model request's conversation.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Request is a provider-neutral model request. Codecs map provider wire formats to and from it.
type Request struct {
	Model    string    `json:"model"`
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	// Params holds everything else: temperature, max_tokens, tools, stop sequences...
	Params map[string]json.RawMessage `json:"params,omitempty"`
}

// Response is a provider-neutral model response.
type Response struct {
	Content    json.RawMessage `json:"content"`
	StopReason string          `json:"stopReason,omitempty"`
	Usage      *Usage          `json:"usage,omitempty"`
	// Raw is the provider's original response, for debugging; never used for matching.
	Raw json.RawMessage `json:"raw,omitempty"`
	// Headers are the answer's HTTP headers an SDK reads (request ids, rate limits, retry advice), by
	// lower-case name, several values joined by ", ": a replay answers with them again.
	Headers map[string]string `json:"headers,omitempty"`
}

// Usage is the token and cost accounting of a model call.
type Usage struct {
	// InputTokens are all the prompt tokens the call consumed, cached ones included.
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	// CacheCreationInputTokens and CacheReadInputTokens say how many of InputTokens were written to and
	// read from the provider's prompt cache, when it reported them.
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cacheReadInputTokens,omitempty"`
	// CostMicroUSD is the cost in millionths of a US dollar, when known.
	CostMicroUSD int64 `json:"costMicroUSD,omitempty"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 *Usage) {
	if u2 == nil {
		return
	}
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CacheCreationInputTokens += u2.CacheCreationInputTokens
	u.CacheReadInputTokens += u2.CacheReadInputTokens
	u.CostMicroUSD += u2.CostMicroUSD
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Chunk is one piece of a streamed response, with its offset from the start of the stream.
type Chunk struct {
	OffsetMs int64           `json:"offsetMs"`
	Data     json.RawMessage `json:"data"`
}

// SerializedError is an error returned by a model or tool, recorded so replay returns it again.
type SerializedError struct {
	Name    string          `json:"name"`
	Message string          `json:"message"`
	Stack   string          `json:"stack,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *SerializedError) Error() string { return e.Name + ": " + e.Message }
