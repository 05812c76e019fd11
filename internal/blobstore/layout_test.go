package blobstore

import (
	"strings"
	"testing"
)

const hashA = "ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"

func TestLayoutSpellsTheDesignedKeys(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   map[string]string
	}{
		{"team/prod", map[string]string{
			"blob":       "team/prod/blobs/sha256/ab/" + hashA,
			"meta":       "team/prod/sessions/s-1/meta.json",
			"events":     "team/prod/sessions/s-1/events.jsonl",
			"vault":      "team/prod/sessions/s-1/vault." + hashA + ".enc",
			"index":      "team/prod/sessions/s-1/segments." + hashA + ".json",
			"metaSum":    "team/prod/sessions/s-1/meta.json." + hashA + ".sha256",
			"manifest":   "team/prod/checkpoints/c-1/manifest.json",
			"result":     "team/prod/results/uid-1.json",
			"blobs/":     "team/prod/blobs/sha256/",
			"sessions/":  "team/prod/sessions/",
			"normalised": "team/prod",
		}},
		{"/edge/", map[string]string{"meta": "edge/sessions/s-1/meta.json", "normalised": "edge"}},
		{"", map[string]string{"blob": "blobs/sha256/ab/" + hashA, "vault": "sessions/s-1/vault." + hashA + ".enc", "sessions/": "sessions/", "normalised": ""}},
	} {
		l, err := NewLayout(tc.prefix)
		if err != nil {
			t.Fatalf("NewLayout(%q): %v", tc.prefix, err)
		}
		got := map[string]string{"blob": l.Blob(hashA), "meta": l.SessionMeta("s-1"), "events": l.SessionEvents("s-1"), "vault": l.SessionVault("s-1", hashA),
			"index": l.SessionSegments("s-1", hashA), "metaSum": l.SessionMetaSum("s-1", hashA),
			"manifest": l.CheckpointManifest("c-1"), "result": l.Result("uid-1"), "blobs/": l.BlobsPrefix(),
			"sessions/": l.SessionsPrefix(), "normalised": l.Prefix()}
		for k, want := range tc.want {
			if got[k] != want {
				t.Errorf("prefix %q: %s key %q, want %q", tc.prefix, k, got[k], want)
			}
		}
	}
}

func TestLayoutRefusesAmbiguousPrefixes(t *testing.T) {
	for _, p := range []string{"a//b", "a/./b", "../x", "a/.."} {
		if _, err := NewLayout(p); err == nil {
			t.Errorf("NewLayout(%q) accepted a prefix with an empty, . or .. segment", p)
		}
	}
}

// TestLayoutTellsASessionsRecordsAndIndexes: the sweep marks from every index of a session, and a
// read looks for meta.json's record among the session's records; nothing else may pass for either.
func TestLayoutTellsASessionsRecordsAndIndexes(t *testing.T) {
	l, _ := NewLayout("p")
	for key, want := range map[string]bool{
		"p/sessions/s-1/segments.json":                   true,
		"p/sessions/s-1/segments." + hashA + ".json":     true,
		"p/sessions/s-1/segments." + hashA[1:] + ".json": false,
		"p/sessions/s-1/segments.x.json":                 false,
		"p/sessions/s-2/segments." + hashA + ".json":     false,
		"p/sessions/s-1/events.jsonl":                    false,
	} {
		if got := l.IsSessionIndex("s-1", key); got != want {
			t.Errorf("IsSessionIndex(s-1, %q) = %v, want %v", key, got, want)
		}
	}
	for key, want := range map[string]string{
		"p/sessions/s-1/meta.json.sha256":                   "legacy",
		"p/sessions/s-1/meta.json." + hashA + ".sha256":     hashA,
		"p/sessions/s-1/meta.json." + hashA[1:] + ".sha256": "",
		"p/sessions/s-1/meta.json.x.sha256":                 "",
		"p/sessions/s-2/meta.json." + hashA + ".sha256":     "",
		"p/sessions/s-1/meta.json":                          "",
	} {
		h, legacy, ok := l.MetaSumFromKey("s-1", key)
		got := h
		if legacy {
			got = "legacy"
		}
		if got != want || ok != (want != "") {
			t.Errorf("MetaSumFromKey(s-1, %q) = %q, %v, %v; want %q", key, h, legacy, ok, want)
		}
	}
}

func TestLayoutParsesKeysBack(t *testing.T) {
	l, _ := NewLayout("p")
	for key, want := range map[string]string{
		"p/sessions/s-1/meta.json":      "s-1",
		"p/sessions/s-1/events.jsonl":   "",
		"p/sessions/s-1/vault.enc":      "",
		"p/sessions/s-1/x/meta.json":    "",
		"q/sessions/s-1/meta.json":      "",
		"p/sessions/..bad/meta.json":    "",
		"p/sessions/meta.json":          "",
		"p/sessions/a.b_c-d/meta.json":  "a.b_c-d",
		"p/blobs/sha256/ab/" + hashA:    "",
		"p/checkpoints/c/manifest.json": "",
	} {
		id, ok := l.SessionIDFromMetaKey(key)
		if id != want || ok != (want != "") {
			t.Errorf("SessionIDFromMetaKey(%q) = %q, %v; want %q", key, id, ok, want)
		}
	}
	if h, ok := l.BlobHashFromKey(l.Blob(hashA)); !ok || h != hashA {
		t.Errorf("BlobHashFromKey of a blob key: %q, %v", h, ok)
	}
	for _, key := range []string{"p/blobs/sha256/cd/" + hashA, "p/blobs/sha256/ab/" + hashA[:63], "p/sessions/s/meta.json"} {
		if _, ok := l.BlobHashFromKey(key); ok {
			t.Errorf("BlobHashFromKey(%q) accepted a key that is not a blob's", key)
		}
	}
}

func TestValidateIDAdmitsOnlyOneKeySegment(t *testing.T) {
	for id, ok := range map[string]bool{
		"0f0e2c1a-5d7b-4b7e-9c1d-2f3a4b5c6d7e": true, "run-1": true, "a.b_c": true, "A": true,
		"": false, ".": false, "..": false, "a/b": false, "-x": false, ".hidden": false, "a b": false,
		strings.Repeat("a", 253): true, strings.Repeat("a", 254): false,
	} {
		if err := ValidateID(id); (err == nil) != ok {
			t.Errorf("ValidateID(%q) = %v, want ok=%v", id, err, ok)
		}
	}
}
