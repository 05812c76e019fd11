package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestAPlaceholderCredentialIsNotASecretWhenTheProxyHoldsTheKey: with the key in the proxy, the agent's
// credential is a placeholder: "dummy" in the conversation is stored and replayed as it is. Without
// one, the agent's real-looking key is learned and appears in no stored byte.
func TestAPlaceholderCredentialIsNotASecretWhenTheProxyHoldsTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, cred string
		proxyKey   bool
		stored     bool // whether the credential may appear in the session
	}{
		{"placeholder, proxy key", "dummy", true, true},
		{"real-looking placeholder, proxy key", hAgentK, true, true},
		{"agent's own key", hAgentK, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, up := hFake(t, "turns:\n- text: \"the "+tc.cred+" value is not a test\"\n")
			dir := filepath.Join(t.TempDir(), "s")
			opts := Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up}, Keys: hKey}
			if tc.proxyKey {
				opts.APIKeys = map[string]string{"anthropic": hProvKey}
			}
			r := hStart(t, opts)
			rec := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": tc.cred}, hMsg(false, "is "+tc.cred+" a test?"))
			if o := r.stop(); o.Err != nil || rec.status != 200 {
				t.Fatalf("record: %v %d %s", o.Err, rec.status, rec.body)
			}
			events, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Contains(events, []byte(tc.cred)); got != tc.stored {
				t.Errorf("the session holds %q: %v, want %v", tc.cred, got, tc.stored)
			}
			p := hStart(t, Options{Mode: Replay, Session: hOpen(t, dir), Keys: hKey})
			rep := hDo(t, p.ts.URL, "/v1/messages", map[string]string{"x-api-key": tc.cred}, hMsg(false, "is "+tc.cred+" a test?"))
			p.stop()
			hSame(t, rec, rep)
		})
	}
}

// TestAnAuthTokenFromTheAnthropicSDKIsForwarded: an agent authenticating with the SDK's
// WithAuthToken (Authorization: Bearer) reaches the upstream with it when the proxy holds no key; it
// is stored nowhere. With a proxy key, the proxy's replaces it.
func TestAnAuthTokenFromTheAnthropicSDKIsForwarded(t *testing.T) {
	for _, proxyKey := range []bool{false, true} {
		up := newUpstream(t, weatherScript)
		dir := filepath.Join(t.TempDir(), "s")
		opts := Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.url}}
		want := hAgentK
		if proxyKey {
			opts.APIKeys, want = map[string]string{"anthropic": canary}, canary
		}
		r := start(t, opts)
		c := sdk.NewClient(option.WithBaseURL(r.url), option.WithAuthToken(hAgentK), option.WithMaxRetries(0))
		_, err := c.Messages.New(context.Background(), sdk.MessageNewParams{Model: "claude-x", MaxTokens: 10,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hello"))}})
		if err != nil {
			t.Fatalf("proxy key %v: %v", proxyKey, err)
		}
		if out := r.stop(t); out.Err != nil {
			t.Fatal(out.Err)
		}
		if keys := up.receivedKeys(); len(keys) != 1 || keys[0] != want {
			t.Errorf("proxy key %v: the upstream got credentials %q, want %q", proxyKey, keys, want)
		}
		if hits := hGrep(t, dir, hForms("token", hAgentK)); len(hits) > 0 {
			t.Errorf("the auth token is stored: %v", hits)
		}
		if strings.Contains(want, "canary") {
			assertNoCanary(t, dir)
		}
	}
}

// TestEncodedSecretsAreStoredNowhere: the provider key and a declared secret (--learn-secrets-from)
// sent base64, base64url or percent-encoded in tool arguments and in the conversation appear in no
// stored byte, in any of those forms.
func TestEncodedSecretsAreStoredNowhere(t *testing.T) {
	_, up := hFake(t, "turns:\n- text: ok\n")
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		args, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(args) // echoes the arguments as its result
	}))
	defer tool.Close()
	dir := filepath.Join(t.TempDir(), "s")
	r := hStart(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up},
		APIKeys: map[string]string{"anthropic": hProvKey}, Secrets: []string{hLearned}, Keys: hKey,
		Tools: map[string]string{"probe": tool.URL}})
	needles := map[string]string{}
	args := map[string]string{}
	for label, secret := range map[string]string{"provkey": hProvKey, "learned": hLearned} {
		for k, v := range hForms(label, secret) {
			needles[k], args[k] = v, "pre "+v+" post"
		}
	}
	body, _ := json.Marshal(args)
	if res := hDo(t, r.ts.URL, "/v1/tools/probe", nil, body); res.status != 200 {
		t.Fatalf("tool call: %d %s", res.status, res.body)
	}
	if res := hDo(t, r.ts.URL, "/v1/messages", map[string]string{"x-api-key": "placeholder"}, hMsg(false, string(body))); res.status != 200 {
		t.Fatalf("model call: %d %s", res.status, res.body)
	}
	if o := r.stop(); o.Err != nil {
		t.Fatal(o.Err)
	}
	if hits := hGrep(t, dir, needles); len(hits) > 0 {
		t.Errorf("secrets stored: %v", hits)
	}
}

// TestTheQueryStringGoesUpstreamAndIsNeverRecorded: a gateway may take an API version or a key in
// the query (here set through the official SDK's WithQuery, on its beta client); the upstream gets
// the query as the agent sent it, and no stored byte holds it.
func TestTheQueryStringGoesUpstreamAndIsNeverRecorded(t *testing.T) {
	up := newUpstream(t, weatherScript)
	dir := filepath.Join(t.TempDir(), "s")
	r := start(t, Options{Mode: Record, Dir: dir, ID: "s", Upstreams: map[string]string{"anthropic": up.url}})
	c := sdk.NewClient(option.WithBaseURL(r.url), option.WithAPIKey("placeholder"), option.WithMaxRetries(0),
		option.WithQuery("gateway-key", canary))
	_, err := c.Beta.Messages.New(context.Background(), sdk.BetaMessageNewParams{Model: "claude-x", MaxTokens: 10,
		Messages: []sdk.BetaMessageParam{sdk.NewBetaUserMessage(sdk.NewBetaTextBlock("hello"))}})
	if err != nil {
		t.Fatal(err)
	}
	if out := r.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	got := up.receivedQueries()
	if len(got) != 1 || !strings.Contains(got[0], "gateway-key="+canary) {
		t.Errorf("the upstream got queries %q, want the agent's gateway-key", got)
	}
	assertNoCanary(t, dir)
}
