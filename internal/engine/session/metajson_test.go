package session

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// forkSession records a committed fork the way the recorder does: session_start carries the meta
// that meta.json then commits, with the events hash and count added. It returns the directory.
func forkSession(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "child")
	at := int64(3)
	meta := Meta{ID: "child", Parent: "parent", ForkedAtStep: &at, CreatedAt: 1700000000000, RecorderVersion: "v9",
		SchemaVersion: CurrentSchemaVersion, Provider: "fake", FingerprintMode: "strict",
		Redaction: RedactionInfo{Enabled: true, Patterns: []string{"aws-key"}}}
	w, err := Create(dir, meta, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []Event{
		{Step: 0, Lane: "0", Kind: KindSessionStart, Meta: &meta},
		{Step: 1, Lane: "0", Kind: KindNote, Text: "hi"},
		{Step: 2, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)},
	} {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(func(m *Meta) { m.Redaction.Counts = map[string]int{"aws-key": 1} }); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editMeta rewrites one member of meta.json as raw JSON text (from → to), leaving the log as it is.
func editMeta(t *testing.T, dir, from, to string) {
	t.Helper()
	path := filepath.Join(dir, MetaFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	compact := strings.NewReplacer("\n", "", "  ", "", `": `, `":`).Replace(string(data))
	edited := strings.Replace(compact, from, to, 1)
	if edited == compact {
		t.Fatalf("meta.json has no %s:\n%s", from, compact)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesAMetaJSONThatDisagreesWithItsLog: meta.json is session_start's meta plus what the
// recorder learns at the end; any other difference, and any value or key no recorder writes, is a
// *CorruptMetaError naming the field, even when the events hash still matches.
func TestOpenRefusesAMetaJSONThatDisagreesWithItsLog(t *testing.T) {
	if _, err := Open(forkSession(t)); err != nil {
		t.Fatalf("the intact fork: %v", err)
	}
	for _, tc := range []struct {
		name, from, to, field string
	}{
		{"another id", `"id":"child"`, `"id":"other"`, "id"},
		{"another parent", `"parent":"parent"`, `"parent":"someone"`, "parent"},
		{"no parent, so no fork", `"parent":"parent",`, ``, "forkedAtStep"},
		{"a negative forkedAtStep", `"forkedAtStep":3`, `"forkedAtStep":-5`, "forkedAtStep"},
		{"another forkedAtStep", `"forkedAtStep":3`, `"forkedAtStep":4`, "forkedAtStep"},
		{"schema 1 over schema 3 lines", `"schemaVersion":3`, `"schemaVersion":1`, "schemaVersion"},
		{"schema 0", `"schemaVersion":3`, `"schemaVersion":0`, "schemaVersion"},
		{"a fingerprint mode that is not one", `"fingerprintMode":"strict"`, `"fingerprintMode":"loose"`, "fingerprintMode"},
		{"another fingerprint mode", `"fingerprintMode":"strict"`, `"fingerprintMode":"structural"`, "fingerprintMode"},
		{"another createdAt", `"createdAt":1700000000000`, `"createdAt":1700000000001`, "createdAt"},
		{"another provider", `"provider":"fake"`, `"provider":"anthropic"`, "provider"},
		{"another recorder version", `"agentRewindVersion":"v9"`, `"agentRewindVersion":"v8"`, "agentRewindVersion"},
		{"redaction said off", `"enabled":true`, `"enabled":false`, "redaction.enabled"},
		{"a redaction pattern dropped", `"patterns":["aws-key"],`, ``, "redaction.patterns"},
		{"an empty id", `"id":"child"`, `"id":""`, "id"},
		{"an unknown key", `"id":"child"`, `"id":"child","zzz":1`, "zzz"},
		{"an unknown nested key", `"enabled":true`, `"enabled":true,"zzz":1`, "redaction.zzz"},
		{"a key in another case", `"createdAt"`, `"CreatedAt"`, "CreatedAt"},
		{"a key given twice", `"id":"child"`, `"id":"child","id":"child"`, "id"},
		{"a missing key", `"fingerprintMode":"strict",`, ``, "fingerprintMode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := forkSession(t)
			editMeta(t, dir, tc.from, tc.to)
			_, err := Open(dir)
			var me *CorruptMetaError
			if !errors.As(err, &me) || me.Field != tc.field {
				t.Fatalf("Open: %v (%T); want a *CorruptMetaError naming %s", err, err, tc.field)
			}
		})
	}
	dir := forkSession(t)
	editMeta(t, dir, `"schemaVersion":3`, `"schemaVersion":4`)
	var mig *MigrationError
	if _, err := Open(dir); !errors.As(err, &mig) || mig.From != 4 {
		t.Fatalf("a schema newer than this build: %v, want a *MigrationError", err)
	}
}

// TestDecodeMetaAcceptsWhatTheWriterWrites: every Meta the writer commits decodes to itself.
func TestDecodeMetaAcceptsWhatTheWriterWrites(t *testing.T) {
	dir := forkSession(t)
	data, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := DecodeMeta(data, MetaFile)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := json.MarshalIndent(meta, "", "  ")
	if string(again)+"\n" != string(data) {
		t.Fatalf("decoded and re-encoded:\n%s\nwritten:\n%s", again, data)
	}
}
