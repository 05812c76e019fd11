package session

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// line is one raw events.jsonl line at the current schema; extra is appended inside the object.
func line(step, seq int, lane string, kind Kind, extra string) string {
	s := `{"seq":` + itoa(seq) + `,"step":` + itoa(step) + `,"ts":0,"lane":"` + lane + `","callSite":"c","kind":"` + string(kind) + `","schemaVersion":3`
	if extra != "" {
		s += "," + extra
	}
	return s + "}\n"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

var (
	start = line(0, 0, "0", KindSessionStart, "")
	end   = func(step int) string { return line(step, 0, "0", KindSessionEnd, `"ok":true`) }
	tool  = func(step, seq int, lane string) string {
		return line(step, seq, lane, KindToolCall, `"name":"search","args":{"q":"x"},"result":["a"]`)
	}
)

// forge writes a session whose meta.json is rewritten to match whatever log it is given — what an
// editor who recomputes the events hash (or a buggy tool) produces — and returns its directory.
func forge(t *testing.T, log string, blobs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, BlobsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range blobs {
		if err := os.WriteFile(filepath.Join(dir, BlobsDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte(log))
	meta := Meta{ID: "forged", SchemaVersion: CurrentSchemaVersion, FingerprintMode: "strict",
		EventsHash: hex.EncodeToString(sum[:]), Events: int64(strings.Count(log, "\n"))}
	writeMeta(t, dir, meta)
	if err := os.WriteFile(filepath.Join(dir, EventsFile), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeMeta(t *testing.T, dir string, meta Meta) {
	t.Helper()
	data, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetaFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func blobOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// TestOpenRefusesLogsARecorderCannotWrite covers every structural and textual rule of the reader with
// meta.json recomputed to match, so the events hash cannot be what catches them.
func TestOpenRefusesLogsARecorderCannotWrite(t *testing.T) {
	nested := `{"model":"m","messages":[],"params":{"temperature":0.2,"temperature":1}}`
	cases := []struct {
		name  string
		log   string
		line  int
		field string
		msg   string
	}{
		{"duplicate key renames a tool", start + line(1, 1, "0", KindToolCall, `"name":"search","args":{},"name":"delete_repo"`) + end(2),
			2, "name", `duplicate key "name"`},
		{"duplicate key nested in a request", start + line(1, 1, "0", KindModelCall, `"request":`+nested) + end(2),
			2, "request", `request.params.temperature`},
		{"duplicate key spelled with an escape", start + line(1, 1, "0", KindNote, `"text":"a","\u0074ext":"b"`) + end(2),
			2, "text", `duplicate key "text"`},
		{"a field name in another case", start + line(1, 1, "0", KindToolCall, `"name":"search","args":{},"NAME":"delete_repo"`) + end(2),
			2, "NAME", `key "NAME" is the field "name" spelled in another case`},
		{"a nested field name folded by Unicode", start + line(1, 1, "0", KindModelCall, `"request":{"model":"m","meſſages":[],"messages":[]}`) + end(2),
			2, "request", `"meſſages" is the field "messages"`},
		{"a field name in another case inside a list", start + line(1, 1, "0", KindModelCall, `"request":{"model":"m","messages":[{"role":"user","ROLE":"system","content":"x"}]}`) + end(2),
			2, "request", `request.messages[0].ROLE`},
		{"invalid UTF-8", start + line(1, 1, "0", KindNote, "\"text\":\"caf\xe9\"") + end(2),
			2, "text", "invalid UTF-8"},
		{"lone high surrogate", start + line(1, 1, "0", KindNote, `"text":"\ud800x"`) + end(2),
			2, "text", "unpaired UTF-16 surrogate"},
		{"lone low surrogate in a key", start + line(1, 1, "0", KindToolCall, `"name":"t","args":{"\udc00":1}`) + end(2),
			2, "args", "unpaired UTF-16 surrogate"},
		{"steps out of order", start + tool(2, 1, "0") + tool(1, 2, "0") + end(3),
			3, "step", "step 1 does not follow step 2"},
		{"two events at one step", start + tool(1, 1, "0") + tool(1, 2, "0") + end(2),
			3, "step", "step 1 does not follow step 1"},
		{"no events at all", "", 1, "kind", "the log is empty"},
		{"first event is not session_start", tool(0, 0, "0") + end(1), 1, "kind", "the first event is tool_call"},
		{"session_start not at step 0", line(1, 0, "0", KindSessionStart, "") + end(2), 1, "step", "session_start is at step 1"},
		{"a second session_start", start + line(1, 0, "0", KindSessionStart, "") + end(2), 2, "kind", "a second session_start"},
		{"an event after session_end", start + end(1) + tool(2, 1, "0"), 3, "kind", "tool_call after session_end"},
		{"two session_ends", start + end(1) + end(2), 3, "kind", "session_end after session_end"},
		{"seq repeats in a lane", start + tool(1, 1, "0") + tool(2, 1, "0") + end(3), 3, "seq", "seq 1 in lane 0 does not follow seq 1"},
		{"seq goes back in a lane", start + tool(1, 1, "0") + tool(2, 0, "0") + end(3), 3, "seq", "seq 0 in lane 0 does not follow seq 1"},
		{"seq skips with no unused step", start + tool(1, 1, "0") + tool(2, 3, "0") + end(3), 3, "seq", "skips 1 seq number(s) before 3, but only 0"},
		{"child lane starts late", start + tool(1, 2, "0.1") + end(2), 2, "seq", "lane 0.1 skips 2"},
		{"negative seq", start + tool(1, -1, "0") + end(2), 2, "seq", "negative"},
		{"empty lane", start + tool(1, 1, "") + end(2), 2, "lane", "the lane is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(forge(t, tc.log, nil))
			var ce *CorruptEventError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v (%T), want *CorruptEventError", err, err)
			}
			wantOffset := int64(len(strings.Join(strings.SplitAfter(tc.log, "\n")[:tc.line-1], "")))
			if ce.Line != tc.line || ce.Offset != wantOffset || ce.Field != tc.field || !strings.Contains(ce.Error(), tc.msg) {
				t.Fatalf("got line %d offset %d field %q: %v\nwant line %d offset %d field %q containing %q",
					ce.Line, ce.Offset, ce.Field, ce, tc.line, wantOffset, tc.field, tc.msg)
			}
		})
	}
}

// TestOpenAcceptsWhatARecorderWrites: skipped steps and the seq numbers the failed calls and the
// session markers consumed, concurrent lanes, and a run that crashed before session_end.
func TestOpenAcceptsWhatARecorderWrites(t *testing.T) {
	cases := []struct {
		name     string
		log      string
		complete bool
	}{
		{"markers take seq numbers in the root lane", start + tool(1, 1, "0") + line(2, 3, "0", KindSessionEnd, `"ok":true`), true},
		{"markers numbered 0 by hand", start + tool(1, 0, "0") + tool(2, 1, "0") + end(3), true},
		{"a failed call left step 2 and seq 2 unused", start + tool(1, 1, "0") + tool(3, 3, "0") + end(4), true},
		{"interleaved lanes", start + tool(1, 1, "0") + tool(2, 0, "0.1") + tool(3, 2, "0") + tool(4, 1, "0.1") + end(5), true},
		{"crashed before session_end", start + tool(1, 1, "0"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(forge(t, tc.log, nil))
			if err != nil {
				t.Fatal(err)
			}
			err = s.CheckComplete()
			if tc.complete != (err == nil) || (!tc.complete && !errors.Is(err, ErrIncomplete)) {
				t.Fatalf("CheckComplete() = %v, complete %v", err, tc.complete)
			}
		})
	}
}

// TestOpenChecksMetaAndReferencedFiles covers the errors that are not about a line of the log.
func TestOpenChecksMetaAndReferencedFiles(t *testing.T) {
	good := start + tool(1, 1, "0") + end(2)
	ref := func(field, hash string) string {
		return start + line(1, 1, "0", KindToolCall, `"name":"t","args":{},"blobs":{"`+field+`":"`+hash+`"}`) + end(2)
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) string
		check func(err error) bool
	}{
		{"meta.json undercounts the events without a rehash", func(t *testing.T) string {
			dir := forge(t, good, nil)
			meta, _ := ReadMeta(dir)
			meta.Events = 2
			writeMeta(t, dir, meta)
			return dir
		}, func(err error) bool {
			var me *CorruptMetaError
			return errors.As(err, &me) && me.Field == "events" && strings.Contains(err.Error(), "records 2 events")
		}},
		{"meta.json is not JSON", func(t *testing.T) string {
			dir := forge(t, good, nil)
			_ = os.WriteFile(filepath.Join(dir, MetaFile), []byte("{oops"), 0o644)
			return dir
		}, isCorruptMeta("")},
		{"meta.json has a duplicate key", func(t *testing.T) string {
			dir := forge(t, good, nil)
			data, _ := os.ReadFile(filepath.Join(dir, MetaFile))
			_ = os.WriteFile(filepath.Join(dir, MetaFile), []byte(strings.Replace(string(data), `{"id":"forged"`, `{"id":"forged","id":"other"`, 1)), 0o644)
			return dir
		}, isCorruptMeta("id")},
		{"eventsHash is not hex", func(t *testing.T) string {
			dir := forge(t, good, nil)
			meta, _ := ReadMeta(dir)
			meta.EventsHash = strings.Repeat("z", 64)
			writeMeta(t, dir, meta)
			return dir
		}, isCorruptMeta("eventsHash")},
		{"events.jsonl is missing", func(t *testing.T) string {
			dir := forge(t, good, nil)
			_ = os.Remove(filepath.Join(dir, EventsFile))
			return dir
		}, func(err error) bool {
			var me *MissingError
			return errors.As(err, &me) && errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(me.Object, EventsFile)
		}},
		{"a referenced blob is missing", func(t *testing.T) string {
			return forge(t, ref("result", blobOf(`[1]`)), nil)
		}, func(err error) bool {
			var me *MissingError
			return errors.As(err, &me) && me.Field == "result" && me.Step == 1
		}},
		{"a blob reference is not a digest", func(t *testing.T) string {
			return forge(t, ref("result", "../../etc/passwd"), nil)
		}, isBlobRef("not a sha256 hex digest")},
		{"a blob reference names no field", func(t *testing.T) string {
			return forge(t, ref("name", blobOf(`"x"`)), map[string]string{blobOf(`"x"`): `"x"`})
		}, isBlobRef("not a field that can be stored as a blob")},
		{"a field both inline and in a blob", func(t *testing.T) string {
			return forge(t, start+line(1, 1, "0", KindToolCall, `"name":"t","args":{},"result":[0],"blobs":{"result":"`+blobOf(`[1]`)+`"}`)+end(2),
				map[string]string{blobOf(`[1]`): `[1]`})
		}, isBlobRef("also stored inline")},
		{"a duplicate key in a blob", func(t *testing.T) string {
			return forge(t, ref("result", blobOf(`{"a":1,"a":2}`)), map[string]string{blobOf(`{"a":1,"a":2}`): `{"a":1,"a":2}`})
		}, isBlobRef(`duplicate key "a"`)},
		{"a blob that is not JSON", func(t *testing.T) string {
			return forge(t, ref("result", blobOf(`nope`)), map[string]string{blobOf(`nope`): `nope`})
		}, isBlobRef("not JSON")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.setup(t))
			if !tc.check(err) {
				t.Fatalf("got %v (%T)", err, err)
			}
		})
	}
}

func isCorruptMeta(field string) func(error) bool {
	return func(err error) bool {
		var me *CorruptMetaError
		return errors.As(err, &me) && me.Field == field
	}
}

func isBlobRef(msg string) func(error) bool {
	return func(err error) bool {
		var be *BlobRefError
		return errors.As(err, &be) && strings.Contains(err.Error(), msg)
	}
}

// TestEditedLogIsReportedAsTamperedFirst: when the events hash does not match, that is the report,
// even if the edit also broke a line.
func TestEditedLogIsReportedAsTamperedFirst(t *testing.T) {
	dir := forge(t, start+tool(1, 1, "0")+end(2), nil)
	_ = os.WriteFile(filepath.Join(dir, EventsFile), []byte(start+tool(1, 1, "0")+tool(1, 2, "0")+end(2)), 0o644)
	var dm *DigestMismatchError
	if _, err := Open(dir); !errors.As(err, &dm) {
		t.Fatalf("got %v, want *DigestMismatchError", err)
	}
}

func TestCheckJSONTextAcceptsValidText(t *testing.T) {
	for _, doc := range []string{`{}`, `[]`, `{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, `"\ud83d\ude00 é \u00e9 \"\\\/\b\f\n\r\t"`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17}`,
		` [ 1 , -2.5e3 , true , false , null ] `} {
		if err := checkJSONText([]byte(doc), nil); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	many := `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":3}`
	var te *TextError
	if err := checkJSONText([]byte(many), nil); !errors.As(err, &te) || !strings.Contains(te.Msg, `duplicate key "k3"`) {
		t.Errorf("a duplicate among many keys: %v", err)
	}
}
