package codec

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

type answerModel struct{}

func (answerModel) Create(context.Context, session.Request) (*session.Response, error) {
	return &session.Response{Content: json.RawMessage(`"ok"`)}, nil
}

// TestFingerprintsOfEveryProviderRecomputeWithItsOwnCodec records a call of each provider, with a
// request field its codec treats as volatile and the generic codec does not (OpenAI's stream_options
// and store; Anthropic's extended-thinking budget, masked in structural mode), and has the recording's
// fingerprints recomputed through ForProvider: none may differ. The same check with the generic codec
// finds the mismatch this guards against.
func TestFingerprintsOfEveryProviderRecomputeWithItsOwnCodec(t *testing.T) {
	for _, tc := range []struct {
		codec    replay.Codec
		mode     fingerprint.Mode
		volatile map[string]json.RawMessage
	}{
		{anthropic.Codec{}, fingerprint.Structural, map[string]json.RawMessage{"thinking": json.RawMessage(`{"type":"enabled","budget_tokens":2048}`)}},
		{openai.Codec{}, fingerprint.Strict, map[string]json.RawMessage{"stream": json.RawMessage("true"), "stream_options": json.RawMessage(`{"include_usage":true}`)}},
		{openai.ResponsesCodec{}, fingerprint.Strict, map[string]json.RawMessage{"store": json.RawMessage("false")}},
	} {
		t.Run(tc.codec.Name(), func(t *testing.T) {
			if got := ForProvider(tc.codec.Name()); got != tc.codec {
				t.Fatalf("ForProvider(%q) = %#v, want %#v", tc.codec.Name(), got, tc.codec)
			}
			dir := filepath.Join(t.TempDir(), "run")
			req := session.Request{Model: "m", Messages: []session.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}},
				Params: tc.volatile}
			_, err := replay.Record(context.Background(), replay.RecordOptions{Config: replay.Config{Codec: tc.codec, FingerprintMode: tc.mode}, Dir: dir,
				Model: answerModel{}}, func(ctx context.Context, ac replay.AgentContext) error {
				_, err := ac.Model(ctx, req, replay.Site("greet"))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			s, err := session.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := replay.CheckFingerprints(s, ForProvider); err != nil {
				t.Fatalf("recomputed with the provider's codec: %v", err)
			}
			if err := replay.CheckFingerprints(s, nil); err == nil {
				t.Fatal("the generic codec recomputed the same fingerprints: this test no longer exercises the volatile fields")
			}
		})
	}
	if got := ForProvider("some-gateway"); got != nil {
		t.Fatalf("ForProvider of an unknown provider = %#v, want nil (the generic codec)", got)
	}
}
