package blobstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// payload is the content of one tool result: seed and size make the same bytes every time, so two
// sessions with the same payload share its blob.
type payload struct {
	seed uint64
	size int
}

// payloadJSON is a JSON string of size bytes (quotes included) derived from p.seed.
func payloadJSON(p payload) json.RawMessage {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], p.seed)
	rng := rand.NewChaCha8(key)
	raw := make([]byte, (p.size-2+1)/2)
	_, _ = rng.Read(raw)
	s := hex.EncodeToString(raw)[:max(p.size-2, 0)]
	return json.RawMessage(`"` + s + `"`)
}

// testVault stands in for a sealed vault: opaque bytes, as AES-256-GCM ciphertext would be.
var testVault = sealedBytes(0x7a017, 300)

// sealedBytes is n pseudo-random bytes derived from seed.
func sealedBytes(seed uint64, n int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	out := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(out)
	return out
}

// writeSession records a committed session in dir with testVault as its sealed vault.
func writeSession(t testing.TB, dir, id, parent string, payloads []payload) session.Meta {
	t.Helper()
	return recordSession(t, dir, id, parent, payloads, testVault)
}

// recordSession records a committed session in dir: one tool call per payload (payloads above the
// blob threshold become blobs), then the sealed vault unless it is nil, then meta.json.
func recordSession(t testing.TB, dir, id, parent string, payloads []payload, vault []byte) session.Meta {
	t.Helper()
	w, err := session.Create(dir, session.Meta{ID: id, Parent: parent, CreatedAt: time.Now().UnixMilli(), FingerprintMode: "strict"},
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
	for i, p := range payloads {
		must(w.Append(session.Event{Step: int64(i + 1), Seq: int64(i), Lane: "0", CallSite: "tool", Kind: session.KindToolCall,
			Name: "fetch", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Result: payloadJSON(p)}))
	}
	must(w.Append(session.Event{Step: int64(len(payloads) + 1), Lane: "0", Kind: session.KindSessionEnd}))
	if vault != nil {
		must(w.SetVault(vault))
	}
	meta, err := w.Close(nil)
	must(err)
	return meta
}

// payloads returns n payloads of the given size with seeds from first.
func payloads(first uint64, n, size int) []payload {
	out := make([]payload, n)
	for i := range out {
		out[i] = payload{seed: first + uint64(i), size: size}
	}
	return out
}

// sessionFiles maps each file of a session directory (slash paths) to its bytes.
func sessionFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// assertSameSession checks that pulled holds exactly the files of orig, byte for byte: the sealed
// vault included when orig has one, and none when it has none.
func assertSameSession(t testing.TB, orig, pulled string) {
	t.Helper()
	want, got := sessionFiles(t, orig), sessionFiles(t, pulled)
	for name, data := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s was not pulled", name)
		} else if !bytes.Equal(got[name], data) {
			t.Errorf("%s: pulled %d bytes, recorded %d (or different content)", name, len(got[name]), len(data))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("pulled an extra file %s", name)
		}
	}
	if _, err := session.Open(pulled); err != nil {
		t.Errorf("session.Open(pulled): %v", err)
	}
}

// s3Env is a versitygw server with one bucket for a test.
type s3Env struct {
	srv    *testenv.S3Server
	bucket string
}

func startS3(t testing.TB) *s3Env {
	t.Helper()
	srv := testenv.StartS3Server(t)
	return &s3Env{srv: srv, bucket: "agentrewind-test"} // every test has its own server
}

// config is a store configuration for the server, through endpoint when not empty (a proxy).
func (e *s3Env) config(endpoint string) Config {
	if endpoint == "" {
		endpoint = e.srv.Endpoint
	}
	return Config{Endpoint: "http://" + endpoint, Bucket: e.bucket, Prefix: "team/prod", CreateBucket: true,
		Credentials:    Credentials{AccessKeyID: e.srv.AccessKey, SecretAccessKey: Secret(e.srv.SecretKey)},
		RequestTimeout: 5 * time.Second, Retry: RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}}
}

func (e *s3Env) open(t testing.TB, cfg Config) *S3ObjectStore {
	t.Helper()
	objs, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// sessionStore opens a session store on the server directly.
func (e *s3Env) sessionStore(t testing.TB, opts StoreOptions) (*SessionStore, *S3ObjectStore) {
	t.Helper()
	cfg := e.config("")
	objs := e.open(t, cfg)
	layout, err := NewLayout(cfg.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	return NewSessionStore(objs, layout, opts), objs
}

// keys lists every key in the bucket under prefix.
func keys(t testing.TB, objs ObjectStore, prefix string) []string {
	t.Helper()
	infos, err := objs.List(context.Background(), prefix)
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

// logSegment returns the key of the first stored segment of session id's log that holds s (any
// segment when s is empty), read from its segments.json.
func logSegment(t testing.TB, l Layout, objs ObjectStore, id, s string) string {
	t.Helper()
	for _, key := range segmentKeys(l, objs, id) {
		if b, _ := readObject(objs, key); strings.Contains(string(b), s) {
			return key
		}
	}
	t.Fatalf("no segment of %s holds %q", id, s)
	return ""
}

// segmentKeys lists the keys of session id's stored segments, in log order (none when it has no
// readable segments.json).
func segmentKeys(l Layout, objs ObjectStore, id string) []string {
	data, _ := readObject(objs, indexKey(l, objs, id))
	var idx segmentIndex
	_ = json.Unmarshal(data, &idx)
	var out []string
	for _, seg := range idx.Segments {
		out = append(out, l.Blob(seg.Hash))
	}
	return out
}

// indexKey is the key of the segment index session id's stored meta.json names (the first index
// listed when there is no readable meta.json).
func indexKey(l Layout, objs ObjectStore, id string) string {
	if m := storedHashes(objs, l, id); m.EventsHash != "" {
		return l.SessionSegments(id, m.EventsHash)
	}
	list, _ := objs.List(context.Background(), l.SessionsPrefix()+id+"/")
	for _, o := range list {
		if l.IsSessionIndex(id, o.Key) {
			return o.Key
		}
	}
	return l.SessionSegments(id, strings.Repeat("0", 64))
}

// vaultKey is the key of the sealed vault session id's stored meta.json names.
func vaultKey(l Layout, objs ObjectStore, id string) string {
	return l.SessionVault(id, storedHashes(objs, l, id).VaultHash)
}

// storedHashes reads the hashes session id's stored meta.json names, unverified; zero when unreadable.
func storedHashes(objs ObjectStore, l Layout, id string) (m struct{ EventsHash, VaultHash string }) {
	if data, err := readObject(objs, l.SessionMeta(id)); err == nil {
		_ = json.Unmarshal(data, &m)
	}
	return m
}

// metaSumKey is the key of the record that vouches for meta.
func metaSumKey(l Layout, id string, meta []byte) string {
	return l.SessionMetaSum(id, sha256Hex(meta))
}

func readObject(objs ObjectStore, key string) ([]byte, error) {
	rc, err := objs.Get(context.Background(), key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// storedLog puts session id's stored log back together from its segments.
func storedLog(t *testing.T, l Layout, objs ObjectStore, id string) []byte {
	t.Helper()
	var log []byte
	for _, key := range segmentKeys(l, objs, id) {
		data, err := readObject(objs, key)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, data...)
	}
	return log
}

// storeLog replaces session id's stored log with log, its segments and index rewritten to match,
// as a forger with write access to the store would.
func storeLog(t testing.TB, l Layout, objs ObjectStore, id string, log []byte) {
	t.Helper()
	segs, sum, err := cutSegments(bytes.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, data []byte) {
		if err := objs.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	for _, seg := range segs {
		put(l.Blob(seg.Hash), log[seg.off:seg.off+seg.Bytes])
	}
	data, err := json.Marshal(segmentIndex{EventsHash: sum, Segments: segs})
	if err != nil {
		t.Fatal(err)
	}
	put(l.SessionSegments(id, sum), data)
}

// localSegments is the number of segments a push cuts the log of the session in dir into.
func localSegments(t testing.TB, dir string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, session.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	segs, _, err := cutSegments(f)
	if err != nil {
		t.Fatal(err)
	}
	return len(segs)
}
