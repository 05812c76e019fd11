package session

// ErrorNameStreamTruncated names the error of a model call whose stream the upstream ended before its
// last event (message_stop, [DONE], response.completed): the connection dropped, or the body ended
// early. The call keeps the chunks that arrived and the response they assemble to, and a replay
// serves them and ends the stream the same way, so an agent never takes a cut answer for a whole one.
const ErrorNameStreamTruncated = "StreamTruncated"

// Truncated reports whether ev is a model call whose stream was cut off.
func (ev *Event) Truncated() bool {
	return ev.Kind == KindModelCall && ev.Error != nil && ev.Error.Name == ErrorNameStreamTruncated
}
