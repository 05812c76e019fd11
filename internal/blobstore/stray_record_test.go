package blobstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// flipFirstMetaRead damages the first answer to a GET of meta.json on the way, as a flipped bit in
// transit does; later reads are intact.
type flipFirstMetaRead struct {
	*MemObjectStore
	flipped bool
}

func (f *flipFirstMetaRead) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := f.MemObjectStore.Get(ctx, key)
	if err != nil || f.flipped || !strings.HasSuffix(key, "/meta.json") {
		return rc, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	f.flipped = true
	return io.NopCloser(bytes.NewReader(flipCreatedAt(data))), nil
}

// flipCreatedAt changes the last digit of meta.json's createdAt: still valid JSON naming the same log.
func flipCreatedAt(meta []byte) []byte {
	out := bytes.Clone(meta)
	loc := regexp.MustCompile(`"createdAt":\s*\d+`).FindIndex(out)
	out[loc[1]-1] ^= 0x01
	return out
}

// A push killed after its record and before its commit leaves the record under the id, and another
// session then commits there. That stray record must never let the killed session's re-push take the
// id over: not when a read of the winner's meta.json is damaged on the way, not when it is damaged at
// rest, not when the winner was stored in the older layout. The winner, pushed again, still repairs
// its own meta.json damaged at rest.
func TestAStrayRecordNeverLetsAPushReplaceAnotherSession(t *testing.T) {
	ctx := context.Background()
	a, b := rivalSessions(t)
	l := Layout{}
	metaKey := l.SessionMeta("run")
	setup := func(t *testing.T) (*MemObjectStore, []byte) {
		mem := killedLoserLeftovers(t, a, b)
		winner, _ := mem.Bytes(metaKey)
		return mem, winner
	}
	refused := func(t *testing.T, objs ObjectStore, mem *MemObjectStore, want []byte) {
		t.Helper()
		_, err := NewSessionStore(objs, l, StoreOptions{}).Push(ctx, a)
		if err == nil {
			t.Fatal("the killed session's re-push succeeded over another session")
		}
		if got, _ := mem.Bytes(metaKey); !bytes.Equal(got, want) {
			t.Fatalf("the re-push (%v) replaced the stored meta.json", err)
		}
	}

	t.Run("a read damaged on the way", func(t *testing.T) {
		mem, winner := setup(t)
		refused(t, &flipFirstMetaRead{MemObjectStore: mem}, mem, winner)
	})
	t.Run("the winner's meta.json damaged at rest", func(t *testing.T) {
		mem, winner := setup(t)
		damaged := flipCreatedAt(winner)
		mem.Set(metaKey, damaged)
		refused(t, mem, mem, damaged)
		// The winner's own re-push repairs it.
		if _, err := NewSessionStore(mem, l, StoreOptions{}).Push(ctx, b); err != nil {
			t.Fatalf("the winner's re-push over its damaged meta.json: %v", err)
		}
		if got, _ := mem.Bytes(metaKey); !bytes.Equal(got, winner) {
			t.Fatal("the winner's re-push did not restore its meta.json")
		}
	})
	t.Run("the winner in the older layout", func(t *testing.T) {
		mem, winner := setup(t)
		rename := func(from, to string) {
			data, ok := mem.Bytes(from)
			if !ok {
				t.Fatalf("no %s", from)
			}
			mem.Set(to, data)
			_ = mem.Delete(ctx, from)
		}
		hashes := storedHashes(mem, l, "run")
		rename(l.SessionMetaSum("run", sha256Hex(winner)), l.SessionLegacyMetaSum("run"))
		rename(l.SessionSegments("run", hashes.EventsHash), l.SessionLegacySegments("run"))
		rename(l.SessionVault("run", hashes.VaultHash), l.SessionLegacyVault("run"))
		_, err := NewSessionStore(mem, l, StoreOptions{}).Push(ctx, a)
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			t.Fatalf("the killed session's re-push over an older-layout session: %v, want a conflict", err)
		}
		if got, _ := mem.Bytes(metaKey); !bytes.Equal(got, winner) {
			t.Fatal("the re-push replaced the stored meta.json")
		}
	})
}

// killedLoserLeftovers is a store where session b committed while a push of a, different content
// under the same id, had stored its blobs, record, index and vault and was then killed before it
// could withdraw them.
func killedLoserLeftovers(t *testing.T, a, b string) *MemObjectStore {
	t.Helper()
	ctx := context.Background()
	l := Layout{}
	loser := NewMemObjectStore()
	if _, err := NewSessionStore(loser, l, StoreOptions{}).Push(ctx, a); err != nil {
		t.Fatal(err)
	}
	mem := NewMemObjectStore()
	if _, err := NewSessionStore(mem, l, StoreOptions{}).Push(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, k := range loser.Keys("") {
		if _, taken := mem.Bytes(k); !taken {
			data, _ := loser.Bytes(k)
			mem.Set(k, data)
		}
	}
	return mem
}

// What a push killed after losing the id leaves under it is removed by the next push that finds
// the session committed: the winner's pushed again, or the loser's, which fails with a conflict.
// Only the committed session's objects stay under the id, and they still pull.
func TestTheNextPushRemovesWhatAKilledLoserLeftUnderTheID(t *testing.T) {
	ctx := context.Background()
	a, b := rivalSessions(t)
	l := Layout{}
	clean := NewMemObjectStore()
	if _, err := NewSessionStore(clean, l, StoreOptions{}).Push(ctx, b); err != nil {
		t.Fatal(err)
	}
	want := clean.Keys(l.SessionPrefix("run"))
	for name, dir := range map[string]string{"the winner's": b, "the loser's": a} {
		t.Run(name, func(t *testing.T) {
			mem := killedLoserLeftovers(t, a, b)
			if got := mem.Keys(l.SessionPrefix("run")); len(got) == len(want) {
				t.Fatalf("no leftovers to remove: %v", got)
			}
			_, err := NewSessionStore(mem, l, StoreOptions{}).Push(ctx, dir)
			var conflict *ConflictError
			if (dir == a) != errors.As(err, &conflict) {
				t.Fatalf("pushing %s again: %v", name, err)
			}
			if got := mem.Keys(l.SessionPrefix("run")); !slices.Equal(got, want) {
				t.Fatalf("under the id after the push: %v\nwant the committed session's only: %v", got, want)
			}
			if _, err := NewSessionStore(mem, l, StoreOptions{}).Pull(ctx, "run", filepath.Join(t.TempDir(), "pulled")); err != nil {
				t.Fatalf("the committed session does not pull: %v", err)
			}
		})
	}
}

// rivalSessions records two different sessions under the one id "run", each with a vault.
func rivalSessions(t *testing.T) (a, b string) {
	t.Helper()
	root := t.TempDir()
	a, b = filepath.Join(root, "a"), filepath.Join(root, "b")
	recordSession(t, a, "run", "", payloads(1, 3, 2<<10), testVault)
	recordSession(t, b, "run", "", payloads(100, 3, 2<<10), sealedBytes(7, 64))
	return a, b
}
