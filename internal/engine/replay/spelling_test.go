package replay

import (
	"encoding/json"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestAStoredAnswerIsServedInTheSpellingItWasServedLive: whatever encoding/json does to the raw JSON of
// a stored event (HTML escapes, escaped line separators), the answer served from it has the bytes the
// live answer had after canonicalJSON.
func TestAStoredAnswerIsServedInTheSpellingItWasServedLive(t *testing.T) {
	for _, upstream := range []string{
		`{"text":"a <b> & c"}`,
		`{"text":"a \u003cb\u003E \u0026 c"}`,
		"{\"text\":\"line\u2028sep\u2029para\"}",
		`{"text":"line\u2028sep\u2029para"}`,
		`{"text":"kept: \\u003c \\\\u0026 \u00e9 \n"}`,
	} {
		live := canonicalJSON([]byte(upstream))
		// What the session writer stores: json.Marshal of the event, RawMessage fields compacted with
		// HTML escaping.
		stored, err := json.Marshal(session.Chunk{Data: live})
		if err != nil {
			t.Fatal(err)
		}
		var back session.Chunk
		if err := json.Unmarshal(stored, &back); err != nil {
			t.Fatal(err)
		}
		if served := unescapeHTML(back.Data); string(served) != string(live) {
			t.Errorf("%s: live %s, served %s (stored %s)", upstream, live, served, stored)
		}
		var a, b any
		if json.Unmarshal([]byte(upstream), &a) != nil || json.Unmarshal(live, &b) != nil || !jsonEqual(a, b) {
			t.Errorf("%s: the canonical spelling %s changes the meaning", upstream, live)
		}
	}
}
