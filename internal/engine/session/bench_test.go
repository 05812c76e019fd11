package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// benchLog builds an events.jsonl of n realistic events: model calls with a few messages, tool calls
// and entropy draws, as a recording writes them.
func benchLog(b *testing.B, n int) []byte {
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

// BenchmarkLoadSession compares loading a session — hash verification, schema check, strict decoding —
// with plain encoding/json decoding of the same lines, the limit. Compare events/s side by side.
func BenchmarkLoadSession(b *testing.B) {
	const n = 10000
	log := benchLog(b, n)
	b.Run("agentrewind", func(b *testing.B) {
		b.SetBytes(int64(len(log)))
		for b.Loop() {
			events, err := ReadEvents(bytes.NewReader(log), "", nil, EventsFile)
			if err != nil || len(events) != n {
				b.Fatal(err, len(events))
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(log)))
		for b.Loop() {
			sc := bufio.NewScanner(bytes.NewReader(log))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			events := make([]Event, 0)
			for sc.Scan() {
				var ev Event
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					b.Fatal(err)
				}
				events = append(events, ev)
			}
			if len(events) != n {
				b.Fatal(len(events))
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
