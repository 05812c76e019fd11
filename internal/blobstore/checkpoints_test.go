package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// checkpointClock advances a second per call, so checkpoints order deterministically.
func checkpointClock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

// workspace writes files (path → content) into a fresh directory.
func workspace(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckpointFileIdenticalToASessionBlobIsNotUploadedAgain(t *testing.T) {
	dir, _, store, mem := memSession(t)
	if _, err := store.Push(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(dir, session.BlobsDir))
	if err != nil || len(ents) == 0 {
		t.Fatalf("the session has no blobs: %v", err)
	}
	shared, err := os.ReadFile(filepath.Join(dir, session.BlobsDir, ents[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	fresh := []byte("a file no session holds")
	ws := workspace(t, map[string][]byte{"copy-of-tool-result.json": shared, "notes.txt": fresh})

	c, err := store.Checkpoints().Create(context.Background(), ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "s1"}, Now: checkpointClock()})
	if err != nil {
		t.Fatal(err)
	}
	if c.Stats.UploadedBlobs != 1 || c.Stats.IncrementalBytes != int64(len(fresh)) {
		t.Errorf("capture uploaded %d blobs, %d bytes; want 1 blob of %d bytes (the session's blob is shared)",
			c.Stats.UploadedBlobs, c.Stats.IncrementalBytes, len(fresh))
	}
	if n := mem.PutCount(store.Layout().Blob(sha(shared))); n != 1 {
		t.Errorf("the shared blob was put %d times, want once (by the push)", n)
	}
	if _, ok := mem.Bytes(store.Layout().CheckpointManifest(c.ID)); !ok {
		t.Errorf("no manifest at %s", store.Layout().CheckpointManifest(c.ID))
	}
	list, err := store.Checkpoints().List(context.Background())
	if err != nil || len(list) != 1 || list[0].ID != c.ID {
		t.Fatalf("List = %+v, %v; want the one checkpoint %s", list, err, c.ID)
	}
}

func TestCheckpointBlobPutRefusesBytesThatDoNotHashToTheirName(t *testing.T) {
	_, _, store, mem := memSession(t)
	blobs := store.Checkpoints().Blobs
	ctx := context.Background()
	data := []byte("the real bytes")
	big := bytes.Repeat([]byte("0123456789abcdef"), spoolInMemory/16+100) // spooled through a file

	for _, tc := range []struct {
		name string
		hash string
		size int64
		body []byte
	}{
		{"other bytes", sha(data), int64(len(data)), []byte("other bytes!!!")},
		{"shorter than announced", sha(data), int64(len(data)) + 1, data},
		{"longer than announced", sha(data), int64(len(data)) - 1, data},
		{"big, one byte changed", sha(big), int64(len(big)), append(bytes.Clone(big[:len(big)-1]), 'X')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := blobs.Put(ctx, tc.hash, tc.size, bytes.NewReader(tc.body)); err == nil {
				t.Fatal("Put stored bytes that are not the blob")
			}
			if _, ok := mem.Bytes(store.Layout().Blob(tc.hash)); ok {
				t.Fatal("an object was stored under the hash anyway")
			}
		})
	}
	for _, b := range [][]byte{data, big} {
		if err := blobs.Put(ctx, sha(b), int64(len(b)), bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		rc, err := blobs.Get(ctx, sha(b))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("Get returned %d bytes (%v), want the %d stored", len(got), err, len(b))
		}
	}
}

func TestCheckpointRestoreRefusesABlobDamagedInTheStore(t *testing.T) {
	_, _, store, mem := memSession(t)
	ctx := context.Background()
	cps := store.Checkpoints()
	ws := workspace(t, map[string][]byte{"a.txt": []byte("alpha"), "b.txt": []byte("beta")})
	c, err := cps.Create(ctx, ws, checkpoint.CaptureOptions{Now: checkpointClock()})
	if err != nil {
		t.Fatal(err)
	}
	mem.Set(store.Layout().Blob(sha([]byte("beta"))), []byte("BETA"))
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}

	var dm *session.DigestMismatchError
	if _, err := cps.Blobs.Get(ctx, sha([]byte("beta"))); !errors.As(err, &dm) || dm.Got != sha([]byte("BETA")) {
		t.Fatalf("Get of a damaged blob: %v, want a *session.DigestMismatchError", err)
	}
	if _, err := cps.Blobs.Get(ctx, sha([]byte("never stored"))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get of a missing blob: %v, want fs.ErrNotExist", err)
	}
	_, err = cps.Restore(ctx, ws, c.ID, checkpoint.RestoreOptions{Guard: checkpoint.GuardOff})
	var bh *checkpoint.BlobHashError
	if !errors.As(err, &bh) || bh.Path != "b.txt" {
		t.Fatalf("restore with a damaged blob: %v, want a *checkpoint.BlobHashError for b.txt", err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "changed" {
		t.Errorf("a.txt = %q: the restore wrote before every blob was checked", got)
	}
}

func TestCheckpointManifestsAreVerifiedBothWays(t *testing.T) {
	_, _, store, mem := memSession(t)
	ctx := context.Background()
	ms := store.Checkpoints().Manifests
	data := []byte(`{"schemaVersion":1}`)
	id := sha(data)

	if err := ms.Put(ctx, sha([]byte("other")), data); err == nil {
		t.Fatal("Put stored a manifest under an id it does not hash to")
	}
	if err := ms.Put(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	if got, err := ms.Get(ctx, id); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	mem.Set(store.Layout().CheckpointManifest(id), []byte(`{"schemaVersion":2}`))
	var te *checkpoint.TamperedError
	if got, err := ms.Get(ctx, id); !errors.As(err, &te) || got != nil {
		t.Fatalf("Get of a tampered manifest = %q, %v; want nothing and a *checkpoint.TamperedError", got, err)
	}
	if _, err := ms.Get(ctx, sha([]byte("none"))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get of a missing manifest: %v, want fs.ErrNotExist", err)
	}

	// Only <prefix>/checkpoints/<digest>/manifest.json is a checkpoint.
	mem.Set(store.Layout().CheckpointsPrefix()+id+"/other.json", data)
	mem.Set(store.Layout().CheckpointsPrefix()+"not-a-digest/manifest.json", data)
	ids, err := ms.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{id}, ids); d != "" {
		t.Errorf("List (-want +got):\n%s", d)
	}
	if err := ms.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Get(ctx, id); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get after Delete: %v", err)
	}
}

func TestCheckpointIDFromManifestKey(t *testing.T) {
	l, err := NewLayout("team/prod")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("ab", 32)
	for key, want := range map[string]string{
		l.CheckpointManifest(id):                      id,
		"team/prod/checkpoints/" + id + "/other.json": "",
		"team/prod/checkpoints/" + id:                 "",
		"other/checkpoints/" + id + "/manifest.json":  "",
		"team/prod/checkpoints/../x/manifest.json":    "",
		"team/prod/checkpoints/a/b/manifest.json":     "",
		"team/prod/sessions/" + id + "/manifest.json": "",
	} {
		got, ok := l.CheckpointIDFromManifestKey(key)
		if got != want || ok != (want != "") {
			t.Errorf("CheckpointIDFromManifestKey(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
}

// touchFails is a store whose renewal in place fails the way a server answering a copy with an
// empty 200 does.
type touchFails struct{ *MemObjectStore }

func (touchFails) Touch(context.Context, string, int64) (bool, error) {
	return false, errors.New(`s3 touch blobs/sha256/ab: 200 OK`)
}

// A capture that finds a blob stored and cannot renew it in place stores it again rather than
// failing: the renewal is what protects the blob from a sweep, and sending it again renews it.
func TestCheckpointBlobWhoseRenewalFailsIsStoredAgain(t *testing.T) {
	mem := NewMemObjectStore()
	store := NewSessionStore(touchFails{mem}, Layout{}, StoreOptions{})
	blobs := store.Checkpoints()
	data := []byte("a file two captures share")
	ws := workspace(t, map[string][]byte{"shared.txt": data})
	for i := range 2 {
		if _, err := blobs.Create(context.Background(), ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "s1"}, Now: checkpointClock()}); err != nil {
			t.Fatalf("capture %d: %v", i+1, err)
		}
	}
	if n := mem.PutCount(store.Layout().Blob(sha(data))); n != 2 {
		t.Fatalf("the shared blob was put %d times, want twice: once stored, once renewed by sending it again", n)
	}
}

// A capture counts the blob it found stored and sent again because renewing it in place failed,
// apart from the blobs it uploaded as new, even when the capture writes no new checkpoint.
func TestCheckpointCaptureCountsTheBlobsItSentAgain(t *testing.T) {
	mem := NewMemObjectStore()
	store := NewSessionStore(touchFails{mem}, Layout{}, StoreOptions{})
	blobs := store.Checkpoints()
	data := []byte("a file two captures share")
	ws := workspace(t, map[string][]byte{"shared.txt": data})
	var got []checkpoint.CaptureStats
	for i := range 2 {
		c, err := blobs.Create(context.Background(), ws, checkpoint.CaptureOptions{Anchor: checkpoint.Anchor{Session: "s1"}, Now: checkpointClock()})
		if err != nil {
			t.Fatalf("capture %d: %v", i+1, err)
		}
		got = append(got, c.Stats)
	}
	if got[0].UploadedBlobs != 1 || got[0].ResentBlobs != 0 {
		t.Errorf("first capture: %+v; want the blob uploaded, none sent again", got[0])
	}
	if got[1].UploadedBlobs != 0 || got[1].ResentBlobs != 1 || got[1].ResentBytes != int64(len(data)) {
		t.Errorf("second capture: %+v; want no blob uploaded and 1 of %d bytes sent again", got[1], len(data))
	}
}
