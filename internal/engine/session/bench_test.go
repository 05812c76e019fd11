package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchLog builds an events.jsonl of n realistic events: model calls with a few messages, tool calls
// and entropy draws, as a recording writes them.
func benchLog(b testing.TB, n int) []byte {
	b.Helper()
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		ev := Event{Seq: int64(i), Step: int64(i), TS: 1700000000000 + int64(i), Lane: "0", SchemaVersion: CurrentSchemaVersion}
		switch i % 3 {
		case 0:
			ev.Kind, ev.CallSite, ev.Author = KindModelCall, "plan", AuthorThirdParty
			ev.Provider, ev.RequestHash = "anthropic", fmt.Sprintf("%064x", i)
			ev.Request = &Request{Model: "claude-sonnet-4-5", System: "You are a careful coding agent. Work step by step.",
				Messages: []Message{{Role: "user", Content: json.RawMessage(`"Fix the failing test in pkg/store"`)},
					{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"Looking at the test output first."}]`)}},
				Params: map[string]json.RawMessage{"max_tokens": json.RawMessage("1024"), "temperature": json.RawMessage("0.2")}}
			ev.Response = &Response{Content: json.RawMessage(`[{"type":"tool_use","id":"t1","name":"read_file","input":{"path":"pkg/store/store_test.go"}}]`), StopReason: "tool_use"}
			ev.Usage = &Usage{InputTokens: 812, OutputTokens: 64}
		case 1:
			ev.Kind, ev.CallSite, ev.Author, ev.Name = KindToolCall, "tools", AuthorThirdParty, "read_file"
			ev.Args, ev.ArgsHash = json.RawMessage(`{"path":"pkg/store/store_test.go"}`), fmt.Sprintf("%064x", i)
			ev.Result = json.RawMessage(`{"content":"package store\n\nfunc TestPut(t *testing.T) { ... }\n"}`)
		default:
			ev.Kind, ev.CallSite, ev.Author, ev.Source, ev.Value = KindEntropy, "clock", AuthorRecorder, SourceClock, json.RawMessage("1700000000123")
		}
		line, err := json.Marshal(ev)
		if err != nil {
			b.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// schemaThreeRun is a run of turns as an agent makes it: each model call's request carries the whole
// conversation so far with the same system prompt and tool list, its answer (text and a tool call)
// arrives as a stream of text deltas, and the tool's result goes back to the model inside the next
// user message; a clock read follows each tool call. Framed by session_start and session_end.
func schemaThreeRun(turns int) []Event {
	system := "You are a careful coding agent. " + strings.Repeat("Keep every change small, tested and explained. ", 6)
	tools := json.RawMessage(`[{"name":"read_file","description":"` + strings.Repeat("reads a file of the workspace; ", 5) +
		`","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]`)
	events := []Event{{Step: 0, Lane: "0", Kind: KindSessionStart}}
	msgs := []Message{{Role: "user", Content: json.RawMessage(`"Fix the failing test in pkg/store and explain the cause."`)}}
	step := int64(1)
	next := func(ev Event) {
		ev.Step, ev.Seq, ev.Lane, ev.TS = step, step-1, "0", 1700000000000+step
		events = append(events, ev)
		step++
	}
	for turn := range turns {
		var text strings.Builder
		var stream []Chunk
		for c := range 6 {
			piece := fmt.Sprintf("Step %d.%d: I read <store_test.go> & check what \"Put\" returns. ", turn, c)
			text.WriteString(piece)
			stream = append(stream, Chunk{OffsetMs: int64(40 * c), Data: json.RawMessage(
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + mustJSON(piece) + `}}`)})
		}
		id := fmt.Sprintf("toolu_%04d", turn)
		path := fmt.Sprintf("pkg/store/file%d.go", turn)
		answer := json.RawMessage(`[{"type":"text","text":` + mustJSON(text.String()) + `},{"type":"tool_use","id":"` + id +
			`","name":"read_file","input":{"path":"` + path + `"}}]`)
		next(Event{CallSite: "plan", Kind: KindModelCall, Provider: "anthropic", RequestHash: fmt.Sprintf("%064x", step),
			Request: &Request{Model: "claude-sonnet-4-5", System: system, Messages: append([]Message(nil), msgs...),
				Params: map[string]json.RawMessage{"max_tokens": json.RawMessage(`4096`), "temperature": json.RawMessage(`0.2`), "tools": tools}},
			Response: &Response{Content: answer, StopReason: "tool_use", Usage: &Usage{InputTokens: 900 + 300*int64(turn), OutputTokens: 120}},
			Usage:    &Usage{InputTokens: 900 + 300*int64(turn), OutputTokens: 120}, Stream: stream, LatencyMs: 800})
		result := json.RawMessage(`{"content":` + mustJSON(fmt.Sprintf("package store // file %d\n\n", turn)+
			strings.Repeat("func TestPut(t *testing.T) {\n\tif err := s.Put(\"k\", v); err != nil {\n\t\tt.Fatal(err)\n\t}\n}\n", 4)) + `}`)
		next(Event{CallSite: "tools", Kind: KindToolCall, Name: "read_file", Args: json.RawMessage(`{"path":"` + path + `"}`),
			ArgsHash: fmt.Sprintf("%064x", step), Result: result, LatencyMs: 3})
		next(Event{CallSite: "clock", Kind: KindEntropy, Source: SourceClock, Value: json.RawMessage(fmt.Sprint(1700000000123 + step))})
		msgs = append(msgs, Message{Role: "assistant", Content: answer},
			Message{Role: "user", Content: json.RawMessage(`[{"type":"tool_result","tool_use_id":"` + id + `","content":` + string(result) + `}]`)})
	}
	events = append(events, Event{Step: step, Seq: step - 1, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)})
	return events
}

// schemaThreeLog records events with the writer, as a recording stores them today (schema 3: shared
// definitions, message lists, stream text cut out), and returns its events.jsonl and its blobs.
func schemaThreeLog(tb testing.TB, events []Event) ([]byte, memBlobs) {
	tb.Helper()
	dir := tb.TempDir()
	record(tb, dir, events)
	log, err := os.ReadFile(filepath.Join(dir, EventsFile))
	if err != nil {
		tb.Fatal(err)
	}
	blobs := memBlobs{}
	entries, err := os.ReadDir(filepath.Join(dir, BlobsDir))
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if blobs[e.Name()], err = os.ReadFile(filepath.Join(dir, BlobsDir, e.Name())); err != nil {
			tb.Fatal(err)
		}
	}
	return log, blobs
}

// memBlobs serves blobs from memory, so that loading is timed without the disk.
type memBlobs map[string][]byte

func (m memBlobs) ReadBlob(hash string) ([]byte, error) {
	data, ok := m[hash]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return data, nil
}

// BenchmarkLoadSession compares loading a session with plain encoding/json doing the same work, the
// limit, on two logs: "schema3", a 400-turn run as today's writer stores it (requests by reference
// to shared definitions and message lists that each extend the previous turn's, tool results joined
// into the next message, stream text cut out of the chunks), and "flat", 10,000 events with every
// request inline (the log schema 2 wrote, still read). Both sides read the same events.jsonl from
// memory into the same []Event, refuse unknown fields, compute the log's SHA-256 over the exact bytes
// and compare it with the recorded one, then resolve the stored form with the same Expander (each
// definition's digest and each list's chain verified, refs, joins and stream text put back), so the
// two differ only in how a line is decoded:
//
//   - agentrewind: ReadEvents with the real events hash and the blobs, as Open reads a log: per line
//     it also refuses what encoding/json would silently rewrite (duplicate keys, a field name in
//     another case, invalid UTF-8, unpaired surrogates), checks the kind and the schema version, and
//     reports a bad line with its number and byte offset.
//   - encoding-json: one json.Decoder with DisallowUnknownFields over the stream, hashed as it is
//     read (io.TeeReader into SHA-256), the digest compared at the end, then resolveAll.
//
// side-by-side runs both alternately in each iteration, so that both see the same machine load, and
// reports agentrewind's throughput as a fraction of encoding/json's (load-ratio; the goal is >= 0.9).
func BenchmarkLoadSession(b *testing.B) {
	schema3, blobs := schemaThreeLog(b, schemaThreeRun(400))
	for _, fixture := range []struct {
		name  string
		log   []byte
		blobs BlobSource
	}{{"schema3", schema3, blobs}, {"flat", benchLog(b, 10000), nil}} {
		b.Run(fixture.name, func(b *testing.B) { benchmarkLoad(b, fixture.log, fixture.blobs) })
	}
}

func benchmarkLoad(b *testing.B, log []byte, blobs BlobSource) {
	sum := sha256.Sum256(log)
	want := hex.EncodeToString(sum[:])
	n := bytes.Count(log, []byte("\n"))
	loadAgentrewind := func() {
		events, err := ReadEvents(bytes.NewReader(log), want, blobs, EventsFile)
		if err != nil || len(events) != n {
			b.Fatal(err, len(events))
		}
	}
	loadJSON := func() {
		h := sha256.New()
		dec := json.NewDecoder(io.TeeReader(bytes.NewReader(log), h))
		dec.DisallowUnknownFields()
		var events []Event
		for {
			var ev Event
			err := dec.Decode(&ev)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			events = append(events, ev)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want || len(events) != n {
			b.Fatal(got, len(events))
		}
		if blobs != nil {
			if err := resolveAll(events, blobs, EventsFile); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, side := range []struct {
		name string
		load func()
	}{{"agentrewind", loadAgentrewind}, {"encoding-json", loadJSON}} {
		b.Run(side.name, func(b *testing.B) {
			b.SetBytes(int64(len(log)))
			b.ReportAllocs()
			for b.Loop() {
				side.load()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.Run("side-by-side", func(b *testing.B) {
		var ours, theirs time.Duration
		for b.Loop() {
			t0 := time.Now()
			loadAgentrewind()
			t1 := time.Now()
			loadJSON()
			ours, theirs = ours+t1.Sub(t0), theirs+time.Since(t1)
		}
		b.ReportMetric(float64(n)*float64(b.N)/ours.Seconds(), "agentrewind-events/s")
		b.ReportMetric(float64(n)*float64(b.N)/theirs.Seconds(), "encoding-json-events/s")
		b.ReportMetric(theirs.Seconds()/ours.Seconds(), "load-ratio")
	})
}
