package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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

// BenchmarkLoadSession compares loading a session with plain encoding/json doing the same work, the
// limit. Both sides read the same events.jsonl from memory into the same []Event, refuse unknown
// fields and compute the log's SHA-256 over the exact bytes and compare it with the recorded one:
//
//   - agentrewind: ReadEvents with the real events hash, as Open reads a log (no blobs to resolve):
//     per line it also refuses what encoding/json would silently rewrite (duplicate keys, a field
//     name in another case, invalid UTF-8, unpaired surrogates), checks the kind and the schema
//     version, and reports a bad line with its number and byte offset.
//   - encoding-json: one json.Decoder with DisallowUnknownFields over the stream, hashed as it is
//     read (io.TeeReader into SHA-256), the digest compared at the end.
//
// side-by-side runs both alternately in each iteration, so that both see the same machine load, and
// reports agentrewind's throughput as a fraction of encoding/json's (load-ratio; the goal is >= 0.9).
func BenchmarkLoadSession(b *testing.B) {
	const n = 10000
	log := benchLog(b, n)
	sum := sha256.Sum256(log)
	want := hex.EncodeToString(sum[:])
	loadAgentrewind := func() {
		events, err := ReadEvents(bytes.NewReader(log), want, nil, EventsFile)
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
