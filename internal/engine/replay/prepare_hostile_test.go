package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Hostile tests of the request memo (prepare.go). Each compares what a lane's runner returns, using
// its memo, with preparing the same request from scratch on a twin redactor that has seen exactly
// the same documents, and (where the brief asks whether old recordings drift) with the code that
// prepared requests before the memo (prepareBeforeMemo, copied verbatim from 9c697ff^).

// prepareBeforeMemo is runner.prepareRequest as it was before commit 9c697ff: the whole request
// redacted as one document, then fingerprinted.
func prepareBeforeMemo(cfg Config, req session.Request) (session.Request, string, error) {
	cfg = cfg.withDefaults()
	if err := checkRequestText(req); err != nil {
		return req, "", err
	}
	doc, err := json.Marshal(req)
	if err != nil {
		return req, "", err
	}
	red, err := cfg.Redactor.JSON(doc)
	if err != nil {
		return req, "", err
	}
	var stored session.Request
	if err := json.Unmarshal(red, &stored); err != nil {
		return req, "", err
	}
	fp, err := fingerprint.Of(cfg.Codec.StripVolatile(stored), fingerprint.Options{
		Mode: cfg.FingerprintMode, VolatilePaths: cfg.Codec.VolatilePaths()})
	return stored, fp, err
}

// twin is a runner with a memo and a from-scratch oracle on a redactor of its own that is fed the
// same documents in the same order.
type twin struct {
	t      *testing.T
	r      *runner
	oracle Config
}

func newTwin(t *testing.T, cfg Config, patterns []redact.Pattern) *twin {
	t.Helper()
	a, b := cfg, cfg
	a.Redactor, b.Redactor = redact.New(patterns), redact.New(patterns)
	return &twin{t: t, r: newRunner(a), oracle: b.withDefaults()}
}

// both runs f on each redactor: a tool result, a response or AddLiteral seen by the run.
func (w *twin) both(f func(*redact.Redactor)) {
	f(w.r.cfg.Redactor)
	f(w.oracle.Redactor)
}

type prepared struct {
	stored []byte
	fp     string
	err    string
}

func prep(stored session.Request, fp string, err error) prepared {
	p := prepared{fp: fp}
	if err != nil {
		p.err = err.Error()
		return p
	}
	b, merr := json.Marshal(stored)
	if merr != nil {
		p.err = "marshal stored: " + merr.Error()
	}
	p.stored = b
	return p
}

// step prepares req in lane with the memo and from scratch, and fails on any difference. It returns
// the memo's stored request (to check later that it never changes) and its JSON at return time.
func (w *twin) step(lane *lane, req session.Request) (session.Request, prepared) {
	w.t.Helper()
	s, fp, err := w.r.prepareRequest(call{lane: lane}, req)
	got := prep(s, fp, err)
	want := prep(prepareFromScratch(w.oracle, req))
	if got.err != want.err || got.fp != want.fp || !bytes.Equal(got.stored, want.stored) {
		w.t.Fatalf("lane %s, %d messages: memo and from scratch differ\n memo:    err=%q fp=%s stored=%s\n scratch: err=%q fp=%s stored=%s",
			lane.id, len(req.Messages), got.err, got.fp, clip(got.stored), want.err, want.fp, clip(want.stored))
	}
	return s, got
}

// clip shortens what a failure prints.
func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:200]) + fmt.Sprintf("…(%d bytes)…", len(b)-400) + string(b[len(b)-200:])
	}
	return string(b)
}

func msg(role, content string) session.Message {
	return session.Message{Role: role, Content: json.RawMessage(content)}
}

func conv(msgs ...session.Message) session.Request {
	return session.Request{Model: "m", Messages: msgs}
}

// A message whose Content is nil marshals as null; one whose Content is empty but not nil cannot be
// marshalled at all. bytes.Equal holds them equal, so the memo serves the nil one's result to the
// empty one, which from scratch is an error.
func TestHostileMemoNilThenEmptyContent(t *testing.T) {
	w := newTwin(t, Config{}, redact.BuiltinPatterns())
	l := newLane("x")
	w.step(l, conv(msg("user", `"hi"`), session.Message{Role: "user", Content: nil}))
	w.step(l, conv(msg("user", `"hi"`), session.Message{Role: "user", Content: json.RawMessage{}}))
}

// The reverse order must hold too (an error drops the memo).
func TestHostileMemoEmptyThenNilContent(t *testing.T) {
	w := newTwin(t, Config{}, redact.BuiltinPatterns())
	l := newLane("x")
	w.step(l, conv(msg("user", `"hi"`), session.Message{Role: "user", Content: json.RawMessage{}}))
	w.step(l, conv(msg("user", `"hi"`), session.Message{Role: "user", Content: nil}))
}

// A request with an empty (not nil) message list — what the proxy's decoder gives for
// "messages":[] — was stored and fingerprinted with "messages":[] before the memo; now the head is
// redacted without its messages and comes back with null.
func TestHostileEmptyMessageListMatchesBeforeMemo(t *testing.T) {
	req := session.Request{Model: "m", System: "s", Messages: []session.Message{}}
	r := newRunner(Config{})
	s, fp, err := r.prepareRequest(call{lane: newLane("x")}, req)
	if err != nil {
		t.Fatal(err)
	}
	os, ofp, oerr := prepareBeforeMemo(Config{}, req)
	if oerr != nil {
		t.Fatal(oerr)
	}
	got, _ := json.Marshal(s)
	want, _ := json.Marshal(os)
	if fp != ofp || !bytes.Equal(got, want) {
		t.Fatalf("a recording made before the memo drifts:\n now:    fp=%s stored=%s\n before: fp=%s stored=%s", fp, got, ofp, want)
	}
}

// nested returns a JSON value nested depth levels deep.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// A message nested just below encoding/json's and fingerprint's depth limit (10,000) on its own is
// past it inside the request ({"messages":[{"content": ... }]} adds three levels). Hashing the
// messages one at a time must not accept what hashing the request refuses.
func TestHostileMemoDepthLimitSameAsFromScratch(t *testing.T) {
	for _, depth := range []int{9997, 9998, 9999} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			w := newTwin(t, Config{}, redact.BuiltinPatterns())
			w.step(newLane("x"), conv(msg("user", nested(depth))))
		})
	}
}

const bearerSecret = "Zq9xK2mW7vR4tY8uP3sL6nB1"

// A secret found by a pattern in one message (Bearer …) and standing bare in another message of the
// same request, before or after it, or in the system prompt, is stored in none of them. (The code
// before the memo redacted the request in one pass, learning at its end: it stored the bare secret,
// so a recording holding such a request drifts at it now, rather than keep a secret in clear.)
func TestHostileSecretSplitAcrossMessagesIsStoredNowhere(t *testing.T) {
	found := msg("user", `"Authorization: Bearer `+bearerSecret+`"`)
	bare := msg("assistant", `"I will use `+bearerSecret+`"`)
	for name, req := range map[string]session.Request{
		"bare after":  conv(found, bare),
		"bare before": conv(bare, found),
		"in system":   {Model: "m", System: "use " + bearerSecret, Messages: []session.Message{found}},
	} {
		t.Run(name, func(t *testing.T) {
			w := newTwin(t, Config{}, redact.BuiltinPatterns())
			_, p := w.step(newLane("x"), req)
			if p.err != "" || bytes.Contains(p.stored, []byte(bearerSecret)) {
				t.Fatalf("the secret is stored (err %v): %s", p.err, p.stored)
			}
		})
	}
}

// The same request against the memo oracle: the split secret, both orders, and the secret in the
// system prompt (redacted before the messages now).
func TestHostileSecretSplitAcrossMessagesMemo(t *testing.T) {
	w := newTwin(t, Config{}, redact.BuiltinPatterns())
	l := newLane("x")
	bare := msg("user", `"I will use `+bearerSecret+`"`)
	found := msg("assistant", `"Authorization: Bearer `+bearerSecret+`"`)
	_, p1 := w.step(l, conv(bare))
	if !bytes.Contains(p1.stored, []byte(bearerSecret)) {
		t.Fatalf("setup: the bare secret is not known yet, so it is stored: %s", p1.stored)
	}
	_, p2 := w.step(l, conv(bare, found))
	_, p3 := w.step(l, conv(bare, found, msg("user", `"ok"`)))
	if bytes.Contains(p3.stored, []byte(bearerSecret)) {
		t.Fatalf("once learned, the secret must be redacted in the memo's old messages too: %s", p3.stored)
	}
	if p2.fp == p3.fp {
		t.Fatal("different requests share a fingerprint")
	}
	sys := session.Request{Model: "m", System: "Bearer " + "Qw8eR7tY6uI5oP4aS3dF2gH1", Messages: []session.Message{msg("user", `"Qw8eR7tY6uI5oP4aS3dF2gH1"`)}}
	w.step(l, sys)
}

// A secret first stored bare, then learned elsewhere: from a tool result, a response, AddLiteral
// (Env), or a call site. The memo must not serve the bare message from before.
func TestHostileSecretLearnedOutsideTheRequest(t *testing.T) {
	learners := map[string]func(*redact.Redactor){
		"tool result": func(r *redact.Redactor) { r.JSON([]byte(`{"out":"Bearer ` + bearerSecret + `"}`)) },
		"add literal": func(r *redact.Redactor) { r.AddLiteral("env:TOKEN", bearerSecret) },
		"call site":   func(r *redact.Redactor) { r.String("site bearer " + bearerSecret) },
		"response stream": func(r *redact.Redactor) {
			r.Stream([][]byte{[]byte(`{"delta":"Bearer Zq9xK2mW7v"}`), []byte(`{"delta":"R4tY8uP3sL6nB1 done"}`)})
		},
	}
	for name, learn := range learners {
		t.Run(name, func(t *testing.T) {
			w := newTwin(t, Config{}, redact.BuiltinPatterns())
			l := newLane("x")
			m0 := msg("user", `{"text":"`+bearerSecret+`"}`)
			w.step(l, conv(m0))
			w.both(learn)
			_, p := w.step(l, conv(m0, msg("assistant", `"fine"`)))
			if bytes.Contains(p.stored, []byte(bearerSecret)) {
				t.Fatalf("the secret stays bare in the memo's message: %s", p.stored)
			}
		})
	}
}

// A user pattern, and a secret only visible through JSON escapes (the whole string is replaced) in
// a later message, after the memo holds the escaped-free form of an earlier one.
func TestHostileUserPatternAndEscapes(t *testing.T) {
	user, err := redact.ParsePatterns([]string{`corp=CORP-[0-9]{6}`})
	if err != nil {
		t.Fatal(err)
	}
	w := newTwin(t, Config{}, append(redact.BuiltinPatterns(), user...))
	l := newLane("x")
	m0 := msg("user", `"ticket CORP-123456"`)
	m1 := msg("user", `"\u0043ORP-654321 and sk-\u0061nt-`+strings.Repeat("a", 40)+`"`)
	m2 := msg("user", `"CORP-654321 again, and 654321"`)
	w.step(l, conv(m0))
	w.step(l, conv(m0, m1))
	w.step(l, conv(m0, m1, m2))
	w.step(l, conv(m2, m1, m0))
	w.step(l, conv(m0, m1, m2))
}

// Spellings that mean the same or nearly the same JSON: the memo compares bytes, so each must be
// prepared as from scratch, whichever order they arrive in.
func TestHostileSpellingsOfOneMessage(t *testing.T) {
	spellings := []string{
		`{"t":"a/b"}`, `{"t":"a\/b"}`, `{ "t" : "a/b" }`, "{\"t\":\"caf\u00e9\"}", `{"t":"caf\u00e9"}`,
		"{\"t\":\"cafe\u0301\"}", `{"t":"cafe\u0301"}`, `{"n":9007199254740993}`, `{"n":9007199254740992}`,
		`{"n":1e400}`, `{"n":1.0}`, `{"n":1}`, `{"t":"a","t":"b"}`, `{"t":"b","t":"a"}`, `"\ud83d\ude00"`, `"😀"`,
		`"\ud800"`, "\"\xff\"", `null`, `[]`, `{}`, `""`, `"<&>"`, `"\u003c\u0026\u003e"`,
	}
	for _, role := range []string{"user", "assistant", "us\u00e9r", "use\u0301r", "us\xffer", ""} {
		w := newTwin(t, Config{}, redact.BuiltinPatterns())
		l := newLane("x")
		base := msg("system", `"start"`)
		for i, a := range spellings {
			for _, b := range spellings[i:] {
				w.step(l, conv(base, msg(role, a)))
				w.step(l, conv(base, msg(role, a), msg(role, b)))
				w.step(l, conv(base, msg(role, b), msg(role, a)))
			}
		}
	}
}

// A harness that reuses its buffers: after each call it rewrites a message's bytes in place and
// sends the same slice again. The memo kept copies, so it must see the change.
func TestHostileContentMutatedInPlace(t *testing.T) {
	w := newTwin(t, Config{}, redact.BuiltinPatterns())
	l := newLane("x")
	buf := []byte(`"aaaa"`)
	msgs := []session.Message{msg("user", `"q"`), {Role: "assistant", Content: buf}}
	var kept []session.Request
	var keptJSON [][]byte
	for i := 0; i < 4; i++ {
		s, p := w.step(l, conv(msgs...))
		kept, keptJSON = append(kept, s), append(keptJSON, p.stored)
		buf[1+i] = 'b' // same length, same slice
		msgs[0].Role = []string{"user", "tool", "user", "developer"}[i]
	}
	for i := range kept {
		now, _ := json.Marshal(kept[i])
		if !bytes.Equal(now, keptJSON[i]) {
			t.Fatalf("request %d changed after it was returned:\n then %s\n now  %s", i, keptJSON[i], now)
		}
	}
}

// A random walk over a conversation (grow, shrink, edit an old message, grow back to the same bytes,
// swap lanes, learn secrets) compared step by step with from scratch; every request returned must
// read at the end as it read when returned.
func TestHostileRandomWalkAgainstFromScratch(t *testing.T) {
	codecs := map[string]Config{
		"generic strict":        {},
		"generic structural":    {FingerprintMode: fingerprint.Structural},
		"anthropic structural":  {Codec: anthropic.Codec{}, FingerprintMode: fingerprint.Structural},
		"openai strict":         {Codec: openai.Codec{}},
		"openai responses str.": {Codec: openai.ResponsesCodec{}, FingerprintMode: fingerprint.Structural},
		"masking codec":         {Codec: maskingCodec{}, FingerprintMode: fingerprint.Structural},
	}
	contents := []string{`"a"`, `"b"`, `{"x":[1,2,{"y":null}]}`, `"Bearer ` + bearerSecret + `"`, `"` + bearerSecret + `"`,
		`[{"type":"text","text":"hello","cache_control":{"type":"ephemeral"}}]`, `"caf\u00e9"`, "\"cafe\u0301\"", `null`,
		`"sk-ant-` + strings.Repeat("Q", 40) + `"`, `{"n":12345678901234567890}`}
	for name, cfg := range codecs {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(len(name))))
			w := newTwin(t, cfg, redact.BuiltinPatterns())
			lanes := []*lane{newLane("0"), newLane("0.1"), newLane("0/named")}
			convs := make([][]session.Message, len(lanes))
			var kept []session.Request
			var keptJSON [][]byte
			for i := 0; i < 400; i++ {
				li := rng.Intn(len(lanes))
				c := convs[li]
				switch op := rng.Intn(10); {
				case op < 5 || len(c) == 0:
					c = append(c, msg([]string{"user", "assistant"}[rng.Intn(2)], contents[rng.Intn(len(contents))]))
				case op < 7:
					c = c[:rng.Intn(len(c))]
				case op < 8:
					c = append([]session.Message(nil), c...)
					c[rng.Intn(len(c))] = msg("user", contents[rng.Intn(len(contents))])
				case op < 9:
					lit := fmt.Sprintf("literal-%d-xyz", rng.Intn(3))
					w.both(func(r *redact.Redactor) { r.AddLiteral("lit", lit) })
				default:
					c = append(c, msg("user", fmt.Sprintf(`"literal-%d-xyz"`, rng.Intn(3))))
				}
				convs[li] = c
				req := session.Request{Model: "m", System: "sys", Messages: c,
					Params: map[string]json.RawMessage{"temperature": json.RawMessage(fmt.Sprint(rng.Intn(3))), "stream": json.RawMessage("true")}}
				s, p := w.step(lanes[li], req)
				kept, keptJSON = append(kept, s), append(keptJSON, p.stored)
			}
			for i := range kept {
				now, _ := json.Marshal(kept[i])
				if !bytes.Equal(now, keptJSON[i]) {
					t.Fatalf("request %d changed after it was returned:\n then %s\n now  %s", i, keptJSON[i], now)
				}
			}
		})
	}
}

// maskingCodec masks a path into the messages in structural mode: the memo must not resume from
// unmasked states.
type maskingCodec struct{ GenericCodec }

func (maskingCodec) VolatilePaths() []string {
	return []string{"messages.content.cache_control", "params.temperature"}
}

// Concurrent calls of one lane and of several lanes (run with -race): each result equals from
// scratch, and no returned request changes afterwards.
func TestHostileConcurrentLanes(t *testing.T) {
	r := newRunner(Config{})
	oracle := Config{Redactor: redact.New(redact.BuiltinPatterns())}.withDefaults()
	shared := newLane("0")
	lanes := []*lane{shared, shared, shared, newLane("0.1"), newLane("0.2"), newLane("0.1")}
	type result struct {
		s    session.Request
		json []byte
		fp   string
		req  session.Request
	}
	results := make([][]result, len(lanes))
	var wg sync.WaitGroup
	for g, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c []session.Message
			for i := 0; i < 60; i++ {
				if i%7 == 6 {
					c = c[:len(c)/2]
				}
				c = append(c, msg("user", fmt.Sprintf(`{"g":%d,"i":%d,"t":"%s"}`, g%3, i%5, strings.Repeat("z", i%4))))
				req := conv(slices.Clone(c)...)
				s, fp, err := r.prepareRequest(call{lane: l}, req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := json.Marshal(s)
				results[g] = append(results[g], result{s, b, fp, req})
			}
		}()
	}
	wg.Wait()
	for g := range results {
		for i, res := range results[g] {
			now, _ := json.Marshal(res.s)
			if !bytes.Equal(now, res.json) {
				t.Fatalf("goroutine %d request %d changed after it was returned:\n then %s\n now  %s", g, i, res.json, now)
			}
			os, ofp, err := prepareFromScratch(oracle, res.req)
			ob, _ := json.Marshal(os)
			if err != nil || ofp != res.fp || !bytes.Equal(ob, res.json) {
				t.Fatalf("goroutine %d request %d: memo fp=%s %s; scratch fp=%s %s err=%v", g, i, res.fp, res.json, ofp, ob, err)
			}
		}
	}
}

// Fork overrides rewrite a tail request's messages (RequestPatches on /messages/0/content, a
// System, a Transform that edits the last message): the memo must not serve the unpatched prefix.
func TestHostileForkOverridesRewriteMessages(t *testing.T) {
	sys := "patched system"
	o := Overrides{
		System: &sys,
		RequestPatches: []PatchOperation{
			{Op: "replace", Path: "/messages/0/content", Value: json.RawMessage(`"patched first"`)},
		},
		Transform: func(req session.Request, step int64) (session.Request, error) {
			if step%2 == 1 && len(req.Messages) > 1 {
				req.Messages = slices.Clone(req.Messages)
				req.Messages[len(req.Messages)-1].Content = json.RawMessage(`"odd step"`)
			}
			return req, nil
		},
	}
	w := newTwin(t, Config{}, redact.BuiltinPatterns())
	l := newLane("x")
	var c []session.Message
	for step := int64(0); step < 12; step++ {
		c = append(c, msg("user", fmt.Sprintf(`"turn %d"`, step)))
		raw := conv(slices.Clone(c)...)
		w.step(l, raw) // the served prefix, unpatched
		patched, err := o.Apply(raw, step)
		if err != nil {
			t.Fatal(err)
		}
		_, p := w.step(l, patched)
		if !bytes.Contains(p.stored, []byte(`"patched first"`)) {
			t.Fatalf("step %d: the patch is missing from the stored request: %s", step, p.stored)
		}
	}
}

// Recordings made before the memo (the fixtures) must fingerprint the same now: each recorded
// model request, prepared again in its lane in step order, gives its recorded hash.
func TestHostileFixturesFingerprintAsRecorded(t *testing.T) {
	// The session package's fixtures carry placeholder hashes (REQHASH, 000…1): only v1-triage has real ones.
	for _, dir := range []string{"testdata/v1-triage"} {
		t.Run(dir, func(t *testing.T) {
			s, err := session.Open(dir)
			if err != nil {
				t.Skipf("open: %v", err)
			}
			r := newRunner(Config{FingerprintMode: fingerprint.Mode(s.Meta.FingerprintMode)})
			lanes := map[string]*lane{}
			n := 0
			for _, ev := range s.Events {
				if ev.Kind != session.KindModelCall || ev.Request == nil || ev.RequestHash == "" {
					continue
				}
				l := lanes[ev.Lane]
				if l == nil {
					l = newLane(ev.Lane)
					lanes[ev.Lane] = l
				}
				for pass := 0; pass < 2; pass++ { // from an empty memo, then from the memo it left
					_, fp, err := r.prepareRequest(call{lane: l}, *ev.Request)
					if err != nil {
						t.Fatalf("step %d: %v", ev.Step, err)
					}
					if fp != ev.RequestHash {
						t.Fatalf("step %d pass %d: fingerprint %s, recorded %s", ev.Step, pass, fp, ev.RequestHash)
					}
				}
				n++
			}
			t.Logf("%d model requests fingerprint as recorded", n)
		})
	}
}

type okModel struct{}

func (okModel) Create(ctx context.Context, req session.Request) (*session.Response, error) {
	return &session.Response{Content: json.RawMessage(`"ok"`), StopReason: "end_turn"}, nil
}

// A request nested past the depth limit once its messages sit inside it is refused when recorded,
// naming the limit, as before the memo: never recorded into a log that would not open.
func TestHostileDeepRequestIsRefusedWhenRecorded(t *testing.T) {
	dir := t.TempDir() + "/s"
	req := conv(msg("user", nested(9998)))
	var callErr error
	_, err := Record(context.Background(), RecordOptions{Dir: dir, Model: okModel{}},
		func(ctx context.Context, ac AgentContext) error {
			_, callErr = ac.Model(ctx, req)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if callErr == nil || !strings.Contains(callErr.Error(), "nesting depth") {
		t.Fatalf("the model call returned %v, want the nesting depth refused", callErr)
	}
	if _, err := session.Open(dir); err != nil {
		t.Fatalf("the recording does not open: %v", err)
	}
}

// trimmingCodec leaves out of the fingerprint a trailing assistant prefill when the request says it
// is one, by reslicing: StripVolatile returns a copy of the request whose Messages is a prefix of
// the stored ones (same backing array, shorter).
type trimmingCodec struct{ GenericCodec }

func (trimmingCodec) StripVolatile(req session.Request) session.Request {
	if _, ok := req.Params["prefill"]; ok && len(req.Messages) > 0 {
		req.Messages = req.Messages[:len(req.Messages)-1]
	}
	return GenericCodec{}.StripVolatile(req)
}

// The memo resumes at the last shared message even when the stripped request is shorter than that.
func TestHostileCodecTrimsMessages(t *testing.T) {
	w := newTwin(t, Config{Codec: trimmingCodec{}}, redact.BuiltinPatterns())
	l := newLane("x")
	msgs := []session.Message{msg("user", `"a"`), msg("assistant", `"b"`), msg("user", `"c"`)}
	w.step(l, conv(msgs...))
	prefill := conv(msgs...)
	prefill.Params = map[string]json.RawMessage{"prefill": json.RawMessage(`true`)}
	w.step(l, prefill)
}
