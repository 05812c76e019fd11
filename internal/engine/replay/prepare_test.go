package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// prepareFromScratch is what prepareRequest must return, written without the memo: the request
// without its messages redacted, then each message redacted on its own in order, and the fingerprint
// of the whole stored request; all of it again while a pass teaches the redactor a secret.
func prepareFromScratch(cfg Config, req session.Request) (session.Request, string, error) {
	if err := checkRequestText(req); err != nil {
		return req, "", err
	}
	for pass := 1; ; pass++ {
		learned := cfg.Redactor.Generation()
		stored, fp, err := preparePass(cfg, req)
		if err != nil || cfg.Redactor.Generation() == learned || pass == maxPreparePasses {
			return stored, fp, err
		}
	}
}

func preparePass(cfg Config, req session.Request) (session.Request, string, error) {
	head := req
	head.Messages = nil
	doc, err := json.Marshal(head)
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
	if req.Messages != nil {
		stored.Messages = []session.Message{}
	}
	for _, m := range req.Messages {
		doc, err := json.Marshal(m)
		if err != nil {
			return req, "", err
		}
		red, err := cfg.Redactor.JSON(doc)
		if err != nil {
			return req, "", err
		}
		var out session.Message
		if err := json.Unmarshal(red, &out); err != nil {
			return req, "", err
		}
		stored.Messages = append(stored.Messages, out)
	}
	fp, err := fingerprint.Of(cfg.Codec.StripVolatile(stored), fingerprint.Options{
		Mode: cfg.FingerprintMode, VolatilePaths: cfg.Codec.VolatilePaths()})
	return stored, fp, err
}

// conversation generates the requests of agents whose conversations mostly grow, and sometimes
// change an earlier message, shrink or start over, holding what makes preparing a request hard:
// secrets (found by a pattern, and later bare, so they are redacted only once learned), text that
// NFC changes, JSON escapes, numbers past 2^53, a parameter set that changes, and now and then a
// byte that is not UTF-8.
type conversation struct {
	rnd     *rand.Rand
	msgs    []session.Message
	secrets []string
	system  string
	params  map[string]json.RawMessage
}

func (c *conversation) text() string {
	parts := []string{"plain words", "caf\u00e9", "cafe\u0301", `a\/b`, `\u00e9t\u00e9`, `tab\there`, "日本語",
		"12345678901234567890123", "1.50"}
	var b strings.Builder
	for range 1 + c.rnd.IntN(4) {
		switch p := c.rnd.IntN(40); {
		case p == 0 && c.rnd.IntN(3) == 0: // every secret learned costs every later redaction
			s := fmt.Sprintf("tok%034d", c.rnd.Int64())
			c.secrets = append(c.secrets, s)
			b.WriteString("Authorization: Bearer " + s + " ")
		case p <= 3 && len(c.secrets) > 0:
			b.WriteString("bare " + c.secrets[c.rnd.IntN(len(c.secrets))] + " ")
		case p == 4:
			b.WriteString(fmt.Sprintf("sk-ant-api03-%040d ", c.rnd.Int64()))
		default:
			b.WriteString(parts[c.rnd.IntN(len(parts))] + " ")
		}
	}
	return b.String()
}

func (c *conversation) message() session.Message {
	role := []string{"user", "assistant"}[c.rnd.IntN(2)]
	var content string
	switch c.rnd.IntN(4) {
	case 0:
		content = `"` + c.text() + `"`
	case 1:
		content = fmt.Sprintf(`[{"type":"text","text":"%s"},{"type":"tool_use","id":"t%d","input":{"n":%d,"big":123456789012345678901}}]`,
			c.text(), c.rnd.IntN(99), c.rnd.IntN(9))
	case 2:
		inner, _ := json.Marshal(map[string]string{"body": c.text()})
		quoted, _ := json.Marshal(string(inner))
		content = fmt.Sprintf(`[{"type":"tool_result","tool_use_id":"t1","content":%s}]`, quoted)
	default:
		content = fmt.Sprintf(`{ "type" : "text" , "text" : "%s" , "x" : 1.50 }`, c.text())
	}
	if c.rnd.IntN(150) == 0 {
		content = `"bad ` + "\xff" + ` byte"`
	}
	return session.Message{Role: role, Content: json.RawMessage(content)}
}

// next is the conversation's next request.
func (c *conversation) next() session.Request {
	switch p := c.rnd.IntN(20); {
	case p == 0:
		c.msgs = nil
	case p == 1 && len(c.msgs) > 0:
		c.msgs[c.rnd.IntN(len(c.msgs))] = c.message()
	case p == 2 && len(c.msgs) > 0:
		c.msgs = c.msgs[:c.rnd.IntN(len(c.msgs))]
	case p == 3:
		c.system = c.text()
	case p == 4:
		c.params["temperature"] = json.RawMessage(fmt.Sprint(c.rnd.IntN(10)))
	case p == 5:
		c.params["stream"] = json.RawMessage(`true`)
	}
	for range 1 + c.rnd.IntN(3) {
		c.msgs = append(c.msgs, c.message())
	}
	// The caller builds each request anew, as a proxy decoding a body does: a copy of the list and
	// of every content.
	msgs := make([]session.Message, len(c.msgs))
	for i, m := range c.msgs {
		msgs[i] = session.Message{Role: m.Role, Content: append(json.RawMessage(nil), m.Content...)}
	}
	params := map[string]json.RawMessage{}
	for k, v := range c.params {
		params[k] = v
	}
	return session.Request{Model: "m", System: c.system, Messages: msgs, Params: params}
}

// pathsCodec is the generic codec with other structural paths.
type pathsCodec []string

func (pathsCodec) Name() string                                      { return "paths" }
func (pathsCodec) StripVolatile(req session.Request) session.Request { return req }
func (c pathsCodec) VolatilePaths() []string                         { return c }

// messagesCodec is a codec whose StripVolatile rewrites the messages, which the memo cannot resume.
type messagesCodec struct{ GenericCodec }

func (messagesCodec) StripVolatile(req session.Request) session.Request {
	req.Messages = append([]session.Message(nil), req.Messages...)
	return req
}

// TestPreparingWithTheMemoEqualsPreparingFromScratch: through growing, edited, shrinking and
// restarted conversations in interleaved lanes, under every fingerprint setup, prepareRequest
// returns exactly the stored request, fingerprint and error of prepareFromScratch.
func TestPreparingWithTheMemoEqualsPreparingFromScratch(t *testing.T) {
	userPatterns := func() *redact.Redactor {
		return redact.New(append(redact.BuiltinPatterns(), redact.Pattern{Name: "cafe", Regexp: regexp.MustCompile(`caf\x{e9} plain`)}))
	}
	setups := map[string]struct {
		cfg      Config
		redactor func() *redact.Redactor
	}{
		"strict":              {},
		"structural":          {cfg: Config{FingerprintMode: fingerprint.Structural}},
		"structural-messages": {cfg: Config{FingerprintMode: fingerprint.Structural, Codec: pathsCodec{"messages.content"}}},
		"codec-rewrites-msgs": {cfg: Config{Codec: messagesCodec{}}},
		"user-pattern":        {redactor: userPatterns},
	}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(3) {
				memoCfg, scratchCfg := setup.cfg, setup.cfg
				if setup.redactor != nil { // each side learns on its own redactor
					memoCfg.Redactor, scratchCfg.Redactor = setup.redactor(), setup.redactor()
				}
				r := newRunner(memoCfg)
				scratch := scratchCfg.withDefaults()
				lanes := []*lane{newLane("0"), newLane("0.1"), newLane("0.2")}
				convs := make([]*conversation, len(lanes))
				for i := range convs {
					convs[i] = &conversation{rnd: rand.New(rand.NewPCG(seed, uint64(i))), params: map[string]json.RawMessage{"max_tokens": json.RawMessage(`100`)}}
				}
				pick := rand.New(rand.NewPCG(seed, 99))
				var scratchRedacted int64
				var returned, wantReturned []session.Request
				for step := range 150 {
					i := pick.IntN(len(lanes))
					req := convs[i].next()
					got, gotFP, gotErr := r.prepareRequest(call{lane: lanes[i]}, req)
					want, wantFP, wantErr := prepareFromScratch(scratch, req)
					scratchRedacted += int64(len(req.Messages))
					if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
						t.Fatalf("seed %d step %d: error %v, from scratch %v", seed, step, gotErr, wantErr)
					}
					if gotErr != nil {
						continue
					}
					if gotFP != wantFP {
						t.Fatalf("seed %d step %d (lane %s, %d messages): fingerprint %s, from scratch %s", seed, step, lanes[i].id, len(req.Messages), gotFP, wantFP)
					}
					if !reflect.DeepEqual(got, want) {
						g, _ := json.Marshal(got)
						w, _ := json.Marshal(want)
						t.Fatalf("seed %d step %d: stored\n%s\nfrom scratch\n%s", seed, step, g, w)
					}
					returned = append(returned, got)
					wantReturned = append(wantReturned, want)
				}
				// What the runner returned is held by events: a later request must not change it.
				for i := range returned {
					if !reflect.DeepEqual(returned[i], wantReturned[i]) {
						t.Fatalf("seed %d: the request returned %d requests ago changed afterwards", seed, len(returned)-i)
					}
				}
				if r.cfg.Redactor.Generation() == 0 {
					t.Fatal("no secret was ever learned: the conversations do not exercise the memo's generation check")
				}
				if redacted, sent := r.messagesRedacted.Load(), scratchRedacted; redacted*2 > sent {
					t.Fatalf("the memo redacted %d messages of the %d sent: it is hardly used", redacted, sent)
				}
			}
		})
	}
}

// TestALongConversationRedactsEachMessageOnce: over 1,000 requests that each repeat the conversation
// so far and add two messages, the runner redacts and hashes 2,000 messages, not the 1,001,000 the
// requests carry.
func TestALongConversationRedactsEachMessageOnce(t *testing.T) {
	r := newRunner(Config{})
	l := newLane("0")
	var msgs []session.Message
	carried := 0
	for turn := range 1000 {
		msgs = append(msgs,
			session.Message{Role: "user", Content: json.RawMessage(fmt.Sprintf(`"question %d"`, turn))},
			session.Message{Role: "assistant", Content: json.RawMessage(fmt.Sprintf(`[{"type":"text","text":"answer %d"}]`, turn))})
		req := session.Request{Model: "m", Messages: append([]session.Message(nil), msgs...)}
		carried += len(req.Messages)
		stored, fp, err := r.prepareRequest(call{lane: l}, req)
		if err != nil {
			t.Fatal(err)
		}
		if turn%97 == 0 { // the resumed fingerprint is the whole request's
			if want, err := fingerprint.Of(stored, fingerprint.Options{}); err != nil || fp != want {
				t.Fatalf("turn %d: fingerprint %s, of the whole request %s (%v)", turn, fp, want, err)
			}
		}
	}
	if got := r.messagesRedacted.Load(); got != int64(len(msgs)) {
		t.Fatalf("redacted %d messages for a conversation of %d (the requests carried %d)", got, len(msgs), carried)
	}
}

// TestARequestPreparedAgainCountsItsRedactionsOnce: a request whose message teaches the redactor a
// secret is prepared a second time (the secret may stand bare in a part redacted before it), and the
// counts in meta.json and the AgentSession's status are of the tokens stored, not of both passes.
func TestARequestPreparedAgainCountsItsRedactionsOnce(t *testing.T) {
	cfg := Config{Redactor: redact.New(redact.BuiltinPatterns())}
	r := newRunner(cfg)
	req := session.Request{Model: "m", System: "use " + bearerSecret,
		Messages: []session.Message{{Role: "user", Content: []byte(`"Authorization: Bearer ` + bearerSecret + `"`)}}}
	stored, _, err := r.prepareRequest(call{lane: newLane("x")}, req)
	if err != nil {
		t.Fatal(err)
	}
	if doc, _ := json.Marshal(stored); bytes.Contains(doc, []byte(bearerSecret)) {
		t.Fatalf("the secret is stored: %s", doc)
	}
	if got := cfg.Redactor.Counts(); got["bearer-token"] != 2 || len(got) != 1 {
		t.Fatalf("counts %v, want bearer-token 2 (the system prompt and the message)", got)
	}
}

// TestAStoredRequestOwnsItsParams: requests with the same head share its redaction and canonical form
// through the lane's memo, but each stored request has params of its own. A caller writing into one
// request's params — map or value bytes, in place or by append — changes no other stored request, nor
// what the lane stores and fingerprints next.
func TestAStoredRequestOwnsItsParams(t *testing.T) {
	r := newRunner(Config{})
	scratch := Config{}.withDefaults()
	ln := newLane("0")
	params := func() map[string]json.RawMessage {
		return map[string]json.RawMessage{"tools": json.RawMessage(`[{"name":"aa"}]`), "max_tokens": json.RawMessage(`100`)}
	}
	var msgs []session.Message
	next := func() session.Request {
		msgs = append(msgs, session.Message{Role: "user", Content: json.RawMessage(fmt.Sprintf(`"turn %d"`, len(msgs)))})
		return session.Request{Model: "m", System: "s", Messages: slices.Clone(msgs), Params: params()}
	}
	var stored []session.Request
	for range 3 {
		got, _, err := r.prepareRequest(call{lane: ln}, next())
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, got)
	}
	copy(stored[0].Params["tools"], `[{"name":"ZZ"}]`)
	_ = append(stored[0].Params["max_tokens"], '9', '9', '9', '9', '9', '9', '9', '9')
	stored[0].Params["extra"] = json.RawMessage(`true`)
	for i, s := range stored[1:] {
		if string(s.Params["tools"]) != `[{"name":"aa"}]` || string(s.Params["max_tokens"]) != `100` || s.Params["extra"] != nil {
			t.Errorf("stored request %d after writes into the first: %s", i+1, s.Params)
		}
	}
	req := next()
	got, fp, err := r.prepareRequest(call{lane: ln}, req)
	if err != nil {
		t.Fatal(err)
	}
	want, wantFP, _ := prepareFromScratch(scratch, req)
	if fp != wantFP || !reflect.DeepEqual(got, want) {
		t.Errorf("the next request after the writes: fingerprint %s, stored %s; from scratch %s, %s", fp, got.Params, wantFP, want.Params)
	}
}
