package blobsweep_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// payloadJSON is a JSON string of about size bytes derived from seed: one seed, one blob, so
// sessions recorded with the same seed share it.
func payloadJSON(seed uint64, size int) json.RawMessage {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	raw := make([]byte, size/2)
	_, _ = rand.NewChaCha8(key).Read(raw)
	return json.RawMessage(`"` + hex.EncodeToString(raw) + `"`)
}

// record writes a committed session in a temporary directory with one tool call per seed, each
// result a blob, and returns the directory and the blob hashes per seed.
func record(t testing.TB, id string, seeds ...uint64) (string, map[uint64]string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), id)
	w, err := session.Create(dir, session.Meta{ID: id, CreatedAt: time.Now().UnixMilli(), FingerprintMode: "strict"},
		session.WriterOptions{BlobThreshold: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Append(session.Event{Step: 0, Lane: "0", Kind: session.KindSessionStart}))
	for i, s := range seeds {
		must(w.Append(session.Event{Step: int64(i + 1), Seq: int64(i), Lane: "0", CallSite: "tool", Kind: session.KindToolCall,
			Name: "fetch", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Result: payloadJSON(s, 4096)}))
	}
	must(w.Append(session.Event{Step: int64(len(seeds) + 1), Lane: "0", Kind: session.KindSessionEnd}))
	_, err = w.Close(nil)
	must(err)
	s, err := session.Open(dir)
	must(err)
	hashes := map[uint64]string{}
	for i, ev := range s.Events[1 : len(s.Events)-1] {
		if blobs := session.Blobs([]session.Event{ev}); len(blobs) == 1 { // the result: a field or a definition
			hashes[seeds[i]] = blobs[0]
		}
	}
	if len(hashes) != len(seeds) {
		t.Fatalf("session %s: %d blobs for %d seeds", id, len(hashes), len(seeds))
	}
	return dir, hashes
}

// s3env is a bucket on a real S3 server (versitygw) with a session store over it.
type s3env struct {
	srv     *testenv.S3Server
	bucket  string
	objects *blobstore.S3ObjectStore
	store   *blobstore.SessionStore
	layout  blobstore.Layout
}

func startS3(t testing.TB) *s3env {
	t.Helper()
	srv := testenv.StartS3Server(t)
	cfg := blobstore.Config{Endpoint: "http://" + srv.Endpoint, Bucket: "agentrewind-gc", Prefix: "team/prod", CreateBucket: true,
		Credentials:    blobstore.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: blobstore.Secret(srv.SecretKey)},
		RequestTimeout: 10 * time.Second, Retry: blobstore.RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}}
	objs, err := blobstore.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := blobstore.NewLayout(cfg.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &s3env{srv: srv, bucket: cfg.Bucket, objects: objs, layout: layout, store: blobstore.NewSessionStore(objs, layout, blobstore.StoreOptions{})}
}

func (e *s3env) push(t testing.TB, dir string) {
	t.Helper()
	if _, err := e.store.Push(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
}

// putBlob stores data as a blob, named by its hash, and returns the key.
func (e *s3env) putBlob(t testing.TB, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	key := e.layout.Blob(hex.EncodeToString(sum[:]))
	if err := e.objects.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return key
}

// lastModified is the modification time of the object at key as a listing, the sweep's source,
// reports it.
func (e *s3env) lastModified(t testing.TB, key string) time.Time {
	t.Helper()
	infos, err := e.objects.List(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range infos {
		if o.Key == key {
			return o.LastModified
		}
	}
	t.Fatalf("%s is not listed", key)
	return time.Time{}
}

func (e *s3env) keys(t testing.TB) []string {
	t.Helper()
	infos, err := e.objects.List(context.Background(), e.layout.Prefix()+"/")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(infos))
	for _, o := range infos {
		out = append(out, o.Key)
	}
	slices.Sort(out)
	return out
}

func (e *s3env) deleteKeys(t testing.TB, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := e.objects.Delete(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
}

// sessionKeys lists the keys under session id whose name, after the session's prefix, starts with
// name ("" for all of them).
func (e *s3env) sessionKeys(t testing.TB, id, name string) []string {
	t.Helper()
	objs, err := e.objects.List(context.Background(), e.layout.SessionsPrefix()+id+"/"+name)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// blobBytes reads a blob of a local session directory.
func blobBytes(t testing.TB, dir, hash string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, session.BlobsDir, hash))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func without(keys []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return slices.Contains(drop, k) })
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func contains(s []string, k string) bool { return slices.Contains(s, k) }

// segmentsOf lists the keys of the segments session id's log is stored as (its segments.json).
func (e *s3env) segmentsOf(t testing.TB, id string) []string {
	t.Helper()
	index := e.sessionKeys(t, id, "segments.")
	if len(index) != 1 {
		t.Fatalf("session %s has segment indexes %v, want one", id, index)
	}
	rc, err := e.objects.Get(context.Background(), index[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var idx struct {
		Segments []struct {
			Hash string `json:"sha256"`
		} `json:"segments"`
	}
	if err := json.NewDecoder(rc).Decode(&idx); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range idx.Segments {
		keys = append(keys, e.layout.Blob(s.Hash))
	}
	return keys
}
