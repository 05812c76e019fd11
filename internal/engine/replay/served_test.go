package replay

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/google/go-cmp/cmp"
)

// TestServingByFieldEqualsTheRoundTrip holds serveModel's field-by-field path to the whole-response
// round trip it replaces, byte for byte, with and without a vault: every spelling the respelling and
// the restoring touch, and every field shape the encoder treats specially. Where the field path
// declines, the round trip answers, so its result (or error) is the one served either way.
func TestServingByFieldEqualsTheRoundTrip(t *testing.T) {
	token := redact.TokenPrefix + strings.Repeat("ab", redact.TokenHexLen/2)
	legacy := redact.TokenPrefix + strings.Repeat("c", redact.LegacyTokenHexLen)
	badSecret := redact.TokenPrefix + strings.Repeat("de", redact.TokenHexLen/2) // stands for invalid UTF-8
	vault := redact.NewVault()
	if err := vault.Merge(map[string]string{token: "sk-ant-secret<&>", legacy: "p\u2028w\"d", badSecret: "bad\xffsecret"}); err != nil {
		t.Fatal(err)
	}
	contents := []json.RawMessage{
		nil,
		json.RawMessage(`null`),
		json.RawMessage(`[]`),
		json.RawMessage(``),
		json.RawMessage(`{`),
		json.RawMessage(` [ {"type" : "text", "text" : "a < b && c > d"} ] `),
		json.RawMessage(`[{"type":"text","text":"\u003c\u003E\u0026 \\u003c \u00e9 \/ \u2028 ` + "\u2029" + `"}]`),
		json.RawMessage(`[{"type":"text","text":"key ` + token + ` and ` + legacy + `x"}]`),
		json.RawMessage(`[{"type":"tool_use","input":{"` + token + `":1e400,"n":12345678901234567890,"f":-0.0}}]`),
		json.RawMessage(`[{"type":"text","text":"\ud800"}]`),
		json.RawMessage("[{\"type\":\"text\",\"text\":\"\xff\"}]"),
		json.RawMessage(`"plain"`),
		json.RawMessage(`[1,2] [3]`),
	}
	raws := []json.RawMessage{nil, {}, json.RawMessage(`{"id":"msg_1","stop_reason":"end_turn","x":"\u003c"}`), json.RawMessage(`{"a": [ ` + "\"" + token + `" ] }`), json.RawMessage(`nope`)}
	stops := []string{"", "end_turn", "a<b&c", `\u003c`, "\u2028", token, "bad\xffutf8", "ctl\x01", badSecret}
	usages := []*session.Usage{nil, {}, {InputTokens: 1 << 62, OutputTokens: 7, CacheReadInputTokens: 3, CostMicroUSD: -1}}
	var cases int
	compare := func(v *redact.Vault, rec *session.Response) {
		t.Helper()
		r := &runner{vault: v}
		want, wantErr := r.servedByRoundTrip(rec)
		got, ok := r.servedByField(rec)
		cases++
		if !ok {
			return // served by the round trip itself
		}
		name := fmt.Sprintf("vault %v, content %.200q, raw %.200q, stop %q, usage %+v", v != nil, rec.Content, rec.Raw, rec.StopReason, rec.Usage)
		if wantErr != nil {
			t.Fatalf("%s: the round trip fails (%v) where the field path serves %.200v", name, wantErr, got)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: (-round trip +by field):\n%.2000s", name, diff)
		}
		if want.Usage != nil && got.Usage == rec.Usage {
			t.Fatalf("%s: the served usage is the recording's own", name)
		}
	}
	vaults := []*redact.Vault{nil, redact.NewVault(), vault}
	for _, v := range vaults {
		for _, c := range contents {
			for _, raw := range raws {
				for _, stop := range stops {
					for _, u := range usages {
						compare(v, &session.Response{Content: c, Raw: raw, StopReason: stop, Usage: u})
					}
				}
			}
		}
		// encoding/json's depth limit, 10,000, counts the response around a field: 9,999 deep is the
		// most either field may be.
		for _, deep := range []json.RawMessage{
			json.RawMessage(strings.Repeat("[", 9999) + strings.Repeat("]", 9999)),
			json.RawMessage(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)),
			json.RawMessage(strings.Repeat(`{"a":`, 9999) + "1" + strings.Repeat("}", 9999)),
			json.RawMessage(strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)),
			json.RawMessage(strings.Repeat(`[{"a":`, 5000) + "1" + strings.Repeat("}]", 5000)),
			json.RawMessage(" " + strings.Repeat("[ ", 10000) + strings.Repeat("] ", 10000)),
		} {
			compare(v, &session.Response{Content: deep, Raw: raws[2], StopReason: "end_turn"})
			compare(v, &session.Response{Content: contents[2], Raw: deep, StopReason: "end_turn"})
		}
		// Recorded answer headers are served restored, like every other field.
		for _, h := range []map[string]string{{}, {"request-id": "req_1"}, {"x-a": token + ";" + legacy, "x-b": badSecret},
			{"x-c": `\u003c <&> ` + "\u2028 \u2029 \x01"}, {"x-d": "bad\xff"}, {token: "k"}} {
			compare(v, &session.Response{Content: contents[5], Raw: raws[2], StopReason: "end_turn", Headers: h})
		}
	}
	// The field path must be the one taken for an ordinary answer, or the test above proves nothing.
	r := &runner{vault: vault}
	if _, ok := r.servedByField(&session.Response{Content: contents[7], Raw: raws[2], StopReason: "end_turn", Usage: usages[2]}); !ok {
		t.Fatal("the field path declined an ordinary recorded answer")
	}
	t.Logf("%d responses compared", cases)
}
