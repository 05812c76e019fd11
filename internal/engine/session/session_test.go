package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func boolPtr(b bool) *bool { return &b }

func sampleEvents(bigText string) []Event {
	return []Event{
		{Step: 0, Lane: "0", Kind: KindSessionStart},
		{Step: 1, Seq: 0, Lane: "0", CallSite: "plan", Kind: KindModelCall, Provider: "anthropic",
			Request:     &Request{Model: "m", System: "sys", Messages: []Message{{Role: "user", Content: json.RawMessage(`"hi"`)}}},
			RequestHash: strings.Repeat("a", 64),
			Response:    &Response{Content: json.RawMessage(`[{"type":"text","text":` + mustJSON(bigText) + `}]`), StopReason: "end_turn"},
			Usage:       &Usage{InputTokens: 10, OutputTokens: 5}},
		{Step: 2, Seq: 1, Lane: "0", CallSite: "search", Kind: KindToolCall, Name: "search", Args: json.RawMessage(`{"q":"x"}`), Result: json.RawMessage(`["a"]`)},
		{Step: 3, Seq: 2, Lane: "0", Kind: KindEntropy, Source: SourceUUID, Value: json.RawMessage(`"0f0e"`)},
		{Step: 4, Seq: 3, Lane: "0", Kind: KindNote, Text: "thinking"},
		{Step: 5, Seq: 4, Lane: "0", Kind: KindLedger, Ledger: json.RawMessage(`{"type":"INTENT","goal":"g"}`)},
		{Step: 6, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)},
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func record(t testing.TB, dir string, events []Event) Meta {
	t.Helper()
	w, err := Create(dir, Meta{ID: "s1", FingerprintMode: "strict"}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := w.Close(nil)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

func TestRecordedSessionReadsBackVerified(t *testing.T) {
	dir := t.TempDir()
	events := sampleEvents("small answer")
	meta := record(t, dir, events)
	if meta.Events != int64(len(events)) || !ValidBlobHash(meta.EventsHash) {
		t.Fatalf("meta after close: %+v", meta)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// What was written comes back, stamped with the current schema and each kind's author.
	want := sampleEvents("small answer")
	for i := range want {
		want[i].SchemaVersion = CurrentSchemaVersion
		want[i].Author = DefaultAuthor(want[i].Kind)
	}
	if diff := cmp.Diff(want, s.Events, rawAsText); diff != "" {
		t.Fatalf("events read back (-written +read):\n%s", diff)
	}
	if s.Events[3].Author != AuthorRecorder || s.Events[5].Author != AuthorAgent || s.Events[2].Author != AuthorThirdParty {
		t.Errorf("authors: entropy %s ledger %s tool %s", s.Events[3].Author, s.Events[5].Author, s.Events[2].Author)
	}
}

func TestSessionWithoutMetaIsNotCommitted(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Meta{ID: "s1"}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(Event{Kind: KindSessionStart, Lane: "0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("open before close: got %v, want ErrNotCommitted", err)
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err != nil {
		t.Fatalf("open after close: %v", err)
	}
}

func TestCreateRefusesToOverwriteARecording(t *testing.T) {
	dir := t.TempDir()
	record(t, dir, sampleEvents("x"))
	if _, err := Create(dir, Meta{ID: "s2"}, WriterOptions{}); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("got %v, want a refusal", err)
	}
}

func TestLargeFieldsAreExternalisedToBlobs(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 2048) // 32 KiB > 16 KiB
	record(t, dir, sampleEvents(big))
	raw, err := os.ReadFile(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(big[:1024])) {
		t.Fatal("the large response was written inline into events.jsonl")
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ev := s.Events[1]
	// The response's content is a definition (dedup.go) too large for the line: a blob.
	if len(ev.DefBlobs) != 1 {
		t.Fatalf("the response's content is not stored as a blob: blobs %v, defBlobs %v", ev.Blobs, ev.DefBlobs)
	}
	h := ev.DefBlobs[0]
	if _, err := os.Stat(filepath.Join(dir, BlobsDir, h)); err != nil {
		t.Fatalf("blob file: %v", err)
	}
	if !strings.Contains(string(ev.Response.Content), big) {
		t.Fatal("the blob did not resolve back into the response")
	}
	if got := Blobs(s.Events); len(got) != 1 || got[0] != h {
		t.Fatalf("Blobs() = %v", got)
	}
}

func TestTamperingIsDetected(t *testing.T) {
	big := strings.Repeat("z", 20<<10)
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		object string
	}{
		{"edited events.jsonl", func(t *testing.T, dir string) {
			p := filepath.Join(dir, EventsFile)
			data, _ := os.ReadFile(p)
			_ = os.WriteFile(p, bytes.Replace(data, []byte(`"q":"x"`), []byte(`"q":"y"`), 1), 0o644)
		}, EventsFile},
		{"edited blob", func(t *testing.T, dir string) {
			matches, _ := filepath.Glob(filepath.Join(dir, BlobsDir, "*"))
			if len(matches) != 1 {
				t.Fatalf("want one blob, have %v", matches)
			}
			data, _ := os.ReadFile(matches[0])
			data[100] ^= 1
			_ = os.WriteFile(matches[0], data, 0o644)
		}, "blobs/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			record(t, dir, sampleEvents(big))
			tc.tamper(t, dir)
			_, err := Open(dir)
			var dm *DigestMismatchError
			if !errors.As(err, &dm) || !strings.Contains(dm.Object, tc.object) {
				t.Fatalf("got %v, want a DigestMismatchError naming %s", err, tc.object)
			}
		})
	}
}

func TestCorruptLinesAreReportedWithLineAndOffset(t *testing.T) {
	good := `{"seq":0,"step":0,"ts":0,"lane":"0","callSite":"","kind":"session_start","schemaVersion":3}` + "\n"
	cases := []struct {
		name    string
		log     string
		line    int
		offset  int64
		message string
	}{
		{"not JSON", good + "{nope\n", 2, int64(len(good)), "invalid character"},
		{"truncated last line", good + `{"seq":1`, 2, int64(len(good)), "truncated"},
		{"unknown kind", good + `{"seq":0,"step":1,"lane":"0","kind":"teleport","schemaVersion":3}` + "\n", 2, int64(len(good)), `unknown event kind "teleport"`},
		{"unknown field", good + `{"seq":0,"step":1,"lane":"0","kind":"note","schemaVersion":3,"surprise":1}` + "\n", 2, int64(len(good)), `unknown field "surprise"`},
		{"missing schema version", `{"seq":0,"kind":"note"}` + "\n", 1, 0, "schemaVersion is missing"},
		{"schema from the future", `{"seq":0,"kind":"note","schemaVersion":99}` + "\n", 1, 0, "upgrade agentrewind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadEvents(strings.NewReader(tc.log), "", nil, "events.jsonl")
			var ce *CorruptEventError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want *CorruptEventError", err)
			}
			if ce.Line != tc.line || ce.Offset != tc.offset || !strings.Contains(ce.Error(), tc.message) {
				t.Fatalf("got line %d offset %d %q; want line %d offset %d containing %q", ce.Line, ce.Offset, ce.Error(), tc.line, tc.offset, tc.message)
			}
		})
	}
}

// TestV1SessionMigrates reads a session in the original (schema 1) layout, written by hand: authors
// are filled in from the kind, float dollar costs become integer micro-dollars, and nothing else
// changes.
func TestV1SessionMigrates(t *testing.T) {
	s, err := Open(filepath.Join("testdata", "v1-session"))
	if err != nil {
		t.Fatal(err)
	}
	usage := &Usage{InputTokens: 12, OutputTokens: 1, CostMicroUSD: 1250} // costUsd 0.00125
	meta := &Meta{ID: "v1", CreatedAt: 1700000000000, RecorderVersion: "0.1.0", SchemaVersion: 1, Provider: "fake",
		FingerprintMode: "strict", Redaction: RedactionInfo{Enabled: true, Patterns: []string{}}}
	v2 := CurrentSchemaVersion
	want := []Event{
		{Seq: 0, Step: 0, TS: 1700000000000, Lane: "0", Kind: KindSessionStart, SchemaVersion: v2, Author: AuthorRecorder, Meta: meta},
		{Seq: 0, Step: 1, TS: 1700000000001, Lane: "0", CallSite: "plan", Kind: KindModelCall, SchemaVersion: v2, Author: AuthorThirdParty,
			Provider: "fake", Request: &Request{Model: "fake-1", System: "You are a test agent.",
				Messages: []Message{{Role: "user", Content: json.RawMessage(`"What is 2+2?"`)}},
				Params:   map[string]json.RawMessage{"max_tokens": json.RawMessage("64")}},
			RequestHash: "REQHASH",
			Response:    &Response{Content: json.RawMessage(`[{"type":"text","text":"4"}]`), StopReason: "end_turn", Usage: usage},
			Usage:       usage, LatencyMs: 3, Blobs: map[string]string{}},
		{Seq: 1, Step: 2, TS: 1700000000002, Lane: "0", CallSite: "answer", Kind: KindToolCall, SchemaVersion: v2, Author: AuthorThirdParty,
			Name: "submit", Args: json.RawMessage(`{"answer":"4"}`), ArgsHash: "ARGSHASH", Result: json.RawMessage(`{"ok":true}`),
			LatencyMs: 1, Blobs: map[string]string{}},
		{Seq: 2, Step: 3, TS: 1700000000003, Lane: "0", Kind: KindNote, SchemaVersion: v2, Author: AuthorAgent, Text: "done"},
		{Seq: 0, Step: 4, TS: 1700000000004, Lane: "0", Kind: KindSessionEnd, SchemaVersion: v2, Author: AuthorRecorder, OK: boolPtr(true)},
	}
	if diff := cmp.Diff(want, s.Events, rawAsText); diff != "" {
		t.Fatalf("migrated events (-want +got):\n%s", diff)
	}
}

// rawAsText compares JSON fields by their text, which a diff can show.
var rawAsText = cmp.Transformer("text", func(r json.RawMessage) string { return string(r) })

func TestVaultHashIsRecordedInMeta(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Meta{ID: "v"}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.SetVault([]byte("sealed")); err != nil {
		t.Fatal(err)
	}
	meta, err := w.Close(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyBlob(meta.VaultHash, []byte("sealed")); err != nil {
		t.Fatalf("meta.vaultHash %q does not hash the vault: %v", meta.VaultHash, err)
	}
}

func TestCreateNeedsADirectoryAndAnID(t *testing.T) {
	if _, err := Create("", Meta{ID: "x"}, WriterOptions{}); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("empty dir: %v", err)
	}
	if _, err := Create(t.TempDir(), Meta{}, WriterOptions{}); err == nil || !strings.Contains(err.Error(), "meta.ID") {
		t.Fatalf("empty id: %v", err)
	}
}
