package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// conversation returns a session of turns model calls whose requests carry the whole conversation so
// far (a system prompt and a tool list too), each followed by a tool call, framed by the markers.
func conversation(turns int) []Event {
	system := "You are a careful agent. " + strings.Repeat("Keep every change small and tested. ", 8)
	tools := json.RawMessage(`[{"name":"read_file","description":"` + strings.Repeat("reads a file of the workspace ", 6) + `"}]`)
	events := []Event{{Step: 0, Lane: "0", Kind: KindSessionStart}}
	var msgs []Message
	step := int64(1)
	for turn := range turns {
		msgs = append(msgs, Message{Role: "user", Content: json.RawMessage(mustJSON(fmt.Sprintf("turn %d: %s", turn, strings.Repeat("what next? ", 20))))})
		answer := json.RawMessage(`[{"type":"text","text":` + mustJSON(fmt.Sprintf("answer %d: %s", turn, strings.Repeat("I will read <main.go> & test it. ", 12))) + `}]`)
		events = append(events, Event{Step: step, Seq: step - 1, Lane: "0", CallSite: "plan", Kind: KindModelCall, Provider: "anthropic",
			Request: &Request{Model: "m", System: system, Messages: append([]Message(nil), msgs...),
				Params: map[string]json.RawMessage{"max_tokens": json.RawMessage(`1024`), "tools": tools}},
			RequestHash: fmt.Sprintf("%064x", step), Response: &Response{Content: answer, StopReason: "tool_use"}})
		step++
		result := json.RawMessage(mustJSON(fmt.Sprintf("package main // file %d", turn)))
		events = append(events, Event{Step: step, Seq: step - 1, Lane: "0", CallSite: "read", Kind: KindToolCall, Name: "read_file",
			Args: json.RawMessage(`{"path":"main.go"}`), Result: result})
		step++
		msgs = append(msgs, Message{Role: "assistant", Content: answer}, Message{Role: "user", Content: result})
	}
	return append(events, Event{Step: step, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)})
}

// logical is what the reader must return for events written by a writer: the same events with the
// schema version and default author the writer fills in.
func logical(events []Event) []Event {
	out := make([]Event, len(events))
	for i, ev := range events {
		ev.SchemaVersion = CurrentSchemaVersion
		if ev.Author == "" {
			ev.Author = DefaultAuthor(ev.Kind)
		}
		out[i] = ev
	}
	return out
}

// sameEvents fails t unless read holds the events written, apart from the blob references the reader
// keeps (Blobs, DefBlobs). It compares encodings, which cmp.Diff is too slow for at this size, and
// shows cmp.Diff only when they differ.
func sameEvents(t *testing.T, written, read []Event) {
	t.Helper()
	strip := func(events []Event) []byte {
		out := make([]Event, len(events))
		for i, ev := range events {
			ev.Blobs, ev.DefBlobs = nil, nil
			out[i] = ev
		}
		data, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if w, r := strip(logical(written)), strip(read); !bytes.Equal(w, r) {
		var a, b []any
		_ = json.Unmarshal(w, &a)
		_ = json.Unmarshal(r, &b)
		t.Fatalf("the events read back differ from the ones written (-written +read):\n%s", cmp.Diff(a, b))
	}
}

func TestEachMessageIsStoredOnceAndReadsBackTheSame(t *testing.T) {
	dir := t.TempDir()
	events := conversation(30)
	record(t, dir, events)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, events, s.Events)
	raw, err := os.ReadFile(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	// Every question and answer of the last request, the system prompt and the tool list are in the
	// log once, though the requests carry them 30, 29, ... 1 times; an answer is stored once for its
	// response and the assistant message that repeats it. (A tool's result is kept on its tool call
	// and as the message that hands it back: twice.)
	last := events[len(events)-3].Request
	pieces := []string{mustJSON(last.System)}
	for i, m := range last.Messages {
		if i%3 != 2 { // question, answer, result, question...
			pieces = append(pieces, string(m.Content))
		}
	}
	pieces = append(pieces, string(last.Params["tools"]))
	for _, p := range pieces {
		enc, _ := json.Marshal(json.RawMessage(p)) // the log holds the encoding json.Marshal writes
		if n := bytes.Count(raw, enc); n != 1 {
			t.Errorf("%.60s... is stored %d times, want once", p, n)
		}
	}
}

func TestAHistoryRewrittenMidRunStillReadsBack(t *testing.T) {
	// An agent that compacts its history sends a list that is not an extension of the previous one,
	// then extends the compacted one; a second lane interleaves its own conversation.
	events := conversation(6)
	compacted := *events[len(events)-3].Request
	compacted.Messages = append([]Message{{Role: "user", Content: json.RawMessage(`"summary of the run so far"`)}}, compacted.Messages[4:]...)
	extended := compacted
	extended.Messages = append(append([]Message(nil), compacted.Messages...), Message{Role: "user", Content: json.RawMessage(`"go on"`)})
	other := Request{Model: "m", Messages: []Message{{Role: "user", Content: json.RawMessage(`"a side question"`)}}}
	end := events[len(events)-1]
	events = events[:len(events)-1]
	step, seq := end.Step, map[string]int64{"0": end.Step - 1}
	for i, req := range []Request{compacted, other, extended, *events[3].Request} {
		lane := "0"
		if i == 1 {
			lane = "1"
		}
		r := req
		events = append(events, Event{Step: step, Seq: seq[lane], Lane: lane, CallSite: "plan", Kind: KindModelCall, Request: &r,
			RequestHash: fmt.Sprintf("%064x", step), Response: &Response{Content: json.RawMessage(`"ok"`)}})
		seq[lane]++
		step++
	}
	end.Step, end.Seq = step, seq["0"]
	events = append(events, end)
	dir := t.TempDir()
	record(t, dir, events)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, events, s.Events)
}

func TestAnOlderSessionLoadsHashesTheSameAndRewritesSmaller(t *testing.T) {
	// testdata/v2-session was written by the schema 2 writer (before messages were stored once).
	old, err := Open(filepath.Join("testdata", "v2-session"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "v2-session", EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != old.Meta.EventsHash || old.Meta.SchemaVersion != 2 {
		t.Fatalf("the v2 session hashes to %s at schema %d; meta.json says %s", got, old.Meta.SchemaVersion, old.Meta.EventsHash)
	}
	if len(old.Events) != 10 || old.Events[3].Stream == nil || len(old.Events[7].Request.Messages) != 7 {
		t.Fatalf("the v2 session did not load whole: %d events", len(old.Events))
	}
	dir := t.TempDir()
	w, err := Create(dir, old.Meta, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range old.Events {
		if ev.Meta != nil {
			m := *ev.Meta
			m.SchemaVersion = CurrentSchemaVersion
			ev.Meta = &m
		}
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(func(m *Meta) { m.EventsHash = "" }); err != nil {
		t.Fatal(err)
	}
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range old.Events {
		old.Events[i].Meta = again.Events[i].Meta
	}
	sameEvents(t, old.Events, again.Events)
	fi, err := os.Stat(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size()*10 > int64(len(data))*8 {
		t.Fatalf("the v3 log is %d bytes, the v2 log %d: want at most 80 %% for 4 turns that repeat their history", fi.Size(), len(data))
	}
}

func TestATamperedSharedMessageIsDetectedWhereverItIsUsed(t *testing.T) {
	t.Run("defined in the log, meta.json rewritten to match", func(t *testing.T) {
		dir := t.TempDir()
		record(t, dir, conversation(5))
		path := filepath.Join(dir, EventsFile)
		data, _ := os.ReadFile(path)
		// The first question is defined once, on line 2, and used by every request after it.
		edited := bytes.Replace(data, []byte("turn 0: what next?"), []byte("turn 0: WHAT NEXT?"), 1)
		if bytes.Equal(edited, data) {
			t.Fatal("the question is not in the log")
		}
		rewriteLog(t, dir, edited)
		_, err := Open(dir)
		var dm *DigestMismatchError
		if !errors.As(err, &dm) || !strings.Contains(dm.Object, "definition at step 1") {
			t.Fatalf("got %v, want a digest mismatch of the definition at step 1", err)
		}
	})
	t.Run("a blob two sessions share", func(t *testing.T) {
		// A request whose system prompt passes the blob threshold is a blob both sessions refer to.
		big := strings.Repeat("a long system prompt. ", 100)
		blobs := t.TempDir()
		var dirs []string
		for _, id := range []string{"a", "b"} {
			events := conversation(3)
			for i := range events {
				if r := events[i].Request; r != nil {
					r.System = big
				}
			}
			dir := filepath.Join(blobs, id)
			w, err := Create(dir, Meta{ID: id, FingerprintMode: "strict"}, WriterOptions{BlobThreshold: 1 << 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range events {
				if err := w.Append(ev); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.Close(nil); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, dir)
		}
		// The request without its messages (model, system prompt, params) is one definition.
		matches, _ := filepath.Glob(filepath.Join(dirs[0], BlobsDir, "*"))
		if len(matches) != 1 {
			t.Fatalf("want one blob, the request with the long system prompt: %v", matches)
		}
		h := filepath.Base(matches[0])
		for _, dir := range dirs {
			p := filepath.Join(dir, BlobsDir, h)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatalf("the system prompt is not the blob %s: %v", h, err)
			}
			if err := os.WriteFile(p, bytes.Replace(data, []byte("long"), []byte("LONG"), 1), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, dir := range dirs {
			_, err := Open(dir)
			var dm *DigestMismatchError
			if !errors.As(err, &dm) || dm.Want != h {
				t.Errorf("%s: got %v, want a digest mismatch of blob %s", filepath.Base(dir), err, h)
			}
		}
		if err := os.Remove(filepath.Join(dirs[0], BlobsDir, h)); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dirs[0])
		var me *MissingError
		if !errors.As(err, &me) || me.Field != "defBlobs" || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("without the blob: got %v, want a *MissingError for defBlobs", err)
		}
	})
}

func TestAReferenceToContentTheLogDoesNotDefineIsRefused(t *testing.T) {
	dir := t.TempDir()
	record(t, dir, conversation(3))
	data, _ := os.ReadFile(filepath.Join(dir, EventsFile))
	lines := bytes.SplitAfter(data, []byte("\n"))
	// Drop the definitions of line 2 (the first request's): line 2 then refers to nothing.
	var ev map[string]json.RawMessage
	if err := json.Unmarshal(lines[1], &ev); err != nil {
		t.Fatal(err)
	}
	delete(ev, "defs")
	delete(ev, "lists")
	line, _ := json.Marshal(ev)
	lines[1] = append(line, '\n')
	rewriteLog(t, dir, bytes.Join(lines, nil))
	_, err := Open(dir)
	var re *RefError
	if !errors.As(err, &re) || re.Step != 1 || !strings.HasPrefix(re.Field, "refs.") {
		t.Fatalf("got %v, want a *RefError for the refs of step 1", err)
	}
}

func TestAStreamStoresItsTextOnce(t *testing.T) {
	const chunks, piece = 1000, 200
	var text strings.Builder
	var stream []Chunk
	for i := range chunks {
		p := fmt.Sprintf("%04d ", i) + strings.Repeat(string(rune('a'+i%26)), piece-5)
		text.WriteString(p)
		stream = append(stream, Chunk{OffsetMs: int64(i), Data: json.RawMessage(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + mustJSON(p) + `}}`)})
	}
	n := text.Len()
	events := []Event{{Step: 0, Lane: "0", Kind: KindSessionStart},
		{Step: 1, Lane: "0", CallSite: "plan", Kind: KindModelCall, Request: &Request{Model: "m", Messages: []Message{{Role: "user", Content: json.RawMessage(`"write"`)}}},
			RequestHash: strings.Repeat("b", 64), Stream: stream,
			Response: &Response{Content: json.RawMessage(`[{"type":"text","text":` + mustJSON(text.String()) + `}]`), StopReason: "end_turn"}},
		{Step: 2, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)}}
	dir := t.TempDir()
	record(t, dir, events)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, events, s.Events)
	stored := dirBytes(t, dir)
	// The chunks' JSON around the text is 80 bytes, their offsets about 20 and a span about 35.
	const perChunk = 150
	bound := int64(n + perChunk*chunks + 4<<10)
	if stored > bound {
		t.Fatalf("the session stores %d bytes for %d bytes of text in %d chunks; want at most %d (the text once plus %d a chunk)", stored, n, chunks, bound, perChunk)
	}
	// Stored as it is, the text would count twice and break the bound: the bound can fail.
	line, _ := json.Marshal(events[1])
	if int64(len(line)) <= bound {
		t.Fatalf("the event as schema 2 stored it is %d bytes, within the bound %d: the test proves nothing", len(line), bound)
	}
}

// rewriteLog replaces a committed log and rewrites meta.json's eventsHash to match, as a forger would.
func rewriteLog(t *testing.T, dir string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, EventsFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	meta, err := ReadMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	meta.EventsHash = digestOf(data)
	out, _ := json.MarshalIndent(meta, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, MetaFile), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dirBytes is the size of every file under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		n += fi.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
