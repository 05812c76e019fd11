// Package anthropic is the codec for the Anthropic Messages API: POST /v1/messages request bodies,
// Message response bodies and their text/event-stream form. Its shapes follow the official Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2), whose client the tests point at this codec's output.
//
// # Requests
//
// model and messages map to their own fields; each message keeps its role and its content as the
// wire had it (a string or an array of blocks: text, image, tool_use, tool_result, ...). Every other
// member — max_tokens, temperature, tools, tool_choice, stop_sequences, metadata, stream, thinking,
// and whatever a newer API adds — goes into Params unchanged.
//
// system is the one member with two homes. Request.System holds its text: the string itself, or
// the text of its text blocks joined by a blank line. That text alone cannot say whether the wire had
// a string or blocks, how it was split or where cache_control breakpoints sat, so whenever the wire
// value is not a non-empty string it is also kept, verbatim, in Params["system"]. The SDK always sends
// blocks, so requests made through it keep both. When denormalizing, System decides: while it still
// equals the text of Params["system"] the kept value is sent as it was; once a fork has overridden it,
// the new text replaces the text of a lone text block (keeping its cache_control) or is sent as a
// plain string.
//
// # Responses
//
// Response.Content is the content block array, StopReason the stop_reason, and Usage counts input
// as input_tokens plus the cache writes and reads, which are input the call consumed. Raw keeps the
// rest of the message — id, type, role, model, stop_sequence, the detailed usage — without the
// content, so DenormalizeResponse can rebuild a body the SDK decodes to the same Message.
//
// # Streams
//
// NormalizeStream keeps every server-sent event as a chunk whose Data is {"event": name, "data":
// json}, pings and errors included, and assembles the final response the way the SDK's
// Message.Accumulate does. RebuildStream writes the chunks back in the API's layout, so the SDK's
// stream decoder yields the same events and accumulates the same Message. SynthesizeStream writes a
// response as a stream that accumulates to it, for a recording that cannot keep the stream it got.
//
// # Fingerprints
//
// stream and metadata are volatile: they change between identical calls without changing the answer.
// Structural fingerprints also mask the sampling parameters and the token budgets.
//
// Errors are *CodecError values naming the field (e.g. "messages[2].role") or the byte offset (where a
// body stops being JSON, where a cut-off or malformed stream event begins).
package anthropic
