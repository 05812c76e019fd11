package proxy

import (
	"net/http"
	"sort"
	"strings"
)

// Answer headers the agent gets from the upstream's answer, live and replayed: those the official
// SDKs read (a request id for error messages and support, retry advice) and those agents read to pace
// themselves (rate limits). Everything else stays with the proxy: hop-by-hop headers, cookies,
// lengths and encodings the proxy sets itself, and anything it does not know to be harmless.
var (
	passedHeaders = map[string]bool{
		"request-id":                true, // Anthropic's, quoted in the SDK's errors
		"x-request-id":              true, // OpenAI's
		"x-should-retry":            true, // both SDKs obey it over their own retry rules
		"retry-after":               true,
		"retry-after-ms":            true,
		"anthropic-organization-id": true,
		"anthropic-workspace-id":    true, // quoted in the Anthropic SDK's errors
	}
	passedHeaderPrefixes = []string{"anthropic-ratelimit-", "x-ratelimit-", "openai-"}
)

// Bounds of the answer headers passed and recorded: a header past them is dropped.
const (
	maxAnswerHeaders    = 64
	maxAnswerHeaderSize = 1024
)

// answerHeaders picks the headers of an upstream answer that the agent gets and the recording keeps,
// by lower-case name, several values joined by ", ". A header the answer declares hop-by-hop (named
// in its Connection header) is dropped, and so is a value that is not printable ASCII: a header is
// replayed as recorded, and a recording holds text.
func answerHeaders(h http.Header) map[string]string {
	hop := map[string]bool{}
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			hop[strings.ToLower(strings.TrimSpace(name))] = true
		}
	}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names) // which headers a bound drops must not depend on map order
	var out map[string]string
	for _, name := range names {
		lower := strings.ToLower(name)
		if hop[lower] || !passedHeader(lower) || len(out) == maxAnswerHeaders {
			continue
		}
		v := strings.Join(h[name], ", ")
		if len(v) > maxAnswerHeaderSize || !printableASCII(v) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[lower] = v
	}
	return out
}

func passedHeader(lower string) bool {
	if passedHeaders[lower] {
		return true
	}
	for _, p := range passedHeaderPrefixes {
		if strings.HasPrefix(lower, p) && len(lower) > len(p) {
			return true
		}
	}
	return false
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// setAnswerHeaders puts recorded or live answer headers on the agent's answer, each value with the
// secrets the proxy holds replaced by their tokens. Only the names answerHeaders passes are set,
// whatever a recording says: a hand-edited session cannot make the proxy send a Set-Cookie or a
// Transfer-Encoding.
func (s *Server) setAnswerHeaders(w http.ResponseWriter, headers map[string]string) {
	h := w.Header()
	for name, v := range headers {
		if !passedHeader(name) || len(v) > maxAnswerHeaderSize || !printableASCII(v) {
			continue
		}
		h[http.CanonicalHeaderKey(name)] = []string{s.withhold.String(v)}
	}
}
