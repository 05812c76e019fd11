// Package codec is the family of provider codecs: one subpackage per model provider's wire format,
// each mapping that provider's HTTP bodies to and from the provider-neutral types of package session,
// which are what the engine records, fingerprints, replays and forks.
//
// A codec offers the same operations under the same names, and satisfies replay.Codec:
//
//   - NormalizeRequest / DenormalizeRequest: a request body to a session.Request and back;
//   - NormalizeResponse / DenormalizeResponse: a response body to a session.Response and back;
//   - NormalizeStream / RebuildStream: a streamed response to the response it assembles plus one
//     session.Chunk per wire event, and chunks back to a stream the provider's SDK cannot tell from
//     the original;
//   - StripVolatile and VolatilePaths: what fingerprints ignore, or mask in structural mode;
//   - Usage: the token accounting of a response.
//
// The mappings are lossless in both directions: a body that was normalized and denormalized again is
// the same JSON, and a neutral value produced by normalizing comes back unchanged from a round trip
// through the wire. Replay serves recorded bytes to unmodified agents and forks send edited requests
// live, so a codec that dropped or invented a field would change what the agent sees or asks.
// Codecs learn the wire shapes from the provider's official SDK — its tests drive a real SDK client
// against the codec's output — never from memory.
//
// Codecs are pure functions of their input: no I/O, no clock, no package state. Input they cannot map
// is a typed error naming the field or byte offset at fault.
//
// Subpackages:
//
//   - anthropic: the Anthropic Messages API (POST /v1/messages), JSON and server-sent events.
//   - openai: the OpenAI Chat Completions API (POST /v1/chat/completions, Codec) and Responses API
//     (POST /v1/responses, ResponsesCodec, with previous_response_id chains), JSON and server-sent
//     events.
package codec
