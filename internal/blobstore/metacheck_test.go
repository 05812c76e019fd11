package blobstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

const validMetaJSON = `{"id":"s1","createdAt":1700000000000,"agentRewindVersion":"v1","schemaVersion":2,"fingerprintMode":"strict",` +
	`"redaction":{"enabled":true,"patterns":["aws-key"],"counts":{"aws-key":1}},` +
	`"eventsHash":"0000000000000000000000000000000000000000000000000000000000000000"}`

// TestDecodeMetaRefusesWhatEncodingJSONIgnores: push and pull decode meta.json with session.DecodeMeta,
// the one strict decoder.
func TestDecodeMetaRefusesWhatEncodingJSONIgnores(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"valid", "", "", ""},
		{"a renamed key", `"createdAt"`, `"createdAu"`, `unknown key "createdAu"`},
		{"a key in another case, which encoding/json would match", `"createdAt"`, `"CreatedAt"`, `unknown key "CreatedAt"`},
		{"a renamed fingerprintMode", `"fingerprintMode"`, `"fingerprintModd"`, `unknown key "fingerprintModd"`},
		{"a renamed nested key", `"enabled"`, `"enabler"`, `redaction: unknown key "enabler"`},
		{"a missing required key", `"fingerprintMode":"strict",`, ``, `missing key "fingerprintMode"`},
		{"a missing nested key", `"enabled":true,`, ``, `redaction: missing key "enabled"`},
		{"a key given twice", `"schemaVersion":2,`, `"schemaVersion":2,"schemaVersion":1,`, `"schemaVersion" given twice`},
		{"data after the object", `"}`, `"} {}`, "data after the object"},
		{"not an object", validMetaJSON, `[1]`, "not a JSON object"},
	} {
		data := validMetaJSON
		if tc.from != "" {
			data = strings.Replace(data, tc.from, tc.to, 1)
			if data == validMetaJSON {
				t.Fatalf("%s: the test does not change meta.json", tc.name)
			}
		}
		meta, err := session.DecodeMeta([]byte(data), "meta.json")
		if tc.want == "" {
			if err != nil || meta.ID != "s1" || meta.Redaction.Counts["aws-key"] != 1 {
				t.Errorf("%s: %+v, %v", tc.name, meta, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %s", tc.name, err, tc.want)
		}
	}
}

func TestMetaSumRecordIsSha256sumsFormatAndRefusesAnyOtherByte(t *testing.T) {
	rec := metaSumRecord([]byte(validMetaJSON))
	h, ok := parseMetaSum(rec)
	if !ok || h != sha256Hex([]byte(validMetaJSON)) || string(rec) != h+"  meta.json\n" {
		t.Fatalf("record %q parses to %q, %v", rec, h, ok)
	}
	for i := range rec { // every single-bit flip is refused or names another hash
		for bit := range 8 {
			bad := bytes.Clone(rec)
			bad[i] ^= 1 << bit
			if got, ok := parseMetaSum(bad); ok && got == h {
				t.Fatalf("flipping bit %d of byte %d still names the same hash", bit, i)
			}
		}
	}
}

// TestPullVerifiesMetaJSON flips one bit of a stored meta.json so that it stays valid JSON and
// decodes (a renamed key that encoding/json would ignore): the pull must refuse it, and a re-push
// of the intact session must repair it rather than report a conflict.
func TestPullVerifiesMetaJSON(t *testing.T) {
	for _, tc := range []struct {
		key string
		at  int // the byte of key flipped
	}{{`"createdAt"`, 9}, {`"fingerprintMode"`, 15}, {`"schemaVersion": 3`, 17}} {
		key := tc.key
		t.Run(key, func(t *testing.T) {
			dir, _, store, mem := memSession(t)
			ctx := context.Background()
			if _, err := store.Push(ctx, dir); err != nil {
				t.Fatal(err)
			}
			metaKey := store.Layout().SessionMeta("s1")
			data, _ := mem.Bytes(metaKey)
			i := bytes.Index(data, []byte(key))
			if i < 0 {
				t.Fatalf("meta.json has no %s:\n%s", key, data)
			}
			data[i+tc.at] ^= 0x01 // "createdAu", "fingerprintModd", "schemaVersion": 2
			mem.Set(metaKey, data)
			out := filepath.Join(t.TempDir(), "out")
			_, err := store.Pull(ctx, "s1", out)
			var dm *session.DigestMismatchError
			if !errors.As(err, &dm) || dm.Object != metaKey || !strings.Contains(err.Error(), "read 3 times") {
				t.Fatalf("pull with a damaged meta.json: %v, want a DigestMismatchError naming %s", err, metaKey)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused pull left %s", out)
			}
			res, err := store.Push(ctx, dir)
			if err != nil || !res.AlreadyCommitted {
				t.Fatalf("re-push of the intact session over its damaged meta.json: %+v, %v; want a repair, not a conflict", res, err)
			}
			if _, err := store.Pull(ctx, "s1", out); err != nil {
				t.Fatalf("pull after the repair: %v", err)
			}
			assertSameSession(t, dir, out)
		})
	}
}

func TestPullRefusesAMetaJSONWithoutItsRecordAndARePushAddsIt(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	_ = mem.Delete(ctx, metaSumKey(store.Layout(), "s1", mustRead(t, filepath.Join(dir, session.MetaFile)))) // as an older agentrewind pushed it
	if _, err := store.Pull(ctx, "s1", filepath.Join(t.TempDir(), "out")); !errors.Is(err, ErrMetaUnverified) {
		t.Fatalf("pull without meta.json.sha256: %v, want ErrMetaUnverified", err)
	}
	if list, err := store.List(ctx); err != nil || len(list) != 1 || !strings.Contains(list[0].Problem, ".sha256 is missing") {
		t.Fatalf("ls without meta.json.sha256: %+v, %v; want the session listed with the problem", list, err)
	}
	res, err := store.Push(ctx, dir)
	if err != nil || !res.AlreadyCommitted || res.BytesSent != int64(len(metaSumRecord(mustRead(t, filepath.Join(dir, session.MetaFile))))) {
		t.Fatalf("re-push: %+v, %v; want the record added and nothing else sent", res, err)
	}
	if _, err := store.Pull(ctx, "s1", filepath.Join(t.TempDir(), "out")); err != nil {
		t.Fatalf("pull after the re-push: %v", err)
	}
}

func TestPushRefusesAStoredMetaJSONWithAnUnknownKeyEvenWhenItsRecordMatches(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	l := store.Layout()
	data, _ := mem.Bytes(l.SessionMeta("s1"))
	data = bytes.Replace(data, []byte(`"fingerprintMode"`), []byte(`"fingerprintMod3"`), 1)
	mem.Set(l.SessionMeta("s1"), data)
	mem.Set(metaSumKey(l, "s1", data), metaSumRecord(data))
	_, err := store.Pull(ctx, "s1", filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(err.Error(), `unknown key "fingerprintMod3"`) {
		t.Fatalf("pull of a consistent meta.json with an unknown key: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestPushRefusesALocalMetaJSONWithAnUnknownKeyBeforeUploading(t *testing.T) {
	dir, _, store, mem := memSession(t)
	path := filepath.Join(dir, session.MetaFile)
	data := bytes.Replace(mustRead(t, path), []byte(`"createdAt"`), []byte(`"CreatedAt"`), 1)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := store.Push(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), `unknown key "CreatedAt"`) {
		t.Fatalf("push of a meta.json with an unknown key: %v", err)
	}
	if got := keys(t, mem, ""); len(got) != 0 {
		t.Fatalf("a refused push stored %v", got)
	}
}
