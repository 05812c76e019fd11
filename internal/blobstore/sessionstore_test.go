package blobstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// memSession records a session with two small blobs, one shared payload and a vault, and returns
// its directory and a session store over a fresh in-memory object store.
func memSession(t *testing.T) (string, session.Meta, *SessionStore, *MemObjectStore) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s1")
	meta := writeSession(t, dir, "s1", "", payloads(1, 3, 4<<10))
	mem := NewMemObjectStore()
	layout, err := NewLayout("pfx")
	if err != nil {
		t.Fatal(err)
	}
	return dir, meta, NewSessionStore(mem, layout, StoreOptions{Parallelism: 2}), mem
}

func TestPushRefusesAnUncommittedSession(t *testing.T) {
	dir := t.TempDir()
	w, err := session.Create(dir, session.Meta{ID: "open"}, session.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(session.Event{Kind: session.KindSessionStart}); err != nil {
		t.Fatal(err)
	}
	mem := NewMemObjectStore()
	_, err = NewSessionStore(mem, Layout{}, StoreOptions{}).Push(context.Background(), dir)
	if !errors.Is(err, session.ErrNotCommitted) {
		t.Fatalf("push of a session without meta.json: %v, want ErrNotCommitted", err)
	}
	if got := keys(t, mem, ""); len(got) != 0 {
		t.Fatalf("a refused push stored %v", got)
	}
}

func TestPushStoresBlobsThenSegmentsThenTheirIndexThenVaultThenMetaSumThenMetaLast(t *testing.T) {
	dir, meta, store, mem := memSession(t)
	var mu sync.Mutex
	var order []string
	mem.BeforePut = func(key string) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, key)
		return nil
	}
	res, err := store.Push(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	l := store.Layout()
	n := 3 + res.Segments
	metaBytes := mustRead(t, filepath.Join(dir, session.MetaFile))
	if res.Segments < 2 || len(order) != n+4 || order[n] != l.SessionSegments(meta.ID, meta.EventsHash) || order[n+1] != l.SessionVault(meta.ID, meta.VaultHash) ||
		order[n+2] != metaSumKey(l, meta.ID, metaBytes) || order[n+3] != l.SessionMeta(meta.ID) {
		t.Fatalf("upload order %v: want 3 blobs and the log's segments (%d), then the segment index, then the vault, then meta.json's record, then meta.json", order, res.Segments)
	}
	for _, key := range order[:n] {
		if !strings.HasPrefix(key, "pfx/blobs/sha256/") {
			t.Errorf("first uploads must be blobs and segments, got %s", key)
		}
	}
	if res.Blobs != 3 || res.BlobsUploaded != 3 || res.BlobsSkipped != 0 || res.AlreadyCommitted ||
		!res.HasVault || !res.VaultUploaded || res.VaultSkipped || res.VaultSkipReason != "" {
		t.Errorf("result %+v", res)
	}
}

func TestPushStoresTheSealedVaultUnderItsLayoutKey(t *testing.T) {
	dir, meta, store, mem := memSession(t)
	if _, err := store.Push(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	key := "pfx/sessions/s1/vault." + meta.VaultHash + ".enc"
	if got := store.Layout().SessionVault("s1", meta.VaultHash); got != key {
		t.Fatalf("SessionVault(s1) = %s, want %s", got, key)
	}
	stored, ok := mem.Bytes(key)
	if !ok || !bytes.Equal(stored, testVault) {
		t.Fatalf("%s holds %d bytes (present %v), want the %d sealed bytes recorded", key, len(stored), ok, len(testVault))
	}
	if err := session.VerifyBlob(meta.VaultHash, stored); err != nil {
		t.Fatalf("the stored vault does not match meta.json's vaultHash: %v", err)
	}
	for _, k := range keys(t, mem, "") {
		if data, _ := mem.Bytes(k); k != key && bytes.Contains(data, testVault[:32]) {
			t.Errorf("%s carries the vault's bytes: only %s may", k, key)
		}
	}
}

func TestPushRefusesADeclaredVaultThatIsMissingOrAltered(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, path string)
		check func(t *testing.T, err error, path string)
	}{
		{"missing", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, err error, path string) {
			if !errors.Is(err, ErrVaultMissing) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), "copy back the vault.enc") {
				t.Fatalf("push without the declared vault: %v, want ErrVaultMissing naming %s and saying what to do", err, path)
			}
		}},
		{"altered", func(t *testing.T, path string) {
			altered := bytes.Clone(testVault)
			altered[7] ^= 1
			if err := os.WriteFile(path, altered, 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, err error, path string) {
			var dm *session.DigestMismatchError
			if !errors.As(err, &dm) || dm.Object != path || !strings.Contains(err.Error(), "copy back the vault.enc") {
				t.Fatalf("push with an altered vault: %v, want a DigestMismatchError naming %s and saying what to do", err, path)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _, store, mem := memSession(t)
			path := filepath.Join(dir, session.VaultFile)
			tc.spoil(t, path)
			_, err := store.Push(context.Background(), dir)
			tc.check(t, err, path)
			if got := keys(t, mem, ""); len(got) != 0 {
				t.Fatalf("a refused push stored %v", got)
			}
		})
	}
}

func TestASessionWithoutAVaultPushesAndPullsWithoutOne(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plain")
	meta := recordSession(t, dir, "plain", "", payloads(1, 2, 4<<10), nil)
	if meta.VaultHash != "" {
		t.Fatalf("meta declares vaultHash %q for a session recorded without a vault", meta.VaultHash)
	}
	mem := NewMemObjectStore()
	store := NewSessionStore(mem, Layout{}, StoreOptions{})
	ctx := context.Background()
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.HasVault || res.VaultUploaded || res.VaultSkipped {
		t.Errorf("push of a session without a vault: %+v", res)
	}
	assertNoVaultStored(t, mem)
	out := filepath.Join(t.TempDir(), "out")
	pulled, err := store.Pull(ctx, "plain", out)
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Vault {
		t.Errorf("pull of a session without a vault reports one: %+v", pulled)
	}
	assertSameSession(t, dir, out) // no vault.enc on either side
}

func TestPushLeavesAnUndeclaredVaultOnThisMachine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "older")
	recordSession(t, dir, "older", "", payloads(1, 2, 4<<10), nil)
	if err := os.WriteFile(filepath.Join(dir, session.VaultFile), testVault, 0o644); err != nil {
		t.Fatal(err)
	}
	mem := NewMemObjectStore()
	store := NewSessionStore(mem, Layout{}, StoreOptions{})
	ctx := context.Background()
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !res.VaultSkipped || !strings.Contains(res.VaultSkipReason, "vaultHash") || res.HasVault || res.VaultUploaded {
		t.Errorf("push of a session with an undeclared vault: %+v, want it skipped with a reason", res)
	}
	assertNoVaultStored(t, mem)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := store.Pull(ctx, "older", out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, session.VaultFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the pulled session has a vault it never declared: %v", err)
	}
}

// assertNoVaultStored checks that no object is a vault or carries testVault's bytes.
func assertNoVaultStored(t *testing.T, mem *MemObjectStore) {
	t.Helper()
	for _, key := range keys(t, mem, "") {
		if data, _ := mem.Bytes(key); strings.HasSuffix(key, session.VaultFile) || bytes.Contains(data, testVault[:32]) {
			t.Errorf("%s holds a vault the session does not declare", key)
		}
	}
}

// droppingStore acknowledges a Put of the keys matched by drop without storing it, as a proxy
// answering for the server would.
type droppingStore struct {
	ObjectStore
	drop func(key string) bool
}

func (d droppingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if d.drop(key) {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	return d.ObjectStore.Put(ctx, key, r, size)
}

func TestPushConfirmsTheVaultIsStoredBeforeCommitting(t *testing.T) {
	dir, meta, store, mem := memSession(t)
	vaultKey := store.Layout().SessionVault(meta.ID, meta.VaultHash)
	lying := NewSessionStore(droppingStore{mem, func(key string) bool { return key == vaultKey }}, store.Layout(), StoreOptions{})
	_, err := lying.Push(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), vaultKey) || !strings.Contains(err.Error(), "push again") {
		t.Fatalf("push whose vault upload was acknowledged but not stored: %v, want an error naming %s", err, vaultKey)
	}
	if _, ok := mem.Bytes(store.Layout().SessionMeta(meta.ID)); ok {
		t.Fatal("the session was committed without its vault")
	}
}

func TestPushAgainRestoresAVaultMissingFromTheStore(t *testing.T) {
	dir, meta, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	key := store.Layout().SessionVault(meta.ID, meta.VaultHash)
	_ = mem.Delete(ctx, key)
	key = store.Layout().SessionLegacyVault(meta.ID) // the last place a pull looks
	_, err := store.Pull(ctx, meta.ID, filepath.Join(t.TempDir(), "broken"))
	if !errors.Is(err, ErrVaultMissing) || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), key) ||
		!strings.Contains(err.Error(), "upload was incomplete") || !strings.Contains(err.Error(), "push the session again") {
		t.Fatalf("pull with the declared vault missing: %v, want ErrVaultMissing naming %s and saying to push again", err, key)
	}
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !res.AlreadyCommitted || !res.VaultUploaded || res.BlobsUploaded != 0 {
		t.Fatalf("re-push: %+v, want only the vault uploaded", res)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := store.Pull(ctx, meta.ID, out); err != nil {
		t.Fatal(err)
	}
	assertSameSession(t, dir, out)
}

func TestPushAgainSkipsEverythingStored(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !res.AlreadyCommitted || res.BlobsSkipped != 3 || res.BlobsUploaded != 0 || res.BytesUploaded != 0 || !res.HasVault || res.VaultUploaded {
		t.Fatalf("second push: %+v, want everything skipped, the stored vault included", res)
	}
	for _, key := range keys(t, mem, "") {
		if n := mem.PutCount(key); n != 1 {
			t.Errorf("%s was put %d times, want once", key, n)
		}
	}
}

func TestPushReplacesABlobOfTheWrongSize(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	blobKeys := keys(t, mem, "pfx/blobs/")
	mem.Set(blobKeys[0], []byte("short"))
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsUploaded != 1 {
		t.Fatalf("re-push uploaded %d blobs, want the damaged one", res.BlobsUploaded)
	}
	if _, err := store.Pull(ctx, "s1", filepath.Join(t.TempDir(), "out")); err != nil {
		t.Fatalf("pull after repair: %v", err)
	}
}

func TestPushRefusesDifferentContentUnderAStoredID(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	writeSession(t, other, "s1", "", payloads(100, 2, 4<<10))
	before := keys(t, mem, "")
	_, err := store.Push(ctx, other)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.ID != "s1" {
		t.Fatalf("push of other content under s1: %v, want *ConflictError", err)
	}
	if !strings.Contains(err.Error(), "new id") {
		t.Errorf("the error should say what to do: %v", err)
	}
	if after := keys(t, mem, ""); !slices.Equal(before, after) {
		t.Errorf("a refused push changed the store: %v -> %v", before, after)
	}
}

func TestPushRefusesALocallyCorruptBlob(t *testing.T) {
	dir, meta, store, mem := memSession(t)
	names, _ := os.ReadDir(filepath.Join(dir, session.BlobsDir))
	path := filepath.Join(dir, session.BlobsDir, names[0].Name())
	if err := os.WriteFile(path, []byte("not the recorded bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := store.Push(context.Background(), dir)
	// session.Open finds it first and names it inside the session, whose directory the error names.
	var dm *session.DigestMismatchError
	if !errors.As(err, &dm) || dm.Object != session.BlobPath(names[0].Name()) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("push of a corrupt blob: %v, want a DigestMismatchError naming %s in %s", err, session.BlobPath(names[0].Name()), dir)
	}
	if _, ok := mem.Bytes(store.Layout().SessionMeta(meta.ID)); ok {
		t.Fatal("a session with a corrupt blob was committed")
	}
	if _, ok := mem.Bytes(store.Layout().Blob(names[0].Name())); ok {
		t.Fatal("corrupt bytes were stored under the blob's hash")
	}
}

func TestInterruptedPushIsInvisibleAndARetryCompletesIt(t *testing.T) {
	dir, meta, store, mem := memSession(t)
	ctx := context.Background()
	metaKey := store.Layout().SessionMeta(meta.ID)
	mem.BeforePut = func(key string) error {
		if key == metaKey {
			return errors.New("connection lost")
		}
		return nil
	}
	if _, err := store.Push(ctx, dir); err == nil || !strings.Contains(err.Error(), "push again") {
		t.Fatalf("interrupted push: %v, want an error saying to push again", err)
	}
	if list, err := store.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("list after an interrupted push: %v, %v; want no session", list, err)
	}
	// The pull cannot tell an interrupted push from one under way, so it names both.
	if _, err := store.Pull(ctx, meta.ID, filepath.Join(t.TempDir(), "x")); !errors.Is(err, session.ErrNotCommitted) ||
		!strings.Contains(err.Error(), "under way") || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("pull of an interrupted upload: %v, want ErrNotCommitted naming a push under way or interrupted", err)
	}
	mem.BeforePut = nil
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsSkipped != 3 || res.AlreadyCommitted {
		t.Errorf("retry: %+v, want the stored blobs skipped", res)
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != meta.ID || list[0].Meta.EventsHash != meta.EventsHash {
		t.Fatalf("list after the retry: %+v, %v", list, err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := store.Pull(ctx, meta.ID, out); err != nil {
		t.Fatal(err)
	}
	assertSameSession(t, dir, out)
}

func TestPullDetectsTamperedObjects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t testing.TB, l Layout, mem *MemObjectStore) string // returns the key tampered with
	}{
		{"a blob with other bytes", func(t testing.TB, l Layout, mem *MemObjectStore) string {
			key := keys(t, mem, l.BlobsPrefix())[1]
			data, _ := mem.Bytes(key)
			data[len(data)/2] ^= 1
			mem.Set(key, data)
			return key
		}},
		{"a segment of the log with an edited line", func(t testing.TB, l Layout, mem *MemObjectStore) string {
			key := logSegment(t, l, mem, "s1", `"fetch"`)
			data, _ := mem.Bytes(key)
			mem.Set(key, []byte(strings.Replace(string(data), `"fetch"`, `"fetcH"`, 1)))
			return key
		}},
		{"a segment of the log cut short", func(t testing.TB, l Layout, mem *MemObjectStore) string {
			key := logSegment(t, l, mem, "s1", "")
			data, _ := mem.Bytes(key)
			mem.Set(key, data[:len(data)/2])
			return key
		}},
		{"segments.json listing the segments out of order", func(t testing.TB, l Layout, mem *MemObjectStore) string {
			key := indexKey(l, mem, "s1")
			data, _ := mem.Bytes(key)
			var idx segmentIndex
			if err := json.Unmarshal(data, &idx); err != nil || len(idx.Segments) < 2 {
				t.Fatalf("segments.json: %v, %d segments", err, len(idx.Segments))
			}
			idx.Segments[0], idx.Segments[1] = idx.Segments[1], idx.Segments[0]
			data, _ = json.Marshal(idx)
			mem.Set(key, data)
			return key
		}},
		{"vault.enc with a flipped bit", func(t testing.TB, l Layout, mem *MemObjectStore) string {
			key := vaultKey(l, mem, "s1")
			data, _ := mem.Bytes(key)
			data[len(data)/2] ^= 1
			mem.Set(key, data)
			return key
		}},
		{"vault.enc replaced by another session's", func(t testing.TB, l Layout, mem *MemObjectStore) string {
			key := vaultKey(l, mem, "s1")
			mem.Set(key, sealedBytes(99, len(testVault)))
			return key
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _, store, mem := memSession(t)
			ctx := context.Background()
			if _, err := store.Push(ctx, dir); err != nil {
				t.Fatal(err)
			}
			key := tc.tamper(t, store.Layout(), mem)
			out := filepath.Join(t.TempDir(), "out")
			_, err := store.Pull(ctx, "s1", out)
			var dm *session.DigestMismatchError
			if !errors.As(err, &dm) || dm.Object != key {
				t.Fatalf("pull: %v, want a DigestMismatchError naming %s", err, key)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed pull left %s behind", out)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".out.pull-*")); len(leftovers) > 0 {
				t.Errorf("a failed pull left %v behind", leftovers)
			}
		})
	}
}

func TestPullRefusesANonEmptyDestination(t *testing.T) {
	dir, _, store, _ := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pull(ctx, "s1", dir); !errors.Is(err, ErrDestinationNotEmpty) {
		t.Fatalf("pull over an existing session: %v, want ErrDestinationNotEmpty", err)
	}
	empty := t.TempDir()
	if _, err := store.Pull(ctx, "s1", empty); err != nil {
		t.Fatalf("pull into an existing empty directory: %v", err)
	}
	assertSameSession(t, dir, empty)
}

func TestPullOfAnUnknownSessionSaysSo(t *testing.T) {
	_, _, store, _ := memSession(t)
	_, err := store.Pull(context.Background(), "nope", filepath.Join(t.TempDir(), "x"))
	if !errors.Is(err, ErrSessionNotFound) || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "ls") {
		t.Fatalf("pull of an unknown session: %v", err)
	}
	if _, err := store.Pull(context.Background(), "../etc", t.TempDir()); err == nil || !strings.Contains(err.Error(), "cannot name objects") {
		t.Fatalf("pull of an id that is not a key segment: %v", err)
	}
}

func TestPullReportsAMissingBlob(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	key := keys(t, mem, store.Layout().BlobsPrefix())[0]
	_ = mem.Delete(ctx, key)
	_, err := store.Pull(ctx, "s1", filepath.Join(t.TempDir(), "out"))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "push the session again") {
		t.Fatalf("pull with a blob missing: %v", err)
	}
}

func TestProgressReportsEveryObjectWithoutOverlap(t *testing.T) {
	dir, _, _, mem := memSession(t)
	var busy sync.Mutex
	var last Progress
	calls := 0
	opts := StoreOptions{Parallelism: 4, Progress: func(p Progress) {
		if !busy.TryLock() {
			t.Error("progress callbacks overlapped")
			return
		}
		defer busy.Unlock()
		calls++
		last = p
	}}
	store := NewSessionStore(mem, Layout{}, opts)
	pushed, err := store.Push(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var size int64 // every file of the session, the sealed vault included
	for _, data := range sessionFiles(t, dir) {
		size += int64(len(data))
	}
	// 3 blobs, the log's segments and their index, the vault and meta.json.
	index := int64(len(mustBytes(t, mem, indexKey(store.Layout(), mem, "s1"))))
	if objs := 6 - 1 + pushed.Segments + 1; last.Phase != PhaseDone || last.DoneObjects != objs || last.TotalObjects != objs || last.DoneBytes != size+index || last.TotalBytes != size+index {
		t.Fatalf("last push progress %+v, want %d/%d objects and %d/%d bytes", last, objs, objs, size+index, size+index)
	}
	if _, err := store.Pull(context.Background(), "s1", filepath.Join(t.TempDir(), "out")); err != nil {
		t.Fatal(err)
	}
	if last.Op != "pull" || last.Phase != PhaseDone || last.DoneObjects != 6 || last.TotalObjects != 6 || last.DoneBytes != size {
		t.Fatalf("last pull progress %+v, want 6/6 objects and %d bytes", last, size)
	}
	if calls < 12 {
		t.Errorf("only %d progress calls for a push and a pull of 6 objects", calls)
	}
}

func TestOpenEventsStreamsVerifiedEvents(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	want, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := streamAll(t, store, "s1")
	if len(got) != len(want.Events) {
		t.Fatalf("streamed %d events, recorded %d", len(got), len(want.Events))
	}
	for i := range got {
		if string(got[i].Result) != string(want.Events[i].Result) || got[i].Step != want.Events[i].Step {
			t.Fatalf("event %d differs from the recording", i)
		}
	}

	// The segment's own digest catches the edit before a line of it is used.
	key := logSegment(t, store.Layout(), mem, "s1", `"i":1`)
	data, _ := mem.Bytes(key)
	mem.Set(key, []byte(strings.Replace(string(data), `"i":1`, `"i":7`, 1)))
	stream, err := store.OpenEvents(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	for {
		_, err = stream.Next()
		if err != nil {
			break
		}
	}
	var dm *session.DigestMismatchError
	if !errors.As(err, &dm) || dm.Object != key {
		t.Fatalf("end of a tampered stream: %v, want a DigestMismatchError naming %s", err, key)
	}
}

// streamAll reads every event of a stored session through OpenEvents.
func streamAll(t *testing.T, store *SessionStore, id string) []session.Event {
	t.Helper()
	stream, err := store.OpenEvents(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var out []session.Event
	for {
		ev, err := stream.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

func TestListShowsCommittedSessionsAndFlagsDamagedOnes(t *testing.T) {
	mem := NewMemObjectStore()
	store := NewSessionStore(mem, Layout{}, StoreOptions{})
	ctx := context.Background()
	for _, id := range []string{"b", "a", "c"} {
		dir := filepath.Join(t.TempDir(), id)
		writeSession(t, dir, id, "", payloads(7, 1, 4<<10))
		if _, err := store.Push(ctx, dir); err != nil {
			t.Fatal(err)
		}
	}
	mem.Set(store.Layout().SessionEvents("orphan"), []byte("{}\n"))
	mem.Set(store.Layout().SessionMeta("c"), []byte("{not json"))
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
		if (s.Problem != "") != (s.ID == "c") {
			t.Errorf("session %s: problem %q", s.ID, s.Problem)
		}
	}
	if !slices.Contains(ids, "a") || !slices.Contains(ids, "b") || !slices.Contains(ids, "c") || slices.Contains(ids, "orphan") || len(ids) != 3 {
		t.Fatalf("listed %v, want a, b and the damaged c, not the uncommitted orphan", ids)
	}
}

func TestCancelledPushStopsAndCommitsNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	writeSession(t, dir, "s", "", payloads(1, 20, 4<<10))
	mem := NewMemObjectStore()
	ctx, cancel := context.WithCancel(context.Background())
	puts := 0
	var mu sync.Mutex
	mem.BeforePut = func(string) error {
		mu.Lock()
		defer mu.Unlock()
		if puts++; puts == 3 {
			cancel()
		}
		return nil
	}
	store := NewSessionStore(mem, Layout{}, StoreOptions{Parallelism: 2})
	_, err := store.Push(ctx, dir)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled push: %v, want context.Canceled", err)
	}
	if _, ok := mem.Bytes(store.Layout().SessionMeta("s")); ok {
		t.Fatal("a cancelled push committed the session")
	}
	if n := len(keys(t, mem, "")); n > 5 {
		t.Errorf("%d objects stored after cancelling at the third: the push did not stop", n)
	}
}

// TestPushWithVerifyStoredRepairsADamagedStore: an object corrupted at rest keeps its size, so a plain
// push trusts it; a push with VerifyStored reads it back, finds the damage and uploads it again.
func TestPushWithVerifyStoredRepairsADamagedStore(t *testing.T) {
	dir, _, store, mem := memSession(t)
	ctx := context.Background()
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	blob := keys(t, mem, store.Layout().BlobsPrefix())[0]
	segment := logSegment(t, store.Layout(), mem, "s1", "")
	for _, key := range []string{blob, segment} {
		data, _ := mem.Bytes(key)
		data[len(data)/2] ^= 1
		mem.Set(key, data)
	}
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Pull(ctx, "s1", filepath.Join(t.TempDir(), "still-damaged")); err == nil {
		t.Fatal("a plain re-push repaired same-size damage; the test no longer proves VerifyStored")
	}
	verifying := NewSessionStore(mem, store.Layout(), StoreOptions{VerifyStored: true})
	if _, err := verifying.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "repaired")
	if _, err := store.Pull(ctx, "s1", out); err != nil {
		t.Fatalf("pull after a verifying push: %v", err)
	}
	assertSameSession(t, dir, out)
}

func TestBytesSentCountsEverythingAPushUploads(t *testing.T) {
	dir, _, store, _ := memSession(t)
	ctx := context.Background()
	first, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !first.EventsUploaded || first.BytesSent <= first.BytesUploaded {
		t.Fatalf("first push: events uploaded %v, bytes sent %d, blob bytes %d", first.EventsUploaded, first.BytesSent, first.BytesUploaded)
	}
	again, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.EventsUploaded || again.BytesSent != 0 {
		t.Fatalf("re-push sent %d bytes (events uploaded %v); a committed session needs nothing", again.BytesSent, again.EventsUploaded)
	}
}
