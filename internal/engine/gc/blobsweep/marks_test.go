package blobsweep

import (
	"crypto/sha256"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMarkCacheRoundTripsAndRefusesDamage(t *testing.T) {
	entries := map[string]rootRefs{
		"p/sessions/a/events.jsonl":     {etag: "e1", size: 10, hashes: [][32]byte{sha256.Sum256([]byte("x")), sha256.Sum256([]byte("y"))}},
		"p/checkpoints/c/manifest.json": {etag: "e2", size: 7, hashes: [][32]byte{}},
		"p/sessions/b/events.jsonl":     {etag: "e3", size: 1 << 40, hashes: [][32]byte{sha256.Sum256([]byte("z"))}},
	}
	data := encodeCache(entries)
	got, err := decodeCache(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entries, got, cmp.AllowUnexported(rootRefs{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for i := range data { // every single-byte change is refused
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x01
		if _, err := decodeCache(bad); err == nil {
			t.Fatalf("a cache changed at byte %d was accepted", i)
		}
	}
	if _, err := decodeCache(data[:len(data)-1]); err == nil {
		t.Fatal("a truncated cache was accepted")
	}
}

func TestMarkCacheEntryIsUsedOnlyForTheSameObject(t *testing.T) {
	e := rootRefs{etag: "abc", size: 5}
	tests := []struct {
		etag string
		size int64
		want bool
	}{{"abc", 5, true}, {"abd", 5, false}, {"abc", 6, false}, {"", 5, false}}
	for _, tt := range tests {
		if got := e.usable(tt.etag, tt.size); got != tt.want {
			t.Errorf("usable(%q, %d) = %v, want %v", tt.etag, tt.size, got, tt.want)
		}
	}
	if (rootRefs{size: 5}).usable("", 5) {
		t.Error("an entry without an ETag was used")
	}
}
