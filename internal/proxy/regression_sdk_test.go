package proxy

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oopt "github.com/openai/openai-go/v3/option"
)

func hAnthropicRun(t *testing.T, base string) (string, string, error) {
	c := anthropic.NewClient(aopt.WithBaseURL(base), aopt.WithAPIKey("placeholder-key"), aopt.WithMaxRetries(0))
	ctx := context.Background()
	p := anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("go"))}}
	m, err := c.Messages.New(ctx, p)
	if err != nil {
		return "", "", err
	}
	st := c.Messages.NewStreaming(ctx, p)
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			return "", "", err
		}
	}
	if st.Err() != nil {
		return "", "", st.Err()
	}
	return m.RawJSON(), string(mustJSON(acc.Content)) + "|" + string(acc.StopReason) + "|" + string(mustJSON(acc.Usage)), nil
}

func mustJSON(v any) []byte {
	b, _ := jsonMarshal(v)
	return b
}

func TestTheAnthropicSDKSeesReplayAsRecordAndAsTheUpstream(t *testing.T) {
	up, _ := hRawUpstream(t, hBigJSON, hBigSSE)
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.URL}})
	j1, s1, err := hAnthropicRun(t, r.ts.URL)
	if err != nil {
		t.Fatalf("record via SDK: %v", err)
	}
	r.stop()
	direct1, directS, err := hAnthropicRun(t, up.URL)
	if err != nil {
		t.Fatalf("direct: %v", err)
	}
	p := hStart(t, Options{Mode: Replay, Session: hOpen(t, dir)})
	j2, s2, err := hAnthropicRun(t, p.ts.URL)
	p.stop()
	if err != nil {
		t.Fatalf("replay via SDK: %v", err)
	}
	if j1 != j2 || s1 != s2 {
		t.Errorf("SDK sees replay != record:%s%s", hDiff(j1, j2), hDiff(s1, s2))
	}
	if s1 != directS {
		t.Errorf("SDK stream through proxy != direct upstream:%s", hDiff(directS, s1))
	}
	_ = direct1
}

func hOpenAIRun(base string) (string, string, error) {
	c := openai.NewClient(oopt.WithBaseURL(base+"/v1"), oopt.WithAPIKey("placeholder-key"), oopt.WithMaxRetries(0))
	ctx := context.Background()
	p := openai.ChatCompletionNewParams{Model: "gpt-x", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "read_file"})}}
	m, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		return "", "", err
	}
	st := c.Chat.Completions.NewStreaming(ctx, p)
	acc := openai.ChatCompletionAccumulator{}
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if st.Err() != nil {
		return "", "", st.Err()
	}
	return m.RawJSON(), string(mustJSON(acc.ChatCompletion.Choices)), nil
}

func TestTheOpenAISDKSeesReplayAsRecordAndAsTheUpstream(t *testing.T) {
	fake, up := hFake(t, "chunkSize: 3\nturns:\n- text: \"héllo 😀 \\u2028 <&>\"\n  toolCalls:\n  - name: read_file\n    input: {path: \"a\\\"b\", n: 9007199254740993}\n")
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Provider: "openai", Dir: dir, ID: "s", Upstreams: map[string]string{"openai": up}})
	j1, s1, err := hOpenAIRun(r.ts.URL)
	if err != nil {
		t.Fatalf("record via SDK: %v", err)
	}
	r.stop()
	n := fake.Requests()
	jd, sd, _ := hOpenAIRun(up)
	p := hStart(t, Options{Mode: Replay, Session: hOpen(t, dir)})
	j2, s2, err := hOpenAIRun(p.ts.URL)
	p.stop()
	if err != nil {
		t.Fatalf("replay via SDK: %v", err)
	}
	if fake.Requests() != n+2 {
		t.Errorf("replay reached upstream")
	}
	if j1 != j2 || s1 != s2 {
		t.Errorf("SDK sees replay != record:%s%s", hDiff(j1, j2), hDiff(s1, s2))
	}
	if j1 != jd {
		t.Logf("JSON through proxy != direct (bytes):%s", hDiff(jd, j1))
	}
	if s1 != sd {
		t.Errorf("accumulated stream through proxy != direct:%s", hDiff(sd, s1))
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
