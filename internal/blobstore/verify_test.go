package blobstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// structuralTamper rewrites a recorded session the way agentrewind verify rejects while every hash
// still holds: it edits events.jsonl and meta.json and recomputes the eventsHash, as someone who
// knows the format would. want is the error type session.Open reports.
type structuralTamper struct {
	name string
	edit func(events []byte, events0 int) (newEvents []byte, newCount int)
	want func(error) bool
}

func isCorruptEvent(err error) bool {
	_, ok := errors.AsType[*session.CorruptEventError](err)
	return ok
}
func isCorruptMeta(err error) bool { _, ok := errors.AsType[*session.CorruptMetaError](err); return ok }

var structuralTampers = []structuralTamper{
	{"a second session_end line, counted in meta.json", func(ev []byte, n int) ([]byte, int) {
		lines := bytes.SplitAfter(ev, []byte("\n"))
		last := lines[len(lines)-2] // the final element is the empty string after the last newline
		return append(bytes.Clone(ev), last...), n + 1
	}, isCorruptEvent},
	{"meta.json counting one event more than the log holds", func(ev []byte, n int) ([]byte, int) {
		return ev, n + 1
	}, isCorruptMeta},
	{"a lane's seq going backwards", func(ev []byte, n int) ([]byte, int) {
		return bytes.Replace(ev, []byte(`{"seq":2,"step":3,`), []byte(`{"seq":0,"step":3,`), 1), n
	}, isCorruptEvent},
}

// tamperSession applies t to events and meta.json bytes and returns them with the eventsHash and
// event count of meta.json rewritten in place (same length: both are fixed-width here).
func tamperSession(tb testing.TB, t structuralTamper, events, meta []byte) (newEvents, newMeta []byte) {
	tb.Helper()
	m, err := session.DecodeMeta(meta, "meta.json")
	if err != nil {
		tb.Fatal(err)
	}
	newEvents, count := t.edit(events, int(m.Events))
	if bytes.Equal(newEvents, events) && count == int(m.Events) {
		tb.Fatalf("%s: the edit changed nothing", t.name)
	}
	newMeta = bytes.Replace(meta, []byte(m.EventsHash), []byte(sha256Hex(newEvents)), 1)
	newMeta = replaceCount(tb, newMeta, int(m.Events), count)
	return newEvents, newMeta
}

func replaceCount(tb testing.TB, meta []byte, from, to int) []byte {
	tb.Helper()
	old := []byte(`"events": ` + strconv.Itoa(from) + ",")
	if !bytes.Contains(meta, old) {
		tb.Fatalf("meta.json has no %s", old)
	}
	return bytes.Replace(meta, old, []byte(`"events": `+strconv.Itoa(to)+","), 1)
}

// TestPushRefusesASessionVerifyRejects: a session whose hashes hold but whose log breaks the
// structure verify checks must not reach the store, where every pull would trust it.
func TestPushRefusesASessionVerifyRejects(t *testing.T) {
	for _, tc := range structuralTampers {
		t.Run(tc.name, func(t *testing.T) {
			dir, _, store, mem := memSession(t)
			events, meta := readFile(t, filepath.Join(dir, session.EventsFile)), readFile(t, filepath.Join(dir, session.MetaFile))
			events, meta = tamperSession(t, tc, events, meta)
			writeFile(t, filepath.Join(dir, session.EventsFile), events)
			writeFile(t, filepath.Join(dir, session.MetaFile), meta)
			_, err := store.Push(context.Background(), dir)
			if !tc.want(err) {
				t.Fatalf("push: %v, want the error session.Open gives", err)
			}
			if k := keys(t, mem, ""); len(k) != 0 {
				t.Fatalf("a refused push stored %v", k)
			}
		})
	}
}

// TestPullAndStreamRefuseAStoredSessionVerifyRejects tampers with a pushed session in the store,
// recomputing eventsHash and meta.json.sha256: pull writes nothing and the stream ends in the error.
func TestPullAndStreamRefuseAStoredSessionVerifyRejects(t *testing.T) {
	for _, tc := range structuralTampers {
		t.Run(tc.name, func(t *testing.T) {
			dir, meta, store, mem := memSession(t)
			ctx := context.Background()
			if _, err := store.Push(ctx, dir); err != nil {
				t.Fatal(err)
			}
			l := store.Layout()
			events, metaBytes := tamperSession(t, tc, storedLog(t, l, mem, meta.ID), mustBytes(t, mem, l.SessionMeta(meta.ID)))
			storeLog(t, l, mem, meta.ID, events)
			mem.Set(l.SessionMeta(meta.ID), metaBytes)
			mem.Set(metaSumKey(l, meta.ID, metaBytes), metaSumRecord(metaBytes))
			assertPullRefused(t, store, meta.ID, tc.want)
			if err := drain(store, meta.ID); !tc.want(err) {
				t.Fatalf("stream: %v, want the error session.Open gives", err)
			}
		})
	}
}

// TestS3PullRefusesASessionTamperedAtRestThatVerifyRejects edits the files of the versitygw posix
// backend directly, hashes recomputed, every edit keeping the file's size.
func TestS3PullRefusesASessionTamperedAtRestThatVerifyRejects(t *testing.T) {
	env := startS3(t)
	store, _ := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "run-1")
	writeSession(t, dir, "run-1", "", payloads(1, 3, 4<<10))
	if _, err := store.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	l := store.Layout()
	tc := structuralTampers[2] // the seq edit keeps the size
	// The log's edited segment is a new object under its new digest, with the index listing it; the
	// size-keeping edits of meta.json and its record go into the backend's files.
	metaPath := env.srv.ObjectPath(env.bucket, l.SessionMeta("run-1"))
	events, meta := tamperSession(t, tc, storedLog(t, l, store.objects, "run-1"), readFile(t, metaPath))
	storeLog(t, l, store.objects, "run-1", events)
	writeFile(t, metaPath, meta)
	writeFile(t, env.srv.ObjectPath(env.bucket, metaSumKey(l, "run-1", meta)), metaSumRecord(meta))
	assertPullRefused(t, store, "run-1", tc.want)
	if err := drain(store, "run-1"); !tc.want(err) {
		t.Fatalf("stream: %v, want the error session.Open gives", err)
	}
}

func assertPullRefused(t *testing.T, store *SessionStore, id string, want func(error) bool) {
	t.Helper()
	parent := t.TempDir()
	_, err := store.Pull(context.Background(), id, filepath.Join(parent, "out"))
	if !want(err) {
		t.Fatalf("pull: %v, want the error session.Open gives", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("a refused pull left %v", entries)
	}
}

// drain streams every event of the session and returns the error that ends the stream, nil at io.EOF.
func drain(store *SessionStore, id string) error {
	stream, err := store.OpenEvents(context.Background(), id)
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

// TestStoreDamageIsCorruptNotAFailureToRead: a committed session missing an object it needs, or
// whose meta.json holds a key session.Meta does not, is damaged, and says so with the session
// package's error types (the CLI exits 2 for them), not with ErrNotFound or an untyped error.
func TestStoreDamageIsCorruptNotAFailureToRead(t *testing.T) {
	isMissing := func(err error) bool { _, ok := errors.AsType[*session.MissingError](err); return ok }
	for _, tc := range []struct {
		name   string
		damage func(l Layout, mem *MemObjectStore, id string)
		want   func(error) bool
	}{
		{"the log's index deleted", func(l Layout, mem *MemObjectStore, id string) {
			mem.Delete(context.Background(), indexKey(l, mem, id))
		}, isMissing},
		{"a segment of the log deleted", func(l Layout, mem *MemObjectStore, id string) {
			mem.Delete(context.Background(), segmentKeys(l, mem, id)[0])
		}, isMissing},
		{"a blob deleted", func(l Layout, mem *MemObjectStore, id string) {
			mem.Delete(context.Background(), keysOf(mem, l.BlobsPrefix())[0])
		}, isMissing},
		{"meta.json with an unknown key, its record matching", func(l Layout, mem *MemObjectStore, id string) {
			data, _ := mem.Bytes(l.SessionMeta(id))
			data = bytes.Replace(data, []byte(`"createdAt"`), []byte(`"createdAu"`), 1)
			mem.Set(l.SessionMeta(id), data)
			mem.Set(metaSumKey(l, id, data), metaSumRecord(data))
		}, isCorruptMeta},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, meta, store, mem := memSession(t)
			if _, err := store.Push(context.Background(), dir); err != nil {
				t.Fatal(err)
			}
			tc.damage(store.Layout(), mem, meta.ID)
			assertPullRefused(t, store, meta.ID, tc.want)
			if err := drain(store, meta.ID); !tc.want(err) {
				t.Fatalf("stream: %v", err)
			}
		})
	}
}

func keysOf(mem *MemObjectStore, prefix string) []string {
	infos, _ := mem.List(context.Background(), prefix)
	out := make([]string, 0, len(infos))
	for _, o := range infos {
		out = append(out, o.Key)
	}
	return out
}

func mustBytes(t *testing.T, mem *MemObjectStore, key string) []byte {
	t.Helper()
	data, ok := mem.Bytes(key)
	if !ok {
		t.Fatalf("%s is not stored", key)
	}
	return bytes.Clone(data)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
