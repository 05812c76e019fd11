package proxy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
)

// heldKey is the provider key the proxy holds for the agent: the agent only ever has a placeholder.
const heldKey = "sk-held-By7heProxy-0123456789abcdefXYZ"

// keyEchoScript is an upstream that echoes the proxy's key: in its text, split by the stream's
// chunks after "cut:NN;" padding bytes, in a tool call's arguments, and in a 401's message.
var keyEchoScript = func() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chunkSize: %d\nturns:\n", len(heldKey))
	for p := 0; p < len(heldKey); p++ {
		fmt.Fprintf(&b, "- when: {message: \"cut:%02d;\"}\n  text: \"%s%s end\"\n  toolCalls: [{name: t, input: {k: \"%s%s\"}}]\n",
			p, strings.Repeat("x", p), heldKey, strings.Repeat("y", p), heldKey)
	}
	fmt.Fprintf(&b, "- when: {message: deny}\n  error: {status: 401, message: \"invalid api key: %s (base64 %s)\"}\n", heldKey,
		base64.StdEncoding.EncodeToString([]byte(heldKey)))
	return b.String()
}()

// teeTransport keeps every byte of every answer the agent's SDK reads: headers and body.
type teeTransport struct {
	mu   sync.Mutex
	seen bytes.Buffer
}

func (tt *teeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	tt.mu.Lock()
	_ = resp.Header.Write(&tt.seen)
	tt.mu.Unlock()
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, lockedWriter{tt}), resp.Body}
	return resp, nil
}

type lockedWriter struct{ tt *teeTransport }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.tt.mu.Lock()
	defer w.tt.mu.Unlock()
	return w.tt.seen.Write(b)
}

// take returns what the agent read since the last take.
func (tt *teeTransport) take() string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	s := tt.seen.String()
	tt.seen.Reset()
	return s
}

// keyAgent asks the echoing upstream through a provider's official SDK and returns what the SDK
// assembled (the text and the tool call's arguments) or the error it reported.
func keyAgent(t *testing.T, provider, base string, tt *teeTransport, question string, stream bool) (string, error) {
	t.Helper()
	ctx := t.Context()
	hc := &http.Client{Transport: tt}
	switch provider {
	case "anthropic":
		c := sdk.NewClient(option.WithBaseURL(base), option.WithAPIKey("placeholder-key"), option.WithMaxRetries(0), option.WithHTTPClient(hc))
		params := sdk.MessageNewParams{Model: "claude-test", MaxTokens: 64, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(question))}}
		var msg sdk.Message
		if stream {
			s := c.Messages.NewStreaming(ctx, params)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					return "", err
				}
			}
			if err := s.Err(); err != nil {
				return "", err
			}
		} else {
			m, err := c.Messages.New(ctx, params)
			if err != nil {
				return "", err
			}
			msg = *m
		}
		var parts []string
		for _, b := range msg.Content {
			parts = append(parts, b.Text+string(b.Input))
		}
		return strings.Join(parts, "|"), nil
	case "openai":
		c := oai.NewClient(oaiopt.WithBaseURL(base+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0), oaiopt.WithHTTPClient(hc))
		params := oai.ChatCompletionNewParams{Model: "gpt-test", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(question)}}
		var cc oai.ChatCompletion
		if stream {
			s := c.Chat.Completions.NewStreaming(ctx, params)
			var acc oai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				return "", err
			}
			cc = acc.ChatCompletion
		} else {
			got, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				return "", err
			}
			cc = *got
		}
		m := cc.Choices[0].Message
		parts := []string{m.Content}
		for _, tc := range m.ToolCalls {
			parts = append(parts, tc.Function.Arguments)
		}
		return strings.Join(parts, "|"), nil
	default:
		c := oai.NewClient(oaiopt.WithBaseURL(base+"/v1"), oaiopt.WithAPIKey("placeholder-key"), oaiopt.WithMaxRetries(0), oaiopt.WithHTTPClient(hc))
		params := responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(question)}}
		if !stream {
			resp, err := c.Responses.New(ctx, params)
			if err != nil {
				return "", err
			}
			return resp.OutputText() + "|" + view(t, resp.Output), nil
		}
		s := c.Responses.NewStreaming(ctx, params)
		var text, args strings.Builder
		var final *responses.Response
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.function_call_arguments.delta":
				args.WriteString(ev.Delta)
			case "response.completed":
				final = &ev.Response
			}
		}
		if err := s.Err(); err != nil {
			return "", err
		}
		if final == nil {
			return "", errors.New("no response.completed")
		}
		return text.String() + "|" + args.String() + "|" + final.OutputText() + "|" + view(t, final.Output), nil
	}
}

// TestTheProxysKeyNeverReachesTheAgent: an upstream that echoes the key the proxy holds for the agent
// — in a streamed text and tool call split by the chunks at every byte of the key, in a JSON answer,
// in a 401's body — answers the agent the key's token in its place, through each provider's official
// SDK: no byte the agent reads holds the key (nor its base64), and what the SDK assembles is the
// answer with the token where the key was. A replay of the recording, its vault open, withholds the
// key again and answers the same bytes.
func TestTheProxysKeyNeverReachesTheAgent(t *testing.T) {
	forbidden := []string{heldKey, base64.StdEncoding.EncodeToString([]byte(heldKey)), base64.RawStdEncoding.EncodeToString([]byte(heldKey))}
	token := redact.Token(heldKey)
	for _, provider := range []string{"anthropic", "openai", "openai-responses"} {
		t.Run(provider, func(t *testing.T) {
			up := newUpstream(t, mustParse(keyEchoScript))
			dir := filepath.Join(t.TempDir(), "run")
			type answer struct {
				question string
				stream   bool
				got      string
				err      string
				bytes    string
			}
			var questions []answer
			for p := 0; p < len(heldKey); p++ {
				questions = append(questions, answer{question: fmt.Sprintf("cut:%02d;", p), stream: true})
			}
			questions = append(questions, answer{question: "cut:05;"}, answer{question: "deny"}, answer{question: "deny", stream: true})
			ask := func(base string) []answer {
				tt := &teeTransport{}
				out := append([]answer(nil), questions...)
				for i := range out {
					got, err := keyAgent(t, provider, base, tt, out[i].question, out[i].stream)
					out[i].got, out[i].bytes = got, tt.take()
					if err != nil {
						out[i].err = strings.ReplaceAll(err.Error(), base, "<proxy>")
					}
					for _, f := range forbidden {
						if strings.Contains(out[i].bytes, f) || strings.Contains(out[i].got, f) || strings.Contains(out[i].err, f) {
							t.Fatalf("%s (stream %v): the agent read the proxy's key: %.2000s", out[i].question, out[i].stream, out[i].bytes)
						}
					}
					if out[i].question == "deny" {
						if out[i].err == "" || !strings.Contains(out[i].bytes, token) {
							t.Fatalf("deny (stream %v): %q, want the 401 with the key's token: %.1000s", out[i].stream, out[i].err, out[i].bytes)
						}
						continue
					}
					if err != nil {
						t.Fatalf("%s (stream %v): %v", out[i].question, out[i].stream, err)
					}
					var p int
					_, _ = fmt.Sscanf(out[i].question, "cut:%d;", &p)
					if want := strings.Repeat("x", p) + token + " end"; !strings.HasPrefix(got, want+"|") {
						t.Fatalf("%s (stream %v): the SDK assembled %q, want the text %q", out[i].question, out[i].stream, got, want)
					}
					if strings.Count(got, token) < 2 {
						t.Fatalf("%s (stream %v): the tool call's arguments lost the token: %q", out[i].question, out[i].stream, got)
					}
				}
				return out
			}
			rec := start(t, Options{Mode: Record, Provider: provider, Dir: dir, ID: "run",
				Upstreams: map[string]string{provider: up.url}, APIKeys: map[string]string{provider: heldKey}})
			recorded := ask(rec.url)
			if out := rec.stop(t); out.Err != nil {
				t.Fatal(out.Err)
			}
			for _, k := range up.receivedKeys() {
				if k != heldKey {
					t.Fatalf("the upstream got %q, want the proxy's key", k)
				}
			}
			// The replay holds no key of its own: the vault's mark says which secret to withhold.
			rep := start(t, Options{Mode: Replay, Session: openSession(t, dir)})
			replayed := ask(rep.url)
			if out := rep.stop(t); out.Err != nil {
				t.Fatal(out.Err)
			}
			for i := range recorded {
				if recorded[i].got != replayed[i].got || recorded[i].err != replayed[i].err {
					t.Errorf("%s (stream %v): recorded %q %q, replayed %q %q", recorded[i].question, recorded[i].stream,
						recorded[i].got, recorded[i].err, replayed[i].got, replayed[i].err)
				}
			}
		})
	}
}
