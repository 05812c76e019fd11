// Package openai is the codec for the OpenAI Chat Completions API: POST /v1/chat/completions request
// bodies, chat.completion response bodies and their text/event-stream form of chat.completion.chunk
// events. ResponsesCodec, in the responses*.go files, does the same for the Responses API (POST
// /v1/responses) and rebuilds a previous_response_id chain from recorded exchanges (ExpandPrevious);
// its mapping is documented on the type. Its shapes follow the official Go SDK (github.com/openai/openai-go/v3), whose client the
// tests point at this codec's output.
//
// # Requests
//
// model and messages map to their own fields. A message keeps its role, and its content as the wire
// had it (a string, an array of parts, null) when content is all it has. A message with more — an
// assistant's tool_calls, refusal, audio or function_call, a tool message's tool_call_id, a name — or
// whose content is an object gets as Content an object of all its members but role, in wire order,
// e.g. {"content":null,"tool_calls":[...]}; the wire's content is never an object, so this is
// unambiguous and DenormalizeRequest spreads the members back. Every other top-level member — tools,
// tool_choice, response_format, temperature, stream, and whatever a newer API adds — goes into Params
// unchanged.
//
// The system prompt is the first message when its role is system or developer. Request.System holds
// its text: the string content, or the text of its text parts joined by a blank line. Unless the
// message is a plain {"role":"system","content":"<non-empty text>"}, the message itself is also kept,
// verbatim, in Params["system"], which is no API member (a body with a top-level "system" is
// refused). When denormalizing, System decides: while it equals the kept message's text, the message
// is sent as it was; once a fork has overridden it, the kept message (role, name and all) takes the
// new text; an empty System sends no system message. System and developer messages later in the
// conversation are ordinary messages.
//
// # Responses
//
// Response.Content is the first choice's message object, StopReason its finish_reason, and Usage
// counts prompt_tokens as input (cached tokens included) and completion_tokens as output (reasoning
// tokens included). Raw keeps the rest of the completion — id, created, model, service_tier,
// system_fingerprint, the detailed usage, the first choice without its message and every further
// choice whole — so DenormalizeResponse rebuilds a body the SDK decodes to the same ChatCompletion.
//
// # Streams
//
// NormalizeStream keeps every server-sent event as a chunk whose Data is {"data": json} (with
// "event" when the wire named it), and the terminator as {"done": true}. It assembles the completion
// the way the SDK's ChatCompletionAccumulator does: choices and tool calls by their index, strings
// concatenated however the deltas split them. RebuildStream writes the chunks back as data: lines, so
// the SDK's stream yields the same chunks and accumulates the same completion. SynthesizeStream writes
// a response as a stream that accumulates to it, for a recording that cannot keep the stream it got.
//
// # Fingerprints
//
// stream, stream_options, user, safety_identifier, prompt_cache_key, metadata and store are volatile:
// they change between identical calls without changing the answer. Structural fingerprints also mask
// the sampling parameters, the token budgets and the reasoning and verbosity levels.
//
// Errors are *CodecError values naming the field (e.g. "messages[2].role") or the byte offset (where a
// body stops being JSON, where a cut-off or malformed stream event begins).
package openai
