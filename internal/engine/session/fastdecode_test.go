package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writtenLines is one line of every shape a recorder writes at the current schema version.
func writtenLines(t testing.TB) [][]byte {
	t.Helper()
	ok, notOK := true, false
	events := []Event{
		{Seq: 1, Step: 1, TS: 5, Lane: "0.1", CallSite: "plan", Kind: KindModelCall, Author: AuthorThirdParty, Provenance: ProvenanceLive,
			Provider: "openai", RequestHash: strings.Repeat("a", 64), LatencyMs: 12,
			Request: &Request{Model: "m", System: "be <careful> & \"exact\"\n", Messages: []Message{{Role: "user", Content: json.RawMessage(`"hi é 😀"`)}},
				Params: map[string]json.RawMessage{"tools": json.RawMessage(`[{"name":"t","input_schema":{"type":"object"}}]`), "n": json.RawMessage(`null`)}},
			Response: &Response{Content: json.RawMessage(`[]`), StopReason: "end_turn", Usage: &Usage{InputTokens: 1, OutputTokens: 2, CacheCreationInputTokens: 3, CacheReadInputTokens: 4, CostMicroUSD: 5},
				Raw: json.RawMessage(`{"id":"x","big":12345678901234567890123,"f":-1.5e-7}`)},
			Usage:  &Usage{InputTokens: 9007199254740993, OutputTokens: -1},
			Stream: []Chunk{{OffsetMs: 0, Data: json.RawMessage(`{"delta":"a"}`)}, {OffsetMs: 3, Data: json.RawMessage(`"b"`)}}},
		{Step: 2, Lane: "0", Kind: KindModelCall, Request: &Request{Model: "m", Messages: []Message{}}, Stream: []Chunk{}},
		{Seq: 2, Step: 3, Lane: "0", Kind: KindToolCall, Name: "run", Args: json.RawMessage(`{"cmd":"ls\t-l","n":[1,2,{"a":true,"b":false,"c":null}]}`), ArgsHash: strings.Repeat("b", 64),
			Error: &SerializedError{Name: "ExitError", Message: "exit 1", Stack: "at main\n", Data: json.RawMessage(`{"code":1}`)}},
		{Step: 4, Lane: "0", Kind: KindToolCall, Name: "big", Blobs: map[string]string{"result": strings.Repeat("c", 64), "args": strings.Repeat("d", 64)}},
		{Step: 5, Lane: "0", Kind: KindEntropy, Source: SourceRandom, Value: json.RawMessage(`0.5`)},
		{Step: 6, Lane: "0", Kind: KindNote, Author: AuthorAgent, Text: "a note\u2028with\u0000controls\x7f"},
		{Step: 7, Lane: "0", Kind: KindLedger, Ledger: json.RawMessage(`{"intent":"fix","claims":[]}`)},
		{Step: 8, Lane: "0", Kind: KindSessionEnd, OK: &ok},
		{Step: 9, Lane: "0", Kind: KindSessionEnd, OK: &notOK},
	}
	var lines [][]byte
	for _, ev := range events {
		ev.SchemaVersion = CurrentSchemaVersion
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, b)
	}
	// The stored form as the writer writes it (defs, joins, lists, refs, streamText), and every
	// stored-form key, defBlobs included, filled at once.
	log, _ := schemaThreeLog(t, schemaThreeRun(3))
	lines = append(lines, bytes.Split(bytes.TrimSpace(log), []byte("\n"))...)
	all := Event{Step: 1, Lane: "0", Kind: KindModelCall, SchemaVersion: CurrentSchemaVersion,
		Defs:       map[string]json.RawMessage{"a": json.RawMessage(`{"x":[1,"\u00e9"]}`), "b": json.RawMessage(`null`)},
		Joins:      map[string][]JoinPart{"c": {{Text: `{"k":`}, {Ref: "a"}, {Text: "}\n\u2028"}}, "d": {}},
		Lists:      map[string]ListDef{"e": {Prev: "f", Items: []ListItem{{Role: "user", Content: "a"}}}, "g": {Items: []ListItem{}}},
		DefBlobs:   []string{strings.Repeat("e", 64), ""},
		Refs:       &Refs{Request: "r", Messages: "e", Response: "s", Result: "t"},
		StreamText: []TextSpan{{Chunk: 1, At: 2, Leaf: 3, From: 4, To: -5}, {}}}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return append(lines, b)
}

// TestFastDecoderTakesWhatTheWriterWrites: every line shape a recorder writes is decoded in one pass
// (were it not, loading would fall back to encoding/json plus checkJSONText and be slow again), to the
// same event.
func TestFastDecoderTakesWhatTheWriterWrites(t *testing.T) {
	lines := writtenLines(t)
	for _, l := range bytes.Split(bytes.TrimSpace(benchLog(t, 3)), []byte("\n")) {
		lines = append(lines, l)
	}
	for _, line := range lines {
		got, ok := newFastDecoder().event(line)
		if !ok {
			t.Errorf("the fast decoder gave up on %s", line)
			continue
		}
		want, _, err := decodeEvent(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-encoding/json +fast):\n%s", line, diff)
		}
	}
}

// TestFastDecoderRawFieldsDoNotOverlap: raw fields share one copy of the line, capped, so appending to
// one reallocates instead of writing over the next, and the copy is not the reader's buffer.
func TestFastDecoderRawFieldsDoNotOverlap(t *testing.T) {
	line := []byte(`{"seq":1,"step":1,"lane":"0","kind":"tool_call","schemaVersion":2,"args":{},"result":[1]}`)
	ev, ok := newFastDecoder().event(line)
	if !ok {
		t.Fatal("the fast decoder gave up")
	}
	for i := range line {
		line[i] = 'x'
	}
	ev.Args = append(ev.Args, "zzzz"...)
	if string(ev.Result) != `[1]` || string(ev.Args) != `{}zzzz` {
		t.Fatalf("args %s result %s", ev.Args, ev.Result)
	}
}

// TestLoadingAllocatesLittlePerEvent: decoding a line allocates only what the event keeps. Through
// encoding/json and checkJSONText it is about 47 allocations per event of this log.
func TestLoadingAllocatesLittlePerEvent(t *testing.T) {
	const n = 300
	log := benchLog(t, n)
	sum := sha256.Sum256(log)
	want := hex.EncodeToString(sum[:])
	allocs := testing.AllocsPerRun(5, func() {
		if events, err := ReadEvents(bytes.NewReader(log), want, nil, EventsFile); err != nil || len(events) != n {
			t.Fatal(err, len(events))
		}
	})
	if perEvent := allocs / n; perEvent > 8 {
		t.Fatalf("%.1f allocations per event, want at most 8", perEvent)
	}
	// The stored form (schema 3) keeps more per model call (its definitions, list, refs and spans):
	// about 16 allocations an event of this run, and over 80 were its model calls to go the slow way.
	stored, _ := schemaThreeLog(t, schemaThreeRun(100))
	lines := bytes.Count(stored, []byte("\n"))
	allocs = testing.AllocsPerRun(5, func() {
		if events, err := ReadEvents(bytes.NewReader(stored), "", nil, EventsFile); err != nil || len(events) != lines {
			t.Fatal(err, len(events))
		}
	})
	if perEvent := allocs / float64(lines); perEvent > 24 {
		t.Fatalf("%.1f allocations per event of the stored form, want at most 24", perEvent)
	}
}

// TestLongLinesReadBack: a line longer than the read buffer is put together, and the lines after it
// keep their numbers and offsets.
func TestLongLinesReadBack(t *testing.T) {
	long := line(1, 1, "0", KindNote, `"text":"`+strings.Repeat("é", 100<<10)+`"`)
	log := start + long + `{"seq":2,"step":2,"lane":"0","kind":"note","schemaVersion":2,"surprise":1}` + "\n"
	_, err := ReadEvents(strings.NewReader(log), "", nil, EventsFile)
	var ce *CorruptEventError
	if !errors.As(err, &ce) || ce.Line != 3 || ce.Offset != int64(len(start+long)) {
		t.Fatalf("got %v, want line 3 at byte offset %d", err, len(start+long))
	}
	events, err := ReadEvents(strings.NewReader(start+long), "", nil, EventsFile)
	if err != nil || len(events) != 2 || events[1].Text != strings.Repeat("é", 100<<10) {
		t.Fatalf("got %d events, %v", len(events), err)
	}
}

// FuzzFastDecoderAgreesWithEncodingJSON: for any line, loading decodes the same event, or refuses it
// with the same error, as encoding/json with DisallowUnknownFields followed by checkJSONText does.
func FuzzFastDecoderAgreesWithEncodingJSON(f *testing.F) {
	for _, l := range writtenLines(f) {
		f.Add(l)
	}
	const head = `{"seq":1,"step":1,"ts":0,"lane":"0","callSite":"","kind":"tool_call","schemaVersion":2`
	for _, tail := range []string{
		`}`, `,"args":null,"result":null}`, `,"blobs":{}}`, `,"request":{"model":"m","messages":[],"params":{}}}`,
		`,"text":"a\nb\u00e9\ud83d\ude00\u003c\/"}`, `,"text":"caf` + "\xe9" + `"}`, `,"text":"\ud800x"}`, `,"text":"\udc00"}`,
		`,"text":"a` + "\x01" + `"}`, `,"text":"\x"}`, `,"text":"\u12"}`,
		`,"seq":2}`, `,"Seq":2}`, `,"\u0073eq2":2}`, `,"surprise":1}`, `,"meta":{"id":"x"}}`,
		`,"args":{"a":1,"a":2}}`, `,"args":{"a":1,"\u0061":2}}`, `,"request":{"model":"m","messages":[],"params":{"t":1,"t":2}}}`,
		`,"request":{"model":"m","Model":"n","messages":[]}}`, `,"blobs":{"args":"x","args":"y"}}`,
		`,"latencyMs":9007199254740993}`, `,"latencyMs":9223372036854775807}`, `,"latencyMs":9223372036854775808}`,
		`,"latencyMs":-9223372036854775808}`, `,"latencyMs":-9223372036854775809}`, `,"latencyMs":1.0}`, `,"latencyMs":1e3}`,
		`,"latencyMs":-0}`, `,"latencyMs":01}`, `,"latencyMs":"1"}`, `,"value":12345678901234567890123e400}`, `,"value":-}`, `,"value":1.}`,
		`,"lane":null}`, `,"request":null}`, `,"ok":null}`, `,"ok":true}`, `,"usage":{"inputTokens":1,"inputTokens":1}}`,
		`,"stream":[{"offsetMs":1,"data":null},{"offsetMs":2}]}`, `,"error":{"name":"E","message":"m","data":[]}}`,
		`,"value":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
		`,"args":{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":3}}`,
		`} `, "}\r", `}}`, `} x`, `,}`, `,"args":[1,]}`, `,"args":{"a" 1}}`, `,"args":tru}`, ` }`,
	} {
		f.Add([]byte(head + tail))
	}
	f.Add([]byte(` { "seq" : 1 , "step":1 ,"lane" : "0", "kind":"note" , "schemaVersion" : 2 } `))
	f.Add([]byte(`{"seq":0,"step":0,"lane":"0","kind":"teleport","schemaVersion":2}`))
	f.Add([]byte(`{"seq":0,"step":0,"lane":"0","kind":"model_call","schemaVersion":1,"usage":{"inputTokens":1,"costUsd":0.5}}`))
	f.Add([]byte(`{"seq":0,"step":0,"lane":"0","kind":"note","schemaVersion":3}`))
	const head3 = `{"seq":1,"step":1,"lane":"0","kind":"model_call","schemaVersion":3`
	for _, tail := range []string{
		`,"defs":{"a":1,"a":1}}`, `,"defs":null}`, `,"defs":{"\u0061":1}}`, `,"Defs":{}}`, `,"defs":[]}`,
		`,"joins":{"a":[{"t":"x","t":"y"}]}}`, `,"joins":{"a":[{"t":"x","r":"y","z":1}]}}`, `,"joins":{"a":[null]}}`, `,"joins":{"a":null}}`,
		`,"lists":{"a":{"prev":"p","items":[{"role":"user","content":"c","Role":"x"}]}}}`, `,"lists":{"a":{"items":null}}}`, `,"lists":{"a":{}}}`,
		`,"defBlobs":["a",1]}`, `,"defBlobs":null}`, `,"defBlobs":["a",null]}`, `,"defBlobs":[]}`,
		`,"refs":{"request":"a","request":"b"}}`, `,"refs":{"stream":"a"}}`, `,"refs":null}`, `,"refs":{"result":1}}`,
		`,"streamText":[{"c":1,"a":2,"l":3,"f":4,"t":5}]}`, `,"streamText":[{"c":1.5}]}`, `,"streamText":[{"c":9223372036854775808}]}`,
		`,"streamText":[{"c":-9223372036854775808,"x":1}]}`, `,"streamText":[{"C":1}]}`, `,"streamText":{}}`,
	} {
		f.Add([]byte(head3 + tail))
	}
	f.Add([]byte(`{"seq":1,"step":1,"lane":"0","kind":"note","schemaVersion":2,"refs":{}}`))
	f.Add([]byte(`{"seq":1,"step":1,"lane":"0","kind":"note","schemaVersion":2,"streamText":[]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.IndexByte(line, '\n') >= 0 {
			return // not one line
		}
		wantEv, wantWritten, wantErr := decodeEvent(line)
		gotEv, gotWritten, gotErr := newFastDecoder().decode(line)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("%q: got error %v, encoding/json's way %v", line, gotErr, wantErr)
		}
		if gotErr != nil {
			return
		}
		if diff := cmp.Diff(wantEv, gotEv); diff != "" || gotWritten != wantWritten {
			t.Fatalf("%q: written at %d, encoding/json's way %d (-encoding/json +fast):\n%s", line, gotWritten, wantWritten, diff)
		}
	})
}
