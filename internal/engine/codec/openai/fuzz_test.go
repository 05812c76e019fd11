package openai_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// FuzzNormalizeRequest checks that NormalizeRequest never panics and that whatever it accepts comes
// back from DenormalizeRequest as the same JSON, and normalizes again to the same neutral request.
func FuzzNormalizeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`,
		`{"model":"o3","messages":[{"role":"developer","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},{"role":"user","content":"Hi"}],"reasoning_effort":"low"}`,
		`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"call_1","content":"1"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto","response_format":{"type":"json_object"},"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"system","content":""},{"role":"system","content":"x","name":"n"},{"role":"user","content":{"a":1}},{"role":"assistant"}]}`,
		`{"model":"m","messages":[],"temperature":0.20,"logit_bias":{"50256":-100},"x":"\u003c\ud83d\ude00"}`,
		`{"model":"m","model":"n","messages":[{"role":"user","role":"system","content":"a","content":"b"}]}`,
		"{\"model\":\"\xff\",\"messages\":[{\"role\":\"system\",\"content\":\"\xfe\"}]}",
		`{"model":"m","messages":[{"role":"system","content":[{"type":"image_url"}]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) { requestRoundTrip(t, openai.Codec{}, body) })
}

func fuzzDecode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// FuzzNormalizeStream checks that NormalizeStream never panics and that a stream it accepts, rebuilt
// from its chunks, normalizes to the same chunks and response.
func FuzzNormalizeStream(f *testing.F) {
	for _, seed := range []string{textStream, toolStream, twoChoiceStream, refusalStream, errorStream, minimalStreamSeed} {
		f.Add([]byte(seed))
	}
	var c openai.Codec
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, chunks, err := c.NormalizeStream(body)
		if err != nil {
			return
		}
		again, againChunks, err := c.NormalizeStream(c.RebuildStream(chunks))
		if err != nil {
			t.Fatalf("NormalizeStream of the rebuilt stream: %v", err)
		}
		if diff := cmp.Diff(chunks, againChunks); diff != "" {
			t.Fatalf("chunks changed over a rebuild (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(resp, again); diff != "" {
			t.Fatalf("response changed over a rebuild (-want +got):\n%s", diff)
		}
	})
}

const minimalStreamSeed = "event: x\ndata: {\"choices\":[{\"index\":-1,\"delta\":null}]}\n\n: c\n\ndata: [DONE]\n\ndata: {}\n\n"

// requestCodec is the request half of a provider codec.
type requestCodec interface {
	NormalizeRequest(body []byte) (session.Request, error)
	DenormalizeRequest(req session.Request) ([]byte, error)
}

// requestRoundTrip checks that a body c accepts comes back from DenormalizeRequest as the same JSON,
// and normalizes again to the same neutral request.
func requestRoundTrip(t *testing.T, c requestCodec, body []byte) {
	req, err := c.NormalizeRequest(body)
	if err != nil {
		return
	}
	back, err := c.DenormalizeRequest(req)
	if err != nil {
		t.Fatalf("DenormalizeRequest of an accepted body: %v\n%s", err, body)
	}
	if diff := cmp.Diff(fuzzDecode(t, body), fuzzDecode(t, back)); diff != "" {
		t.Fatalf("the rebuilt body is other JSON (-want +got):\n%s\nbody: %s\nback: %s", diff, body, back)
	}
	again, err := c.NormalizeRequest(back)
	if err != nil {
		t.Fatalf("NormalizeRequest of the rebuilt body: %v\n%s", err, back)
	}
	if diff := cmp.Diff(req, again); diff != "" {
		t.Fatalf("the neutral request changed over a wire round trip (-want +got):\n%s", diff)
	}
}
