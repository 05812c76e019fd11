package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestRedactingAMessageEqualsDecodingItsRedactedJSON holds redactMessage's shortcut (a message the
// redactor leaves as it is is not decoded again) to decoding: the same role, content bytes, error
// and stored part, for contents that look like the member the shortcut slices at, spellings the
// redactor rewrites, secrets, and nesting on either side of encoding/json's depth limit, which
// counts the message around the content.
func TestRedactingAMessageEqualsDecodingItsRedactedJSON(t *testing.T) {
	decoded := func(r *runner, parts *[]storedPart, m session.Message) (session.Message, error) {
		var out session.Message
		doc, err := json.Marshal(m)
		if err != nil {
			return out, err
		}
		red, err := r.redactPart(parts, "message", doc)
		if err != nil {
			return out, err
		}
		return out, json.Unmarshal(red, &out)
	}
	nest := func(open, inner, closing string, n int) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(closing, n)
	}
	roles := []string{"user", "", `a,"content":1`, `"},\"content\":`, "<&>", "\u2028", "\x00"}
	contents := []string{"", " ", `null`, `"hi"`, `"<>&"`, `"\u003c"`, `"\\u003c"`, `"\u2028"`, `"\ud800"`, "\"\xff\"",
		`1e400`, `-0`, `9007199254740993`, ` [ 1 , 2 ] `, `{"content":1}`, `[{"type":"text","text":"a,\"content\":b"}]`,
		`{"a":1,"a":2}`, `"sk-ant-api03-` + strings.Repeat("Ab9_", 20) + `"`,
		nest("[", "", "]", 9999), nest("[", "", "]", 10000), nest(`{"a":`, "1", "}", 9999), nest(`{"a":`, "1", "}", 10000)}
	for _, role := range roles {
		for _, c := range contents {
			m := session.Message{Role: role, Content: json.RawMessage(c)}
			if c == "" {
				m.Content = nil
			}
			r := &runner{cfg: Config{}.withDefaults()}
			var wantParts, gotParts []storedPart
			want, wantErr := decoded(r, &wantParts, m)
			got, gotErr := r.redactMessage(&gotParts, m)
			if (wantErr == nil) != (gotErr == nil) || got.Role != want.Role || !bytes.Equal(got.Content, want.Content) ||
				(got.Content == nil) != (want.Content == nil) || len(gotParts) != len(wantParts) ||
				len(gotParts) > 0 && gotParts[0].digest != wantParts[0].digest {
				t.Fatalf("role %q, content %.100q: redactMessage gives %q %.100q (%v), decoding gives %q %.100q (%v)",
					role, c, got.Role, got.Content, gotErr, want.Role, want.Content, wantErr)
			}
		}
	}
	// An ordinary message takes the shortcut, and its content is capped where it ends: the encoder's
	// buffer goes on past it, and an append into a stored message must not write there. (Decoding
	// copies into a buffer of a size class, 8 bytes for these 7.)
	r := &runner{cfg: Config{}.withDefaults()}
	got, err := r.redactMessage(&[]storedPart{}, session.Message{Role: "user", Content: json.RawMessage(`"hello"`)})
	if err != nil || string(got.Content) != `"hello"` || cap(got.Content) != len(got.Content) {
		t.Fatalf("an ordinary message: %q, cap %d, %v; want it whole, capped", got.Content, cap(got.Content), err)
	}
}
