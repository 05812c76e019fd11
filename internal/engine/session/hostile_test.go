package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hostile and unusual stored forms: definitions the writer itself may produce in an order the reader
// must follow, and stored forms a careless tool or a hostile store may hand the reader.

// nestedJoins is a session whose second request adds two messages, each embedding the one before it
// verbatim: both become joins of the same line, the later one referring to the earlier one.
func nestedJoins(variant int) []Event {
	base := fmt.Sprintf(`{"v":%d,"text":%s}`, variant, mustJSON(strings.Repeat("a long shared body of text ", 12)))
	outer := `[` + base + `,1]`
	outermost := `[` + outer + `,2]`
	req := func(contents ...string) *Request {
		r := &Request{Model: "m"}
		for _, c := range contents {
			r.Messages = append(r.Messages, Message{Role: "user", Content: json.RawMessage(c)})
		}
		return r
	}
	return []Event{{Step: 0, Lane: "0", Kind: KindSessionStart},
		{Step: 1, Seq: 0, Lane: "0", CallSite: "plan", Kind: KindModelCall, Request: req(base), RequestHash: strings.Repeat("a", 64),
			Response: &Response{Content: json.RawMessage(`"ok"`), StopReason: "end_turn"}},
		{Step: 2, Seq: 1, Lane: "0", CallSite: "plan", Kind: KindModelCall, Request: req(base, outer, outermost), RequestHash: strings.Repeat("b", 64),
			Response: &Response{Content: json.RawMessage(`"ok"`), StopReason: "end_turn"}},
		{Step: 3, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)}}
}

// The reader learns a line's joins in the order they depend on each other, not in the order of their
// digests: a join that embeds another join of the same line reads back whichever digest sorts first.
func TestJoinsOfOneLineThatEmbedEachOtherReadBackInEitherDigestOrder(t *testing.T) {
	orders := map[bool]int{}
	for variant := range 16 {
		events := nestedJoins(variant)
		dir := t.TempDir()
		record(t, dir, events)
		in := newInterner(BlobThreshold, nil)
		probe := events[2]
		probe1 := events[1]
		if err := in.intern(&probe1); err != nil {
			t.Fatal(err)
		}
		if err := in.intern(&probe); err != nil {
			t.Fatal(err)
		}
		if len(probe.Joins) != 2 {
			t.Fatalf("variant %d: the second request defines %d joins, want 2: the test proves nothing", variant, len(probe.Joins))
		}
		for h, parts := range probe.Joins {
			if _, sibling := probe.Joins[parts[1].Ref]; sibling {
				orders[h < parts[1].Ref]++
			}
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatalf("variant %d: %v", variant, err)
		}
		sameEvents(t, events, s.Events)
	}
	if orders[true] == 0 || orders[false] == 0 {
		t.Fatalf("the variants cover only one digest order of a join and the join it embeds (%v): the test proves nothing", orders)
	}
}

// resolveStored runs stored events through an expander with no blobs, as the reader does.
func resolveStored(events []Event) error {
	x := NewExpander(mapBlobs{}, "events.jsonl")
	for i := range events {
		if err := x.Resolve(&events[i]); err != nil {
			return err
		}
	}
	return nil
}

type mapBlobs map[string][]byte

func (m mapBlobs) ReadBlob(h string) ([]byte, error) {
	if data, ok := m[h]; ok {
		return data, nil
	}
	return nil, fs.ErrNotExist
}

// A line's definitions that depend on each other are learnt in an order that follows them, in time
// linear in their number: a chain of 100,000 lists in one line in the worst order of digests, a list
// extending one that no line defines, and definitions that depend on each other in a cycle (which
// honest digests cannot make, so the cycle is forged by the keys alone) are each refused or read in
// one pass, never with a panic or a sweep per link.
func TestDefinitionsOfOneLineThatDependOnEachOtherAreLearntInLinearTimeOrRefused(t *testing.T) {
	content := `"x"`
	ch := digestOf([]byte(content))
	t.Run("a chain of 100,000 lists", func(t *testing.T) {
		const depth = 100_000
		lists := make(map[string]ListDef, depth)
		prev := ""
		for i := range depth {
			role := fmt.Sprintf("r%d", i)
			h := chainDigest(prev, role, ch)
			lists[h] = ListDef{Prev: prev, Items: []ListItem{{Role: role, Content: ch}}}
			prev = h
		}
		ev := Event{Step: 1, Defs: map[string]json.RawMessage{ch: json.RawMessage(content)}, Lists: lists,
			Refs: &Refs{Request: digestOf([]byte(`{"model":"m"}`)), Messages: prev}}
		ev.Defs[ev.Refs.Request] = json.RawMessage(`{"model":"m"}`)
		start := time.Now()
		events := []Event{ev}
		if err := resolveStored(events); err != nil {
			t.Fatal(err)
		}
		if n := len(events[0].Request.Messages); n != depth {
			t.Fatalf("the request has %d messages, want %d", n, depth)
		}
		// One pass takes well under a second; a sweep per link, some 5·10^9 steps, takes minutes.
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("learning a chain of %d lists took %v", depth, d)
		}
	})
	cases := map[string]struct {
		ev    Event
		field string
	}{
		"a list extending a list no line defines": {Event{Step: 1, Defs: map[string]json.RawMessage{ch: json.RawMessage(content)},
			Lists: map[string]ListDef{chainDigest(strings.Repeat("e", 64), "user", ch): {Prev: strings.Repeat("e", 64), Items: []ListItem{{Role: "user", Content: ch}}}}}, "lists"},
		"two lists extending each other": {Event{Step: 1, Defs: map[string]json.RawMessage{ch: json.RawMessage(content)},
			Lists: map[string]ListDef{strings.Repeat("a", 64): {Prev: strings.Repeat("b", 64), Items: []ListItem{{Role: "user", Content: ch}}},
				strings.Repeat("b", 64): {Prev: strings.Repeat("a", 64), Items: []ListItem{{Role: "user", Content: ch}}}}}, "lists"},
		"a list extending itself": {Event{Step: 1, Defs: map[string]json.RawMessage{ch: json.RawMessage(content)},
			Lists: map[string]ListDef{strings.Repeat("a", 64): {Prev: strings.Repeat("a", 64), Items: []ListItem{{Role: "user", Content: ch}}}}}, "lists"},
		"two joins embedding each other": {Event{Step: 1, Joins: map[string][]JoinPart{
			strings.Repeat("a", 64): {{Text: "["}, {Ref: strings.Repeat("b", 64)}, {Text: "]"}},
			strings.Repeat("b", 64): {{Text: "["}, {Ref: strings.Repeat("a", 64)}, {Text: "]"}}}}, "joins"},
		"a join embedding a join no line defines": {Event{Step: 1, Joins: map[string][]JoinPart{
			strings.Repeat("a", 64): {{Text: "["}, {Ref: strings.Repeat("b", 64)}, {Text: "]"}}}}, "joins"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := resolveStored([]Event{c.ev})
			var re *RefError
			if !errors.As(err, &re) || re.Field != c.field || re.Step != 1 {
				t.Fatalf("got %v, want a *RefError for %s at step 1", err, c.field)
			}
		})
	}
}

// Content the writer shares between lines reads back byte for byte whatever its text: invalid UTF-8,
// escaped lone surrogates, U+2028, HTML characters and NUL escapes, in a message repeated from turn
// to turn, a response's content, a tool's result and a stream's text (or is refused when written).
func TestSharedDefinitionsOfUnusualTextReadBackByteForByte(t *testing.T) {
	texts := map[string]string{
		"invalid UTF-8":      "\"caf\xe9 \xff\xfe " + strings.Repeat("pad ", 40) + "\"",
		"lone surrogates":    `"\ud800 and \udfff alone ` + strings.Repeat("pad ", 40) + `"`,
		"line separators":    "\"\u2028 and \u2029 " + strings.Repeat("pad ", 40) + "\"",
		"html and nul":       `"<b> & </b> \u0000 ` + strings.Repeat("pad ", 40) + `"`,
		"a split surrogate":  `"\ud83d` + strings.Repeat("pad ", 40) + `\ude00"`,
		"escaped everything": `"\u0061\u0062\/\b\f ` + strings.Repeat("pad ", 40) + `"`,
	}
	for name, text := range texts {
		t.Run(name, func(t *testing.T) {
			content := json.RawMessage(text)
			answer := json.RawMessage(`[{"type":"text","text":` + text + `}]`)
			var stream []Chunk
			stream = append(stream, Chunk{Data: json.RawMessage(`{"delta":{"text":` + text + `}}`)})
			msgs := []Message{{Role: "user", Content: content}}
			events := []Event{{Step: 0, Lane: "0", Kind: KindSessionStart},
				{Step: 1, Seq: 0, Lane: "0", CallSite: "plan", Kind: KindModelCall, Request: &Request{Model: "m", Messages: msgs},
					RequestHash: strings.Repeat("a", 64), Response: &Response{Content: answer, StopReason: "end_turn"}, Stream: stream},
				{Step: 2, Seq: 1, Lane: "0", CallSite: "read", Kind: KindToolCall, Name: "read", Args: json.RawMessage(`{}`), Result: content},
				{Step: 3, Seq: 2, Lane: "0", CallSite: "plan", Kind: KindModelCall,
					Request:     &Request{Model: "m", Messages: append(msgs, Message{Role: "assistant", Content: answer}, Message{Role: "user", Content: content})},
					RequestHash: strings.Repeat("b", 64), Response: &Response{Content: answer, StopReason: "end_turn"}},
				{Step: 4, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)}}
			dir := t.TempDir()
			w, err := Create(dir, Meta{ID: "s", FingerprintMode: "strict"}, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range events {
				if err := w.Append(ev); err != nil {
					if !strings.Contains(err.Error(), "step") || !strings.Contains(err.Error(), "byte") {
						t.Fatalf("refused without naming the field and byte: %v", err)
					}
					t.Logf("refused when written: %v", err)
					w.Abort()
					return
				}
			}
			if _, err := w.Close(nil); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatalf("the writer accepted it, the reader refuses it: %v", err)
			}
			sameEvents(t, events, s.Events)
		})
	}
}

// A stored stream's spans that do not fit the response or the chunks are refused naming
// streamText[i], whatever the lie: out of range both ways, 2^53 and past, out of order, overlapping,
// or cutting a character of the response in two (which would put back U+FFFD, not the recorded text).
func TestStreamSpansThatDoNotFitAreRefused(t *testing.T) {
	text := "héllo wörld, " + strings.Repeat("a streamed answer ", 4)
	resp := &Response{Content: json.RawMessage(`[{"type":"text","text":` + mustJSON(text) + `}]`)}
	stream := []Chunk{{Data: json.RawMessage(`{"t":""}`)}, {Data: json.RawMessage(`{"t":"","u":""}`)}}
	good := []TextSpan{{Chunk: 0, At: 5, Leaf: 1, From: 0, To: 6}, {Chunk: 1, At: 5, Leaf: 1, From: 6, To: 10}, {Chunk: 1, At: 12, Leaf: 1, From: 10, To: 12}}
	resolve := func(spans []TextSpan) error {
		ev := Event{Step: 4, Response: &Response{Content: resp.Content}, Stream: stream, StreamText: spans}
		return NewExpander(mapBlobs{}, "events.jsonl").unsplice(&ev)
	}
	if err := resolve(good); err != nil {
		t.Fatalf("the honest spans are refused: %v", err)
	}
	const big = 1<<53 + 1
	lies := map[string]func(s []TextSpan){
		"a chunk past the stream":            func(s []TextSpan) { s[2].Chunk = 2 },
		"a negative chunk":                   func(s []TextSpan) { s[0].Chunk = -1 },
		"a leaf past the response":           func(s []TextSpan) { s[1].Leaf = 2 },
		"a key of the response, not a value": func(s []TextSpan) { s[1].Leaf = -1 },
		"bytes past the text":                func(s []TextSpan) { s[2].To = len(text) + 1 },
		"bytes 2^53+1":                       func(s []TextSpan) { s[2].From, s[2].To = big, big },
		"from after to":                      func(s []TextSpan) { s[1].From, s[1].To = 9, 7 },
		"no empty string at the offset":      func(s []TextSpan) { s[0].At = 1 },
		"an offset 2^53+1":                   func(s []TextSpan) { s[0].At = big },
		"spans out of order":                 func(s []TextSpan) { s[1], s[2] = s[2], s[1] },
		"two spans at one offset":            func(s []TextSpan) { s[2].At = s[1].At },
		"a character cut in two":             func(s []TextSpan) { s[0].To, s[1].From = 2, 2 },
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			spans := append([]TextSpan(nil), good...)
			lie(spans)
			err := resolve(spans)
			var re *RefError
			if !errors.As(err, &re) || !strings.HasPrefix(re.Field, "streamText[") {
				t.Fatalf("got %v, want a *RefError naming streamText[i]", err)
			}
		})
	}
}

// The writer never commits a meta.json the reader refuses: a fork whose Close moves its fork step
// before the steps it stored as its parent's lines (so inheritedSteps would claim steps past the
// fork) fails to close instead of committing a session that never opens.
func TestAForkNeverCommitsInheritedStepsItsMetaRefuses(t *testing.T) {
	parentDir := t.TempDir()
	events := conversation(3)
	record(t, parentDir, events)
	parent, err := Open(parentDir)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(5)
	w, err := Create(t.TempDir(), Meta{ID: "fork", Parent: "parent", ForkedAtStep: &at, FingerprintMode: "strict"}, WriterOptions{Parent: parent.Events})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range parent.Events[:at] {
		if ev.Kind.IsBoundary() {
			ev.Provenance = ProvenanceRecorded
		}
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := w.Close(func(m *Meta) { early := int64(2); m.ForkedAtStep = &early })
	if err == nil {
		if _, oerr := Open(w.Dir()); oerr != nil {
			t.Fatalf("Close committed inheritedSteps %v with forkedAtStep 2, which the reader refuses: %v", meta.InheritedSteps, oerr)
		}
		t.Fatalf("Close committed inheritedSteps %v with forkedAtStep 2", meta.InheritedSteps)
	}
	if _, serr := os.Stat(filepath.Join(w.Dir(), MetaFile)); serr == nil {
		t.Fatalf("Close failed (%v) but left a meta.json", err)
	}
}

// A line that fails after some of its content was defined (here its large message cannot be stored
// as a blob) leaves nothing defined: the same event appended again once the fault is gone defines
// its content again, and the log opens. Kept defined, the retried line would refer to content no
// line of the log holds.
func TestAnAppendThatFailsLeavesNothingDefinedForTheNextLine(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Meta{ID: "s", FingerprintMode: "strict"}, WriterOptions{BlobThreshold: 512})
	if err != nil {
		t.Fatal(err)
	}
	small := json.RawMessage(mustJSON("a new question, " + strings.Repeat("small ", 30)))
	large := json.RawMessage(mustJSON(strings.Repeat("a large pasted file ", 60)))
	events := []Event{{Step: 0, Lane: "0", Kind: KindSessionStart},
		{Step: 1, Seq: 0, Lane: "0", CallSite: "plan", Kind: KindModelCall, RequestHash: strings.Repeat("a", 64),
			Request:  &Request{Model: "m", Messages: []Message{{Role: "user", Content: small}, {Role: "user", Content: large}}},
			Response: &Response{Content: json.RawMessage(`"ok"`), StopReason: "end_turn"}},
		{Step: 2, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)}}
	if err := w.Append(events[0]); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(dir, BlobsDir)
	if err := os.Rename(blobs, blobs+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blobs, nil, 0o644); err != nil { // a file where the directory was: no blob can be stored
		t.Fatal(err)
	}
	if err := w.Append(events[1]); err == nil {
		t.Fatal("the append stored a blob under a file: the test proves nothing")
	}
	if err := os.Remove(blobs); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(blobs+".away", blobs); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events[1:] {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("the log written after a failed append does not open: %v", err)
	}
	sameEvents(t, events, s.Events)
}

// meta.json's inheritedSteps may only claim steps of a fork before its fork step, in increasing,
// disjoint ranges: every other claim is refused naming the field.
func TestInheritedStepsThatClaimTooMuchAreRefused(t *testing.T) {
	base := `{"id":"f","parent":"p","forkedAtStep":%s,"createdAt":1,"agentRewindVersion":"v","schemaVersion":3,"fingerprintMode":"strict","redaction":{"enabled":false},"eventsHash":"` + strings.Repeat("a", 64) + `","events":3,"inheritedSteps":%s}`
	if _, err := DecodeMeta([]byte(fmt.Sprintf(base, "10", `[{"from":1,"to":3},{"from":5,"to":9}]`)), "meta.json"); err != nil {
		t.Fatalf("honest inheritedSteps refused: %v", err)
	}
	lies := map[string][2]string{
		"a negative step":          {"10", `[{"from":-1,"to":3}]`},
		"step 0 (session_start)":   {"10", `[{"from":0,"to":3}]`},
		"the fork step itself":     {"10", `[{"from":1,"to":10}]`},
		"past the fork step":       {"10", `[{"from":11,"to":12}]`},
		"2^53+1":                   {"10", `[{"from":9007199254740993,"to":9007199254740993}]`},
		"past 2^63":                {"10", `[{"from":1,"to":9223372036854775808}]`},
		"overlapping ranges":       {"10", `[{"from":1,"to":5},{"from":5,"to":6}]`},
		"ranges out of order":      {"10", `[{"from":5,"to":6},{"from":1,"to":2}]`},
		"a range ending before it": {"10", `[{"from":4,"to":3}]`},
		"no fork step":             {"null", `[{"from":1,"to":2}]`},
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeMeta([]byte(fmt.Sprintf(base, lie[0], lie[1])), "meta.json")
			if err == nil || !strings.Contains(err.Error(), "inheritedSteps") && !strings.Contains(err.Error(), "forkedAtStep") {
				t.Fatalf("got %v, want an error naming inheritedSteps", err)
			}
		})
	}
}
