package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Hostile attacks on prepareRequest's re-preparation and on its redaction counts.

const (
	hcBearer  = "QmVhcmVyU2VjcmV0VG9rZW4xMjM0NTY3ODkwYWJj"
	hcBearer2 = "ZZsecondBearerTokenValue_0987654321.xyz"
	hcAnthro  = "sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij0123456789"
)

func hcSum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func hcRunner(red *redact.Redactor) *runner {
	return newRunner(Config{Redactor: red, Environ: func() []string { return nil }, Getenv: func(string) string { return "" }})
}

func hcText(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// hcPrepare prepares req on lane and returns the stored request's JSON.
func hcPrepare(t *testing.T, r *runner, l *lane, req session.Request) (session.Request, string) {
	t.Helper()
	stored, fp, err := r.prepareRequest(call{lane: l}, req)
	if err != nil {
		t.Fatal(err)
	}
	if fp == "" {
		t.Fatal("no fingerprint")
	}
	doc, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	return stored, string(doc)
}

func hcNoSecret(t *testing.T, doc string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		// Also the JSON-escaped spellings a stored request could carry.
		if strings.Contains(doc, s) || strings.Contains(doc, s[:len(s)/2]) {
			t.Errorf("stored request holds (part of) secret %q: %s", s, doc)
		}
	}
}

func TestHostileCount_HeadBareMessageTeaches(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hcRunner(red)
	req := session.Request{Model: "m", System: "the key is " + hcBearer + ", never print it",
		Params: map[string]json.RawMessage{"metadata": json.RawMessage(`{"note":"` + hcBearer + `"}`)},
		Messages: []session.Message{
			{Role: "user", Content: hcText("first " + hcBearer)},
			{Role: "user", Content: hcText("Authorization: Bearer " + hcBearer)},
			{Role: "user", Content: hcText("after " + hcBearer)},
		}}
	_, doc := hcPrepare(t, r, r.root, req)
	hcNoSecret(t, doc, hcBearer)
	if got, want := strings.Count(doc, redact.TokenPrefix), hcSum(red.Counts()); got != want {
		t.Errorf("stored request holds %d tokens, counts say %d (%v): %s", got, want, red.Counts(), doc)
	}
	if got := red.Counts()["bearer-token"]; got != 5 {
		t.Errorf("bearer-token = %d, want 5", got)
	}
}

// A secret that only a later message's JSON escapes reveal, bare in an earlier message and in the head.
func TestHostileCount_EscapedTeacher(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hcRunner(red)
	req := session.Request{Model: "m", System: "sys " + hcBearer,
		Messages: []session.Message{
			{Role: "user", Content: hcText("bare " + hcBearer)},
			// A tool result that carries JSON in a string: the Q is escaped inside it.
			{Role: "user", Content: json.RawMessage(`[{"type":"tool_result","content":"{\"h\":\"Bearer \\u0051` + hcBearer[1:] + `\"}"}]`)},
		}}
	_, doc := hcPrepare(t, r, r.root, req)
	hcNoSecret(t, doc, hcBearer, hcBearer[1:])
	if got, want := strings.Count(doc, redact.TokenPrefix), hcSum(red.Counts()); got != want {
		t.Errorf("stored request holds %d tokens, counts say %d (%v): %s", got, want, red.Counts(), doc)
	}
}

// The same secret by two patterns (anthropic inside a Bearer) and many times over.
func TestHostileCount_ManyAndTwoPatterns(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hcRunner(red)
	var msgs []session.Message
	for i := range 40 {
		msgs = append(msgs, session.Message{Role: "user", Content: hcText(fmt.Sprintf("%d %s %s", i, hcBearer, hcAnthro))})
	}
	msgs = append(msgs, session.Message{Role: "user", Content: hcText("Authorization: Bearer " + hcBearer + " x-key Bearer " + hcAnthro)})
	_, doc := hcPrepare(t, r, r.root, session.Request{Model: "m", System: hcBearer, Messages: msgs})
	hcNoSecret(t, doc, hcBearer, hcAnthro)
	c := red.Counts()
	if c["bearer-token"] != 42 || c["anthropic-api-key"] != 41 || len(c) != 2 {
		t.Errorf("counts = %v, want bearer-token 42, anthropic-api-key 41", c)
	}
	if got := strings.Count(doc, redact.TokenPrefix); got != hcSum(c) {
		t.Errorf("tokens %d, counts %v", got, c)
	}
}

// A lane's second request repeats a message the memo stored with the secret bare (it was not known
// then) and adds the message that teaches it: the second stored request holds it nowhere, and the
// first stored request, already handed out, is not rewritten under the caller.
func TestHostileCount_MemoHeldBareSecret(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hcRunner(red)
	m1 := session.Message{Role: "user", Content: hcText("use " + hcBearer)}
	first, firstDoc := hcPrepare(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1}})
	if !strings.Contains(firstDoc, hcBearer) {
		t.Fatalf("precondition: an unknown bare secret stays (nothing says it is one): %s", firstDoc)
	}
	before := red.Counts()
	_, doc := hcPrepare(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1,
		{Role: "assistant", Content: hcText("ok")}, {Role: "user", Content: hcText("Authorization: Bearer " + hcBearer)}}})
	hcNoSecret(t, doc, hcBearer)
	if got := hcSum(red.Counts()) - hcSum(before); got != strings.Count(doc, redact.TokenPrefix) {
		t.Errorf("second request counted %d, holds %d tokens: %s", got, strings.Count(doc, redact.TokenPrefix), doc)
	}
	again, _ := json.Marshal(first)
	if string(again) != firstDoc {
		t.Errorf("first stored request changed after the fact: %s -> %s", firstDoc, again)
	}
	// A third request repeating everything still holds no secret.
	_, doc3 := hcPrepare(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1,
		{Role: "assistant", Content: hcText("ok")}, {Role: "user", Content: hcText("Authorization: Bearer " + hcBearer)}}})
	hcNoSecret(t, doc3, hcBearer)
}

// The count a repeated message contributes must not depend on whether an unrelated newer message of
// the same request teaches a secret. Conversation A and B differ only in their last message, which in
// B holds one more bearer token: B's counts must be A's plus one.
func TestHostileCount_RepreparedRequestDoesNotRecountCarriedMessages(t *testing.T) {
	run := func(last string) map[string]int {
		red := redact.New(redact.BuiltinPatterns())
		r := hcRunner(red)
		m1 := session.Message{Role: "user", Content: hcText("Authorization: Bearer " + hcBearer)}
		hcPrepare(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1}})
		hcPrepare(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1, {Role: "user", Content: hcText(last)}}})
		return red.Counts()
	}
	a := run("hello")
	b := run("Authorization: Bearer " + hcBearer2)
	if hcSum(b) != hcSum(a)+1 {
		t.Errorf("A (last message clean) counts %v; B (last message one more bearer token) counts %v: want B = A + 1", a, b)
	}
}

// Lanes prepare concurrently with one Redactor, each teaching its own secret in its last message
// after holding it bare in its system prompt and first message, while also repeating the others'.
func TestHostileCount_ConcurrentLanes(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hcRunner(red)
	const lanes, rounds = 6, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for li := range lanes {
		l := newLane(fmt.Sprintf("0.%d", li))
		wg.Go(func() {
			var msgs []session.Message
			for i := range rounds {
				sec := fmt.Sprintf("Lane%dRound%dBearerSecret_0123456789", li, i)
				msgs = append(msgs, session.Message{Role: "user", Content: hcText("use " + sec)},
					session.Message{Role: "user", Content: hcText("Authorization: Bearer " + sec)})
				req := session.Request{Model: "m", System: "remember " + sec, Messages: msgs}
				stored, _, err := r.prepareRequest(call{lane: l}, req)
				doc, _ := json.Marshal(stored)
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else if strings.Contains(string(doc), sec) {
					errs = append(errs, fmt.Sprintf("lane %d round %d: secret in clear: %s", li, i, doc))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
}

type hcModel struct{}

func (hcModel) Create(ctx context.Context, req session.Request) (*session.Response, error) {
	return &session.Response{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`), StopReason: "end_turn"}, nil
}

// Record a run whose requests teach the redactor secrets they also hold bare (in the system prompt and
// earlier messages), then replay it with a fresh redactor: no drift, no secret in the recording, and
// the replay's redactor counts what the recording's meta says.
func TestHostileCount_RecordReplayCounts(t *testing.T) {
	noEnv := func() []string { return nil }
	harness := func(ctx context.Context, ac AgentContext) error {
		m1 := session.Message{Role: "user", Content: hcText("deploy with " + hcBearer)}
		if _, err := ac.Model(ctx, session.Request{Model: "m", System: "sys " + hcBearer2, Messages: []session.Message{m1}}); err != nil {
			return err
		}
		m2 := session.Message{Role: "user", Content: hcText("Authorization: Bearer " + hcBearer + " and Bearer " + hcBearer2)}
		_, err := ac.Model(ctx, session.Request{Model: "m", System: "sys " + hcBearer2, Messages: []session.Message{m1, m2}})
		return err
	}
	dir := filepath.Join(t.TempDir(), "rec")
	red := redact.New(redact.BuiltinPatterns())
	rec, err := Record(context.Background(), RecordOptions{Config: Config{Redactor: red, Environ: noEnv}, Dir: dir, Model: hcModel{}}, harness)
	if err != nil {
		t.Fatal(err)
	}
	if rec.HarnessErr != nil {
		t.Fatal(rec.HarnessErr)
	}
	var modelCalls []session.Event
	for _, ev := range rec.Events {
		if ev.Kind == session.KindModelCall {
			modelCalls = append(modelCalls, ev)
		}
	}
	if len(modelCalls) != 2 {
		t.Fatalf("%d model calls recorded", len(modelCalls))
	}
	last, _ := json.Marshal(modelCalls[1].Request)
	hcNoSecret(t, string(last), hcBearer, hcBearer2)
	// The files on disk hold no secret of the second request either (the first one's bare secrets
	// were unknown when it was stored).
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || filepath.Base(p) == session.VaultFile {
			return nil
		}
		b, _ := os.ReadFile(p)
		if n := strings.Count(string(b), hcBearer2); n > 1 {
			t.Errorf("%s holds %q %d times", p, hcBearer2, n)
		}
		return nil
	})

	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	red2 := redact.New(redact.BuiltinPatterns())
	res, err := Replay(context.Background(), ReplayOptions{Config: Config{Redactor: red2, Environ: noEnv}, Session: s}, harness)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if len(res.Drifts) != 0 {
		t.Errorf("drifts: %v", res.Drifts)
	}
	if got, want := red2.Counts(), rec.Meta.Redaction.Counts; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replay counted %v, the recording says %v", got, want)
	}
	t.Logf("record counts %v", rec.Meta.Redaction.Counts)
}
