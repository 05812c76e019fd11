package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Hostile attacks on prepareRequest's counting and head cache (commit 783d95f), written by a
// reviewer who had not read its tests.

func hc2Runner(red *redact.Redactor) *runner {
	return newRunner(Config{Redactor: red, Environ: func() []string { return nil }, Getenv: func(string) string { return "" }})
}

// hc2Key is a pattern-found key: n makes distinct ones.
func hc2Key(n int) string { return fmt.Sprintf("sk-ant-api03-%02d", n) + strings.Repeat("Qx7_", 9) }

func hc2Msg(role, text string) session.Message {
	b, _ := json.Marshal(text)
	return session.Message{Role: role, Content: b}
}

func hc2Total(red *redact.Redactor) int {
	n := 0
	for _, c := range red.Counts() {
		n += c
	}
	return n
}

func hc2Tokens(v any) int {
	b, _ := json.Marshal(v)
	return len(redact.FindTokens(b))
}

// hc2Prep prepares req on lane and checks that the result equals a from-scratch preparation (a fresh
// runner on the same redactor); it returns the stored request and the count delta of the preparation
// (the from-scratch one counts into the redactor too: sum deltas, never read the redactor's total).
func hc2Prep(t *testing.T, r *runner, lane *lane, req session.Request) (session.Request, int) {
	t.Helper()
	before := hc2Total(r.cfg.Redactor)
	stored, fp, err := r.prepareRequest(call{lane: lane}, req)
	if err != nil {
		t.Fatalf("prepareRequest: %v", err)
	}
	delta := hc2Total(r.cfg.Redactor) - before
	fresh := hc2Runner(r.cfg.Redactor)
	want, wantFP, err := fresh.prepareRequest(call{lane: fresh.root}, req)
	if err != nil {
		t.Fatalf("from scratch: %v", err)
	}
	if fp != wantFP || !reflect.DeepEqual(stored, want) {
		a, _ := json.Marshal(stored)
		b, _ := json.Marshal(want)
		t.Fatalf("memo result differs from scratch:\n memo    %s %s\n scratch %s %s", fp, a, wantFP, b)
	}
	return stored, delta
}

func hc2NoBare(t *testing.T, stored session.Request, secrets ...string) {
	t.Helper()
	b, _ := json.Marshal(stored)
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			t.Fatalf("secret %q stored bare: %s", s, b)
		}
	}
}

// A growing conversation, each message holding a new key, the head a key too: the run's counts are
// the tokens of its last stored request (each part counted once), whether or not the memo is dropped
// by unrelated learning between requests.
func TestHostileCounts2GrowingConversationCountsEachPartOnce(t *testing.T) {
	for _, bump := range []bool{false, true} {
		red := redact.New(redact.BuiltinPatterns())
		r := hc2Runner(red)
		req := session.Request{Model: "m", System: "sys " + hc2Key(99), Params: map[string]json.RawMessage{"max_tokens": json.RawMessage(`64`)}}
		var last session.Request
		total := 0
		for i := range 12 {
			req.Messages = append(req.Messages, hc2Msg([]string{"user", "assistant"}[i%2], fmt.Sprintf("turn %d %s", i, hc2Key(i))))
			if bump {
				red.AddLiteral("declared-secret", fmt.Sprintf("unrelated-secret-%03d", i))
			}
			var d int
			last, d = hc2Prep(t, r, r.root, req)
			total += d
		}
		if got, want := total, hc2Tokens(last); got != want {
			t.Errorf("bump=%v: counts %d, tokens stored in the last request %d (%v)", bump, got, want, red.Counts())
		}
	}
}

// A system prompt holding a secret no pattern knows is stored bare until another lane teaches it;
// then the lane's next request stores it redacted (the head cache is not reused), counts it once,
// and the request after does not count it again.
func TestHostileCounts2SystemSecretLearnedOnAnotherLane(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	other := newLane("0.1")
	tok := "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"
	reqA := session.Request{Model: "m", System: "call the api with " + tok, Messages: []session.Message{hc2Msg("user", "hi")}}
	s1, d1 := hc2Prep(t, r, r.root, reqA)
	if d1 != 0 || !strings.Contains(s1.System, tok) {
		t.Fatalf("before learning: delta %d, system %q", d1, s1.System)
	}
	_, dB := hc2Prep(t, r, other, session.Request{Model: "m", Messages: []session.Message{hc2Msg("user", "Authorization: Bearer "+tok)}})
	if dB != 1 {
		t.Fatalf("the other lane counted %d", dB)
	}
	reqA.Messages = append(reqA.Messages, hc2Msg("assistant", "ok"))
	s2, d2 := hc2Prep(t, r, r.root, reqA)
	hc2NoBare(t, s2, tok)
	if d2 != 1 {
		t.Errorf("the head newly redacted counted %d, want 1", d2)
	}
	reqA.Messages = append(reqA.Messages, hc2Msg("user", "more"))
	s3, d3 := hc2Prep(t, r, r.root, reqA)
	hc2NoBare(t, s3, tok)
	if d3 != 0 {
		t.Errorf("the unchanged head counted again: %d", d3)
	}
}

// The secret is learned from a message of the same request (a later pass): the head, redacted
// before the message taught it, is not kept stale.
func TestHostileCounts2HeadSecretTaughtBySameRequest(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	tok := "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"
	req := session.Request{Model: "m", System: "token " + tok, Messages: []session.Message{hc2Msg("user", "Bearer "+tok)}}
	s, d := hc2Prep(t, r, r.root, req)
	hc2NoBare(t, s, tok)
	if d != hc2Tokens(s) {
		t.Errorf("counted %d, stored %d tokens", d, hc2Tokens(s))
	}
	req.Messages = append(req.Messages, hc2Msg("assistant", "x"))
	s, d = hc2Prep(t, r, r.root, req)
	hc2NoBare(t, s, tok)
	if d != 0 {
		t.Errorf("repeat counted %d", d)
	}
}

// Heads that change and change back: each is stored correctly (never another head's cached
// redaction) and counted the first time the session stores it.
func TestHostileCounts2HeadChangesAndChangesBack(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	h1 := "first " + hc2Key(1)
	h2 := "second " + hc2Key(1)
	msgs := []session.Message{hc2Msg("user", "hi")}
	for i, sys := range []string{h1, h2, h1, h1, h2, h2, h1} {
		msgs = append(msgs, hc2Msg("user", fmt.Sprint(i)))
		req := session.Request{Model: "m", System: sys, Messages: msgs}
		s, d := hc2Prep(t, r, r.root, req)
		wantSys := strings.Replace(sys, hc2Key(1), redact.Token(hc2Key(1)), 1)
		if s.System != wantSys {
			t.Fatalf("request %d: stored system %q, want %q", i, s.System, wantSys)
		}
		first := i < 2 // h1, then h2: each is stored, and counted, once
		if (d == 1) != first {
			t.Errorf("request %d: counted %d, first time this head is stored: %v", i, d, first)
		}
	}
}

// Params changing while model and system stay: the head cache compares the whole head.
func TestHostileCounts2ParamsChangeIsSeen(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	msgs := []session.Message{hc2Msg("user", "hi")}
	for i, p := range []string{`{"k":"` + hc2Key(3) + `"}`, `{"k":"` + hc2Key(4) + `"}`, `{"k":"` + hc2Key(3) + `"}`} {
		req := session.Request{Model: "m", Messages: msgs, Params: map[string]json.RawMessage{"tools": json.RawMessage(p)}}
		s, _ := hc2Prep(t, r, r.root, req)
		hc2NoBare(t, s, hc2Key(3), hc2Key(4))
		if !bytes.Contains(s.Params["tools"], []byte(redact.Token([]string{hc2Key(3), hc2Key(4), hc2Key(3)}[i]))) {
			t.Fatalf("request %d stored params %s", i, s.Params["tools"])
		}
	}
}

// nil, empty and present messages, alternating: stored as given, fingerprints as from scratch, and
// the head counted once.
func TestHostileCounts2NilEmptyMessages(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	head := session.Request{Model: "m", System: "s " + hc2Key(5)}
	total := 0
	for i, msgs := range [][]session.Message{nil, {}, nil, {hc2Msg("user", "a")}, {}, nil, {hc2Msg("user", "a"), {Role: "user", Content: nil}}, {hc2Msg("user", "a"), {Role: "user", Content: json.RawMessage("null")}}} {
		req := head
		req.Messages = msgs
		s, d := hc2Prep(t, r, r.root, req)
		total += d
		if (msgs == nil) != (s.Messages == nil) {
			t.Errorf("request %d: messages nil=%v stored nil=%v", i, msgs == nil, s.Messages == nil)
		}
	}
	if total != 1 {
		t.Errorf("the unchanged head counted %d times", total)
	}
}

// A request that fails to prepare (a message that is not JSON) drops the lane's memo, and with it
// what the lane's last stored request held: the next request counts its repeated parts again. The
// run's counts then depend on whether the memo was dropped.
func TestHostileCounts2FailedRequestDoesNotRecountRepeatedParts(t *testing.T) {
	run := func(withFailure bool) int {
		red := redact.New(redact.BuiltinPatterns())
		r := hc2Runner(red)
		m1 := hc2Msg("user", "key "+hc2Key(1))
		if _, _, err := r.prepareRequest(call{lane: r.root}, session.Request{Model: "m", System: hc2Key(2), Messages: []session.Message{m1}}); err != nil {
			t.Fatal(err)
		}
		if withFailure {
			bad := session.Request{Model: "m", System: hc2Key(2), Messages: []session.Message{m1, {Role: "user", Content: json.RawMessage(`{not json`)}}}
			if _, _, err := r.prepareRequest(call{lane: r.root}, bad); err == nil {
				t.Fatal("a message that is not JSON was prepared")
			}
		}
		if _, _, err := r.prepareRequest(call{lane: r.root}, session.Request{Model: "m", System: hc2Key(2), Messages: []session.Message{m1, hc2Msg("user", "plain")}}); err != nil {
			t.Fatal(err)
		}
		return hc2Total(red)
	}
	if a, b := run(false), run(true); a != b {
		t.Fatalf("counts %d without the failed request in between, %d with it (the head and message m1 were stored once more, unchanged)", a, b)
	}
}

// Two calls of one lane in flight at once: the second gets an empty memo, but the parts the lane's
// last request held must not count again. Same requests, same order of completion: same counts.
func TestHostileCounts2ConcurrentCallsOfALaneDoNotRecount(t *testing.T) {
	run := func(overlap bool) int {
		red := redact.New(redact.BuiltinPatterns())
		r := hc2Runner(red)
		m1 := hc2Msg("user", "key "+hc2Key(1))
		head := session.Request{Model: "m", System: "sys " + hc2Key(2)}
		req := head
		req.Messages = []session.Message{m1}
		if _, _, err := r.prepareRequest(call{lane: r.root}, req); err != nil {
			t.Fatal(err)
		}
		var held *requestMemo
		if overlap { // a concurrent call of the lane has taken the memo (takeMemo), and is still preparing
			held = r.takeMemo(r.root.id)
		}
		req.Messages = []session.Message{m1, hc2Msg("assistant", "a")}
		if _, _, err := r.prepareRequest(call{lane: r.root}, req); err != nil {
			t.Fatal(err)
		}
		if overlap {
			r.keepMemo(r.root.id, held)
		}
		return hc2Total(red)
	}
	if a, b := run(false), run(true); a != b {
		t.Fatalf("counts %d when the calls are sequential, %d when they overlap", a, b)
	}
}

// The same with real goroutines: many rounds of two concurrent calls of one lane repeating the
// conversation: the same fingerprints and counts as the sequential run's.
func TestHostileCounts2ConcurrentCallsOfALaneGoroutines(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	seqRed := redact.New(redact.BuiltinPatterns())
	seq := hc2Runner(seqRed)
	head := session.Request{Model: "m", System: "sys " + hc2Key(2)}
	var msgs []session.Message
	for round := range 20 {
		msgs = append(msgs, hc2Msg("user", fmt.Sprintf("round %d %s", round, hc2Key(round))))
		reqs := make([]session.Request, 2)
		for j := range reqs {
			reqs[j] = head
			reqs[j].Messages = append(msgs[:len(msgs):len(msgs)], hc2Msg("assistant", fmt.Sprint(j)))
		}
		var wg sync.WaitGroup
		fps := make([]string, 2)
		for j := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, fp, err := r.prepareRequest(call{lane: r.root}, reqs[j])
				if err != nil {
					t.Error(err)
				}
				fps[j] = fp
			}()
		}
		wg.Wait()
		for j := range reqs {
			_, fp, err := seq.prepareRequest(call{lane: seq.root}, reqs[j])
			if err != nil || fp != fps[j] {
				t.Fatalf("round %d request %d: fingerprint %s concurrent, %s sequential (%v)", round, j, fps[j], fp, err)
			}
		}
	}
	if c, q := hc2Total(red), hc2Total(seqRed); c != q {
		t.Errorf("counts: concurrent %d, sequential %d", c, q)
	}
}

// A lane's request that rewrites a message in the middle of its conversation (context editing,
// compaction): the messages after it, held by the lane's last request and stored exactly as before,
// count again, though "a message the lane's last request held counts again only when it is now
// redacted differently".
func TestHostileCounts2MiddleEditDoesNotRecountLaterMessages(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	m1, m2, m3 := hc2Msg("user", "hello"), hc2Msg("assistant", "long tool output"), hc2Msg("user", "key "+hc2Key(7))
	_, d1 := hc2Prep(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1, m2, m3}})
	_, d2 := hc2Prep(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1, hc2Msg("assistant", "[cleared]"), m3, hc2Msg("assistant", "ok")}})
	if d1 != 1 || d2 != 0 {
		t.Fatalf("counted %d then %d; m3 is held by the last request and stored identically, want 1 then 0", d1, d2)
	}
}

// A message edited in the middle that now holds a secret: counted once; the stored request is as
// from scratch; and the edit back counts nothing new.
func TestHostileCounts2MiddleEditAddsSecret(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	m1, m3 := hc2Msg("user", "a"), hc2Msg("user", "c")
	_, d := hc2Prep(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1, hc2Msg("assistant", "b"), m3}})
	if d != 0 {
		t.Fatal(d)
	}
	s, d := hc2Prep(t, r, r.root, session.Request{Model: "m", Messages: []session.Message{m1, hc2Msg("assistant", "b "+hc2Key(8)), m3}})
	hc2NoBare(t, s, hc2Key(8))
	if d != 1 {
		t.Errorf("the edited message counted %d", d)
	}
}

// A message held bare (its secret unknown) then learned on another lane: the lane's next request
// stores it redacted and counts it once, and the memo kept after that is not stale.
func TestHostileCounts2CarriedMessageNewlyRedacted(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	tok := "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"
	msgs := []session.Message{hc2Msg("user", "use "+tok+" and "+hc2Key(1))}
	_, d := hc2Prep(t, r, r.root, session.Request{Model: "m", Messages: msgs})
	if d != 1 {
		t.Fatalf("first: %d", d)
	}
	_, _ = hc2Prep(t, r, newLane("0.1"), session.Request{Model: "m", Messages: []session.Message{hc2Msg("user", "Bearer "+tok)}})
	msgs = append(msgs, hc2Msg("assistant", "x"))
	s, d := hc2Prep(t, r, r.root, session.Request{Model: "m", Messages: msgs})
	hc2NoBare(t, s, tok)
	// The message is stored differently: it counts again, its old key included (documented).
	t.Logf("the carried message, now redacted differently, counted %d (its key counted again with the new secret)", d)
	msgs = append(msgs, hc2Msg("user", "y"))
	s, d = hc2Prep(t, r, r.root, session.Request{Model: "m", Messages: msgs})
	hc2NoBare(t, s, tok)
	if d != 0 {
		t.Errorf("repeat counted %d", d)
	}
}

// Stored requests of a lane keep their messages when a later request of the lane rewrites or drops
// them (the memo's arrays are shared with stored events).
func TestHostileCounts2StoredRequestsNotMutatedByLaterRequests(t *testing.T) {
	red := redact.New(redact.BuiltinPatterns())
	r := hc2Runner(red)
	reqs := []session.Request{
		{Model: "m", Messages: []session.Message{hc2Msg("user", "a"), hc2Msg("assistant", "b")}},
		{Model: "m", Messages: []session.Message{hc2Msg("user", "a"), hc2Msg("assistant", "b"), hc2Msg("user", "c")}},
		{Model: "m", Messages: []session.Message{hc2Msg("user", "a"), hc2Msg("assistant", "B"), hc2Msg("user", "c")}},
		{Model: "m", Messages: []session.Message{hc2Msg("user", "a")}},
		{Model: "m", Messages: []session.Message{hc2Msg("user", "a"), hc2Msg("user", "z")}},
	}
	var kept []string
	var stored []session.Request
	for _, q := range reqs {
		s, _ := hc2Prep(t, r, r.root, q)
		b, _ := json.Marshal(s)
		kept = append(kept, string(b))
		stored = append(stored, s)
	}
	for i, s := range stored {
		if b, _ := json.Marshal(s); string(b) != kept[i] {
			t.Errorf("stored request %d changed: %s, was %s", i, b, kept[i])
		}
	}
}

// Record a two-lane run in which one lane learns a secret another lane's system prompt holds, then
// replay it with a fresh redactor: every call matches; the recorded counts are the tokens stored in
// the parts each lane stored.
func TestHostileCounts2RecordThenReplay(t *testing.T) {
	tok := "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"
	harness := func(ctx context.Context, ac AgentContext) error {
		sys := "agent; key " + tok
		var msgs []session.Message
		for i := range 3 {
			msgs = append(msgs, hc2Msg("user", fmt.Sprintf("q%d %s", i, hc2Key(i))))
			if _, err := ac.Model(ctx, session.Request{Model: "m", System: sys, Messages: msgs}); err != nil {
				return err
			}
			msgs = append(msgs, hc2Msg("assistant", "ok"))
		}
		sub := ac.Go(ctx)
		if _, err := ac.Model(sub, session.Request{Model: "m", Messages: []session.Message{hc2Msg("user", "Bearer "+tok)}}); err != nil {
			return err
		}
		for i := 3; i < 5; i++ {
			msgs = append(msgs, hc2Msg("user", fmt.Sprintf("q%d", i)))
			if _, err := ac.Model(ctx, session.Request{Model: "m", System: sys, Messages: msgs}); err != nil {
				return err
			}
			msgs = append(msgs, hc2Msg("assistant", "ok"))
		}
		return nil
	}
	dir := filepath.Join(t.TempDir(), "rec")
	cfg := func() Config {
		return Config{Redactor: redact.New(redact.BuiltinPatterns()), Environ: func() []string { return nil }, Getenv: func(string) string { return "" }}
	}
	rec, err := Record(context.Background(), RecordOptions{Config: cfg(), Dir: dir, ID: "rec", Model: hc2Echo{}}, harness)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded counts %v", rec.Meta.Redaction.Counts)
	// Expected: lane 0's head: stored bare 3 times, then once redacted (1); its keys q0..q2 once each
	// (3); the other lane's bearer (1).
	total := 0
	for _, n := range rec.Meta.Redaction.Counts {
		total += n
	}
	if total != 5 {
		t.Errorf("recorded %d redactions, want 5", total)
	}
	for _, ev := range rec.Events {
		if ev.Request != nil {
			if b, _ := json.Marshal(ev.Request); bytes.Contains(b, []byte(tok)) && strings.Contains(string(b), "q4") {
				t.Errorf("a request after the secret was learned stored it bare: %s", b)
			}
		}
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(context.Background(), ReplayOptions{Config: cfg(), Session: s}, harness); err != nil {
		t.Fatalf("replay with a fresh redactor: %v", err)
	}
}

type hc2Echo struct{}

func (hc2Echo) Create(_ context.Context, req session.Request) (*session.Response, error) {
	return &session.Response{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`), StopReason: "end_turn"}, nil
}
