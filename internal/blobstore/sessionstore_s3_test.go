package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// keyRE is every key a session store may write under the test prefix.
var keyRE = regexp.MustCompile(`^team/prod/(blobs/sha256/([0-9a-f]{2})/([0-9a-f]{64})|sessions/[A-Za-z0-9._-]+/(meta\.json|meta\.json\.[0-9a-f]{64}\.sha256|segments\.[0-9a-f]{64}\.json|vault\.[0-9a-f]{64}\.enc))$`)

func TestS3RoundTripWithLargeAndSmallBlobs(t *testing.T) {
	env := startS3(t)
	store, objs := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "run-1")
	meta := writeSession(t, dir, "run-1", "", append(payloads(1, 3, 6<<20), payloads(100, 40, 3<<10)...))

	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Blobs != 43 || res.BlobsUploaded != 43 || !res.HasVault || !res.VaultUploaded || res.VaultSkipped {
		t.Fatalf("push: %+v", res)
	}
	all := keys(t, objs, "")
	if len(all) != 47+res.Segments {
		t.Fatalf("bucket holds %d objects, want 43 blobs + the log's %d segments + its index + the vault + meta.json's record + meta.json", len(all), res.Segments)
	}
	for _, key := range all {
		m := keyRE.FindStringSubmatch(key)
		if m == nil || (m[2] != "" && m[2] != m[3][:2]) {
			t.Errorf("key %s is outside the layout", key)
		}
	}
	vaultKey := "team/prod/sessions/run-1/vault." + meta.VaultHash + ".enc"
	if store.Layout().SessionVault(meta.ID, meta.VaultHash) != vaultKey {
		t.Fatalf("SessionVault(run-1) = %s, want %s", store.Layout().SessionVault(meta.ID, meta.VaultHash), vaultKey)
	}
	if stored := getObject(t, objs, vaultKey); !bytes.Equal(stored, testVault) {
		t.Fatalf("%s holds %d bytes, not the %d sealed bytes recorded", vaultKey, len(stored), len(testVault))
	}
	out := filepath.Join(t.TempDir(), "pulled")
	pulled, err := store.Pull(ctx, meta.ID, out)
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Blobs != 43 || pulled.Meta.EventsHash != meta.EventsHash || !pulled.Vault || pulled.Meta.VaultHash != meta.VaultHash {
		t.Errorf("pull: %+v", pulled)
	}
	assertSameSession(t, dir, out) // the sealed vault round-trips byte for byte
	if got := streamAll(t, store, meta.ID); len(got) != 45 || len(got[1].Result) != 6<<20 {
		t.Errorf("streamed %d events, want 45 with the 6 MiB result resolved", len(got))
	}
}

func TestS3ForksSharingAPrefixStoreTheSharedBlobsOnce(t *testing.T) {
	env := startS3(t)
	store, objs := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	shared := payloads(1, 8, 64<<10)
	forkA := filepath.Join(t.TempDir(), "fork-a")
	forkB := filepath.Join(t.TempDir(), "fork-b")
	writeSession(t, forkA, "fork-a", "base", append(shared[:8:8], payloads(50, 2, 64<<10)...))
	writeSession(t, forkB, "fork-b", "base", append(shared[:8:8], payloads(60, 3, 64<<10)...))

	a, err := store.Push(ctx, forkA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Push(ctx, forkB)
	if err != nil {
		t.Fatal(err)
	}
	if a.BlobsUploaded != 10 || b.BlobsUploaded != 3 || b.BlobsSkipped != 8 {
		t.Fatalf("fork a uploaded %d blobs; fork b uploaded %d and skipped %d; want 10, 3 and 8", a.BlobsUploaded, b.BlobsUploaded, b.BlobsSkipped)
	}
	// Besides the 13 blobs (8 shared once + 2 + 3), the logs' segments: fork b's repeat fork a's
	// lines up to where they differ (session_start's and tool calls' lines are the same here).
	segs := a.SegmentsUploaded + b.SegmentsUploaded
	if n := len(keys(t, objs, store.Layout().BlobsPrefix())); n != 13+segs || b.SegmentsSkipped == 0 {
		t.Fatalf("the store holds %d blobs, want 13 (8 shared once + 2 + 3) + %d segments; fork b shared %d segments", n, segs, b.SegmentsSkipped)
	}
	if n := len(keys(t, objs, store.Layout().SessionsPrefix())); n != 8 {
		t.Fatalf("the store holds %d session objects, want 8 (a segment index, a vault, meta.json's record and meta.json each)", n)
	}
	for _, fork := range []string{"fork-a", "fork-b"} {
		out := filepath.Join(t.TempDir(), fork)
		if _, err := store.Pull(ctx, fork, out); err != nil {
			t.Fatal(err)
		}
	}
}

// failingStore interrupts an upload: Put of the keys matched by fail returns an error.
type failingStore struct {
	ObjectStore
	fail func(key string) bool
	puts atomic.Int64
}

func (f *failingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if f.fail(key) {
		return errors.New("upload interrupted")
	}
	f.puts.Add(1)
	return f.ObjectStore.Put(ctx, key, r, size)
}

func TestS3InterruptedUploadIsInvisibleAndARetryCompletesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(l Layout) func(key string) bool
	}{
		{"before meta.json", func(l Layout) func(string) bool {
			return func(key string) bool { return key == l.SessionMeta("run-1") }
		}},
		{"at vault.enc", func(l Layout) func(string) bool {
			return func(key string) bool { return strings.HasPrefix(key, l.SessionsPrefix()+"run-1/vault.") }
		}},
		{"half-way through the blobs", func(l Layout) func(string) bool {
			var n atomic.Int64
			return func(key string) bool { return strings.Contains(key, "/blobs/") && n.Add(1) > 6 }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := startS3(t)
			clean, objs := env.sessionStore(t, StoreOptions{Parallelism: 2})
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "run-1")
			writeSession(t, dir, "run-1", "", payloads(1, 12, 32<<10))

			flaky := &failingStore{ObjectStore: objs, fail: tc.fail(clean.Layout())}
			if _, err := NewSessionStore(flaky, clean.Layout(), StoreOptions{Parallelism: 2}).Push(ctx, dir); err == nil {
				t.Fatal("the interrupted push reported success")
			}
			if list, err := clean.List(ctx); err != nil || len(list) != 0 {
				t.Fatalf("ls after the interrupted push: %+v, %v; want nothing listed", list, err)
			}
			if _, err := clean.Pull(ctx, "run-1", filepath.Join(t.TempDir(), "x")); err == nil {
				t.Fatal("an interrupted upload could be pulled")
			}
			stored := len(keys(t, objs, clean.Layout().BlobsPrefix()))

			res, err := clean.Push(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			// The log's segments are blobs too.
			if skipped := res.BlobsSkipped + res.SegmentsSkipped; skipped != stored || res.BlobsUploaded+res.SegmentsUploaded != 12+res.Segments-stored {
				t.Errorf("retry: %+v; %d blobs and segments were already stored", res, stored)
			}
			list, err := clean.List(ctx)
			if err != nil || len(list) != 1 || list[0].ID != "run-1" {
				t.Fatalf("ls after the retry: %+v, %v", list, err)
			}
			out := filepath.Join(t.TempDir(), "out")
			if _, err := clean.Pull(ctx, "run-1", out); err != nil {
				t.Fatal(err)
			}
			assertSameSession(t, dir, out)
		})
	}
}

func TestS3TamperedObjectsAreDetectedOnRead(t *testing.T) {
	env := startS3(t)
	store, objs := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "run-1")
	writeSession(t, dir, "run-1", "", payloads(1, 4, 200<<10))
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	l := store.Layout()
	blobKey := keys(t, objs, l.BlobsPrefix())[2]

	// A blob rewritten on the server's disk, same size, one byte changed.
	path := env.srv.ObjectPath(env.bucket, blobKey)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[100] ^= 0x20
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	assertDigestMismatch(t, "pull with a tampered blob", pullErr(t, store), objs.URL(blobKey))
	assertDigestMismatch(t, "stream with a tampered blob", streamErr(t, store), objs.URL(blobKey))
	data[100] ^= 0x20
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pullErr(t, store); err != nil {
		t.Fatalf("pull after restoring the blob: %v", err)
	}

	// vault.enc rewritten on the server's disk, same size, one bit changed: a replay must not
	// unseal it. Streaming events does not read the vault, so it is unaffected.
	vaultKey := vaultKey(l, store.objects, "run-1")
	vaultPath := env.srv.ObjectPath(env.bucket, vaultKey)
	sealed, err := os.ReadFile(vaultPath)
	if err != nil {
		t.Fatal(err)
	}
	sealed[len(sealed)/2] ^= 0x01
	if err := os.WriteFile(vaultPath, sealed, 0o644); err != nil {
		t.Fatal(err)
	}
	assertDigestMismatch(t, "pull with a tampered vault", pullErr(t, store), objs.URL(vaultKey))
	if err := streamErr(t, store); err != nil {
		t.Fatalf("stream with a tampered vault, which it does not read: %v", err)
	}
	sealed[len(sealed)/2] ^= 0x01
	if err := os.WriteFile(vaultPath, sealed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pullErr(t, store); err != nil {
		t.Fatalf("pull after restoring the vault: %v", err)
	}

	// A segment of the log replaced through the S3 API with an edited copy.
	eventsKey := logSegment(t, l, objs, "run-1", `"i":2`)
	client, err := env.srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := readObject(objs, eventsKey)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(orig, []byte(`"i":2`), []byte(`"i":9`), 1)
	if _, err := client.PutObject(ctx, env.bucket, eventsKey, bytes.NewReader(edited), int64(len(edited)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	assertDigestMismatch(t, "pull with tampered events", pullErr(t, store), objs.URL(eventsKey))
	assertDigestMismatch(t, "stream with tampered events", streamErr(t, store), objs.URL(eventsKey))
}

func pullErr(t *testing.T, store *SessionStore) error {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	_, err := store.Pull(context.Background(), "run-1", out)
	if err != nil {
		if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("a failed pull left %s behind", out)
		}
	}
	return err
}

func streamErr(t *testing.T, store *SessionStore) error {
	t.Helper()
	stream, err := store.OpenEvents(context.Background(), "run-1")
	if err != nil {
		return err
	}
	defer stream.Close()
	for {
		if _, err := stream.Next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func assertDigestMismatch(t *testing.T, what string, err error, object string) {
	t.Helper()
	var dm *session.DigestMismatchError
	if !errors.As(err, &dm) || dm.Object != object {
		t.Fatalf("%s: %v, want a *session.DigestMismatchError naming %s", what, err, object)
	}
}

func TestS3OpenChecksTheBucketAndTheCredentials(t *testing.T) {
	env := startS3(t)
	ctx := context.Background()
	cfg := env.config("")
	cfg.CreateBucket = false
	if _, err := Open(ctx, cfg); !errors.Is(err, ErrBucketNotFound) || !strings.Contains(err.Error(), "--create-bucket") {
		t.Fatalf("open of a missing bucket: %v, want ErrBucketNotFound saying --create-bucket", err)
	}
	cfg.CreateBucket = true
	if _, err := Open(ctx, cfg); err != nil {
		t.Fatalf("open creating the bucket: %v", err)
	}
	if _, err := Open(ctx, cfg); err != nil {
		t.Fatalf("open of an existing bucket with CreateBucket: %v", err)
	}
	bad := cfg
	bad.Credentials.SecretAccessKey = Secret("wrong-secret-0123456789")
	_, err := Open(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "check the credentials") {
		t.Fatalf("open with a wrong secret: %v, want an error saying to check the credentials", err)
	}
	for _, secret := range []string{"wrong-secret-0123456789", env.srv.SecretKey} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error shows a secret key: %v", err)
		}
	}
}

func TestS3CancelledPushReturnsPromptlyAndCommitsNothing(t *testing.T) {
	env := startS3(t)
	store, objs := env.sessionStore(t, StoreOptions{Parallelism: 2})
	dir := filepath.Join(t.TempDir(), "run-1")
	writeSession(t, dir, "run-1", "", payloads(1, 30, 256<<10))
	ctx, cancel := context.WithCancel(context.Background())
	var uploaded atomic.Int64
	store.progress = func(p Progress) {
		if p.Object != "" && uploaded.Add(1) == 3 {
			cancel()
		}
	}
	_, err := store.Push(ctx, dir)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled push: %v, want context.Canceled", err)
	}
	if n := len(keys(t, objs, store.Layout().BlobsPrefix())); n >= 30 {
		t.Errorf("all %d blobs were uploaded after cancelling", n)
	}
	if _, err := objs.Stat(context.Background(), store.Layout().SessionMeta("run-1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("meta.json after a cancelled push: %v, want ErrNotFound", err)
	}
}

// getObject reads the whole object at key.
func getObject(t *testing.T, objs ObjectStore, key string) []byte {
	t.Helper()
	rc, err := objs.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestS3SessionWithoutAVaultRoundTripsWithoutOne(t *testing.T) {
	env := startS3(t)
	store, objs := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "plain")
	recordSession(t, dir, "plain", "", payloads(1, 3, 8<<10), nil)
	res, err := store.Push(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.HasVault || res.VaultUploaded || res.VaultSkipped {
		t.Fatalf("push of a session without a vault: %+v", res)
	}
	for _, key := range keys(t, objs, "") {
		if strings.HasSuffix(key, session.VaultFile) {
			t.Errorf("the store holds %s for a session without a vault", key)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	if pulled, err := store.Pull(ctx, "plain", out); err != nil || pulled.Vault {
		t.Fatalf("pull: %+v, %v", pulled, err)
	}
	assertSameSession(t, dir, out)
}

// verifyStoredBlobs checks every blob object in the bucket against its name.
func verifyStoredBlobs(t *testing.T, objs ObjectStore, l Layout) {
	t.Helper()
	for _, key := range keys(t, objs, l.BlobsPrefix()) {
		h, ok := l.BlobHashFromKey(key)
		if !ok {
			t.Errorf("%s is not a blob key", key)
			continue
		}
		rc, err := objs.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.New()
		_, err = io.Copy(sum, rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(sum.Sum(nil)); got != h {
			t.Errorf("stored blob %s hashes to %s: corrupt bytes were stored", key, got)
		}
	}
}

// TestS3TwoPushesUnderOneIDAtOnceCommitOne: the S3 server refuses a second meta.json with 412, and
// of two different sessions pushed under one id at the same moment exactly one is told it pushed;
// the other gets a ConflictError and the store holds the winner's session alone.
func TestS3TwoPushesUnderOneIDAtOnceCommitOne(t *testing.T) {
	env := startS3(t)
	ctx := context.Background()
	_, objs := env.sessionStore(t, StoreOptions{})
	if err := objs.Create(ctx, "probe", strings.NewReader("a"), 1); err != nil {
		t.Fatal(err)
	}
	if err := objs.Create(ctx, "probe", strings.NewReader("b"), 1); !errors.Is(err, ErrExists) {
		t.Fatalf("a second create of one key: %v, want ErrExists (the server ignores If-None-Match)", err)
	}
	root := t.TempDir()
	for trial := range 5 {
		id := fmt.Sprintf("run-%d", trial)
		dirs := [2]string{filepath.Join(root, id+"-a"), filepath.Join(root, id+"-b")}
		for i, dir := range dirs {
			writeSession(t, dir, id, "", payloads(uint64(10*trial+i), 3, 4<<10))
		}
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, dir := range dirs {
			store, _ := env.sessionStore(t, StoreOptions{Parallelism: 2})
			wg.Go(func() {
				<-start
				_, errs[i] = store.Push(ctx, dir)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			var conflict *ConflictError
			switch {
			case err == nil && winner < 0:
				winner = i
			case err == nil:
				t.Fatalf("trial %d: both pushes of different sessions under %s succeeded", trial, id)
			case !errors.As(err, &conflict):
				t.Fatalf("trial %d: push %d failed other than with a conflict: %v", trial, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("trial %d: neither push committed: %v", trial, errs)
		}
		store, _ := env.sessionStore(t, StoreOptions{})
		out := filepath.Join(t.TempDir(), "pulled")
		if _, err := store.Pull(ctx, id, out); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		assertSameSession(t, dirs[winner], out)
	}
}
