package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Memory in proportion to the log: a message list that extends an older list (not the latest) is a
// copy of it when read, since each logical event owns a contiguous Request.Messages, and a join may
// embed the same definition many times. The reader refuses a log whose putting back would cost more
// than its budget; the writer never writes one.

// branches are requests that each add one message of their own to the same long conversation: every
// request after the second extends a list older than the latest.
func branches(base, n int) []Event {
	conversation := make([]Message, base)
	for i := range conversation {
		conversation[i] = Message{Role: "user", Content: json.RawMessage(fmt.Sprintf(`"message %d"`, i))}
	}
	events := []Event{{Step: 0, Lane: "0", Kind: KindSessionStart}}
	for i := range n {
		msgs := append(conversation[:base:base], Message{Role: "user", Content: json.RawMessage(fmt.Sprintf(`"branch %d"`, i))})
		events = append(events, Event{Step: int64(i + 1), Seq: int64(i), Lane: "0", CallSite: "plan", Kind: KindModelCall,
			Request: &Request{Model: "m", Messages: msgs}, RequestHash: fmt.Sprintf("%064x", i),
			Response: &Response{Content: json.RawMessage(`"ok"`), StopReason: "end_turn"}})
	}
	return append(events, Event{Step: int64(n + 1), Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)})
}

// hostileBranches is the stored form of branches(base, n) that makes every branch a copy: the base
// list defined once, then each branch extending it by one message (what a writer without a budget
// writes), and the bytes of its lines.
func hostileBranches(base, n int) (stored []Event, logBytes int) {
	defs := map[string]json.RawMessage{}
	items := make([]ListItem, base)
	chain := ""
	for i := range items {
		data := []byte(fmt.Sprintf(`"message %d"`, i))
		h := digestOf(data)
		defs[h], items[i] = data, ListItem{Role: "user", Content: h}
		chain = chainDigest(chain, "user", h)
	}
	request := []byte(`{"model":"m","messages":[]}`)
	defs[digestOf(request)] = request
	baseChain := chain
	stored = []Event{{Step: 0, Lane: "0", Kind: KindSessionStart, Defs: defs, Lists: map[string]ListDef{baseChain: {Items: items}}}}
	for i := range n {
		data := []byte(fmt.Sprintf(`"branch %d"`, i))
		h := digestOf(data)
		tip := chainDigest(baseChain, "user", h)
		stored = append(stored, Event{Step: int64(i + 1), Lane: "0", Kind: KindModelCall,
			Defs:  map[string]json.RawMessage{h: data},
			Lists: map[string]ListDef{tip: {Prev: baseChain, Items: []ListItem{{Role: "user", Content: h}}}},
			Refs:  &Refs{Request: digestOf(request), Messages: tip}})
	}
	for _, ev := range stored {
		logBytes += len(mustJSON(ev)) + 1
	}
	return stored, logBytes
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The hostile form of 2,000 branches off a 2,000-message conversation (1.2 MB of lines) made the
// reader copy the conversation 2,000 times: 168 MB, 142 times the log and growing with the square.
// It is refused, naming the line's step and field, before its memory outgrows its budget.
func TestALogOfBranchesOffAnOlderListIsRefusedBeforeItsMemoryOutgrowsTheLog(t *testing.T) {
	stored, logBytes := hostileBranches(2000, 2000)
	var err error
	alloc := allocated(func() { err = resolveStored(stored) })
	var re *RefError
	if !errors.As(err, &re) || re.Field != "lists" || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("reading 2,000 branches off a 2,000-message list: got %v, want a *RefError on lists naming the budget", err)
	}
	if re.Step < 2 || re.Step > 2000 || !strings.Contains(err.Error(), fmt.Sprintf("line %d:", re.Step+1)) {
		t.Fatalf("refused at step %d (%v), want a branch's step and its line", re.Step, err)
	}
	if limit := uint64(expansionPerByte*logBytes + expansionFree + 16<<20); alloc > limit {
		t.Fatalf("the reader allocated %d bytes (%.0fx the %d-byte log) before refusing it, want at most %d", alloc, float64(alloc)/float64(logBytes), logBytes, limit)
	}
	t.Logf("refused at step %d (%v) after allocating %.1fx the %d-byte log", re.Step, err, float64(alloc)/float64(logBytes), logBytes)
}

// The writer given the same 2,000 branches writes a log that opens and reads back every request,
// in memory proportional to the log: where a branch would cost more than the budget allows, it
// lists the branch's messages again instead of extending the older list.
func TestBranchesOffAnOlderListAreWrittenSoTheyReadInMemoryProportionalToTheLog(t *testing.T) {
	events := branches(2000, 2000)
	dir := t.TempDir()
	record(t, dir, events)
	fi, err := os.Stat(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var s *Session
	alloc := allocated(func() { s, err = Open(dir) })
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		if ev.Request == nil {
			continue
		}
		got := s.Events[i].Request.Messages
		if len(got) != 2001 || string(got[2000].Content) != fmt.Sprintf(`"branch %d"`, i-1) || string(got[1999].Content) != `"message 1999"` {
			t.Fatalf("step %d reads back %d messages ending %s, want 2,001 ending with its branch", ev.Step, len(got), got[len(got)-1].Content)
		}
	}
	ratio := float64(alloc) / float64(fi.Size())
	if ratio > expansionPerByte+8 {
		t.Fatalf("opening the %d-byte log allocated %d bytes, %.0fx it, want at most %dx", fi.Size(), alloc, ratio, expansionPerByte+8)
	}
	t.Logf("log %d bytes (%.0f per branch), Open allocated %.1fx it", fi.Size(), float64(fi.Size())/2000, ratio)
}

// A join may embed definitions any number of times: eighteen lines each doubling the one before make
// a definition of 17 MB out of a log of 2 KB, and twenty more would make 18 TB. The reader refuses the line that passes its
// budget instead of building it.
func TestJoinsThatDoubleLineAfterLineAreRefused(t *testing.T) {
	data := []byte(`"` + strings.Repeat("x", 64) + `"`)
	prev := digestOf(data)
	stored := []Event{{Step: 0, Lane: "0", Kind: KindSessionStart, Defs: map[string]json.RawMessage{prev: data}}}
	for i := 1; i <= 18; i++ {
		data = []byte("[" + string(data) + "," + string(data) + "]")
		h := digestOf(data)
		stored = append(stored, Event{Step: int64(i), Lane: "0", Kind: KindNote,
			Joins: map[string][]JoinPart{h: {{Text: "["}, {Ref: prev}, {Text: ","}, {Ref: prev}, {Text: "]"}}}})
		prev = h
	}
	var err error
	alloc := allocated(func() { err = resolveStored(stored) })
	var re *RefError
	if !errors.As(err, &re) || re.Field != "joins" || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("reading joins that double: got %v, want a *RefError on joins naming the budget", err)
	}
	if alloc > 4*expansionFree {
		t.Fatalf("the reader allocated %d bytes before refusing doubling joins, want at most %d", alloc, 4*expansionFree)
	}
}

// sideCalls is an honest run that branches every turn: each turn's request adds an answer of 800
// bytes and a tool result of 1 KiB to the conversation, and a side request (a summary, a check)
// asks about the conversation with one message of its own, so the next turn extends a list the side
// request extended already: a copy when read.
func sideCalls(turns int) []Event {
	var conversation []Message
	events := []Event{{Step: 0, Lane: "0", Kind: KindSessionStart}}
	call := func(msgs []Message) {
		n := int64(len(events))
		events = append(events, Event{Step: n, Seq: n - 1, Lane: "0", CallSite: "plan", Kind: KindModelCall,
			Request: &Request{Model: "m", Messages: msgs}, RequestHash: fmt.Sprintf("%064x", n),
			Response: &Response{Content: json.RawMessage(`"ok"`), StopReason: "end_turn"}})
	}
	for turn := range turns {
		conversation = append(conversation,
			Message{Role: "assistant", Content: json.RawMessage(mustJSON(fmt.Sprintf("answer %d ", turn) + strings.Repeat("a", 800)))},
			Message{Role: "user", Content: json.RawMessage(mustJSON(fmt.Sprintf("result %d ", turn) + strings.Repeat("r", 1024)))})
		call(slices.Clip(conversation))
		call(append(slices.Clip(conversation), Message{Role: "user", Content: json.RawMessage(`"summarize the run so far"`)}))
	}
	n := int64(len(events))
	return append(events, Event{Step: n, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)})
}

// An honest 1,000-turn run that branches every turn (2,000 requests, the longest of 2,001 messages)
// is written as before, every turn extending a list, and reads back: its copies, 40 MB, take a
// quarter of the budget its 2.4 MB of definitions give it. Copies grow with the square of the turns
// and the budget with the turns, so a run of this shape reaches it at about 3,900 turns; from there
// the writer lists the conversation again about once every hundred turns, and the log still reads.
func TestAnHonestRunThatBranchesEveryTurnReadsWithinTheBudget(t *testing.T) {
	events := sideCalls(1000)
	dir := t.TempDir()
	record(t, dir, events)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		if ev.Request != nil && !slices.EqualFunc(ev.Request.Messages, s.Events[i].Request.Messages, func(a, b Message) bool {
			return a.Role == b.Role && string(a.Content) == string(b.Content)
		}) {
			t.Fatalf("step %d reads back other messages than it recorded", ev.Step)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	relisted := 0
	x := NewExpander(mapBlobs{}, EventsFile)
	for i, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		var stored Event
		if err := json.Unmarshal(line, &stored); err != nil {
			t.Fatal(err)
		}
		if err := x.Resolve(&stored); err != nil {
			t.Fatal(err)
		}
		for _, l := range stored.Lists {
			if l.Prev == "" && i > 1 {
				relisted++
			}
		}
	}
	if relisted != 0 {
		t.Fatalf("the writer listed a conversation again %d times in a run whose copies the budget covers", relisted)
	}
	b := x.budget
	t.Logf("log %d bytes, no conversation listed again; copies %d bytes, %.0f%% of the budget (%d bytes of definitions)",
		len(raw), b.spent, 100*float64(b.spent)/float64(expansionPerByte*b.read+expansionFree), b.read)
}

// A join costs the reader its whole bytes for the few it stores, so the writer stores a join's bytes
// plainly when the reader's budget would not cover it. Honest lines earn far more than a join up to
// the blob threshold costs, so the budget is brought to its end by hand, on both sides, before the
// line whose second message embeds the first and third the second: the second is stored plainly
// (nothing of the line has paid for it yet), and its bytes then pay for the third as a join.
func TestAJoinTheReaderCouldNotAffordIsStoredPlainly(t *testing.T) {
	events := nestedJoins(0)
	outer := events[2].Request.Messages[1].Content
	outermost := events[2].Request.Messages[2].Content
	in := newInterner(BlobThreshold, nil)
	x := NewExpander(mapBlobs{}, EventsFile)
	for i, ev := range events {
		if i == 2 {
			in.budget.spent = expansionPerByte*in.budget.read + expansionFree
			x.budget.spent = in.budget.spent
		}
		if err := in.intern(&ev); err != nil {
			t.Fatal(err)
		}
		if i == 2 && (ev.Defs[digestOf(outer)] == nil || ev.Joins[digestOf(outermost)] == nil || len(ev.Joins) != 1) {
			t.Fatalf("the writer out of budget stored joins %v and definitions %v, want the second message plainly and the third as a join", slices.Collect(maps.Keys(ev.Joins)), slices.Collect(maps.Keys(ev.Defs)))
		}
		if err := x.Resolve(&ev); err != nil {
			t.Fatalf("step %d: the reader refuses what the writer wrote: %v", ev.Step, err)
		}
	}
	if in.budget != x.budget {
		t.Fatalf("the writer's account %+v and the reader's %+v differ", in.budget, x.budget)
	}
}
