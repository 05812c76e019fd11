package blobstore

// Hostile tests of dropStrays / StrayOf: a push that finds its session committed deletes hash-named
// records, indexes and vaults under sessions/<id>/ that the committed meta.json does not name, and
// nothing else. Each states the property it holds; the ones marked "Found" failed before their fix.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func hsPull(t *testing.T, s *SessionStore, id string) error {
	t.Helper()
	_, err := s.Pull(context.Background(), id, filepath.Join(t.TempDir(), "pulled-"+id))
	return err
}

// hsDeleteSession does what controller.Store.DeleteSession does: every object under sessions/<id>/,
// meta.json first.
func hsDeleteSession(ctx context.Context, t *testing.T, objs ObjectStore, l Layout, id string) {
	t.Helper()
	if err := objs.Delete(ctx, l.SessionMeta(id)); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys(t, objs, l.SessionPrefix(id)) {
		if err := objs.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
}

// Found, fixed: a re-push of session W decides "already committed" at its start and drops
// strays at its end. In between the session is deleted (DeleteSession, a retention policy) and a
// new session N of other content is pushed under the same id (an AgentRun recreated with its
// name). The re-push then deletes N's record, index and vault as strays of W, destroying the
// committed N, and reports success although the store holds N's meta.json.
func TestHostileRePushDropsStraysOfASessionCommittedSinceItLooked(t *testing.T) {
	ctx := context.Background()
	mem := NewMemObjectStore()
	l := Layout{}
	wDir := filepath.Join(t.TempDir(), "run")
	recordSession(t, wDir, "run", "", payloads(1, 2, 2000), testVault)
	nDir := filepath.Join(t.TempDir(), "run")
	recordSession(t, nDir, "run", "", payloads(50, 2, 2000), sealedBytes(99, 300))
	if _, err := NewSessionStore(mem, l, StoreOptions{}).Push(ctx, wDir); err != nil {
		t.Fatal(err)
	}
	var fired bool
	rePush := NewSessionStore(mem, l, StoreOptions{WriteHooks: WriteHooks{Step: func(ctx context.Context, step WriteStep) error {
		if step == PushBlobsStored && !fired {
			fired = true
			hsDeleteSession(ctx, t, mem, l, "run")
			if _, err := NewSessionStore(mem, l, StoreOptions{}).Push(ctx, nDir); err != nil {
				t.Errorf("pushing the new session: %v", err)
			}
		}
		return nil
	}}})
	res, err := rePush.Push(ctx, wDir)
	t.Logf("re-push of the old session: res=%+v err=%v", res, err)
	if err == nil {
		stored, _ := readObject(mem, l.SessionMeta("run"))
		wMeta, _ := os.ReadFile(filepath.Join(wDir, "meta.json"))
		if !bytes.Equal(stored, wMeta) {
			t.Errorf("the re-push of the old session reported success, but the store's meta.json is another session's")
		}
	}
	t.Logf("objects under sessions/run/ now: %v", keys(t, mem, l.SessionPrefix("run")))
	if perr := hsPull(t, NewSessionStore(mem, l, StoreOptions{}), "run"); perr != nil {
		t.Errorf("the session committed meanwhile no longer pulls: %v", perr)
	}
}

// Found, fixed: a stored meta.json whose "id" names another session (a prefix copied or
// renamed with a copy tool, a store restored from another bucket), verified by its record, is taken
// at its word on the conflict path: dropStrays lists sessions/<that id>/ and deletes what the copied
// meta.json does not name there, i.e. another committed session's record, index and vault. Elsewhere
// (checkStoredMeta) such a meta.json is refused as "the store is inconsistent".
func TestHostileConflictDropsStraysUnderTheIDInsideTheStoredMeta(t *testing.T) {
	ctx := context.Background()
	mem := NewMemObjectStore()
	l := Layout{}
	store := NewSessionStore(mem, l, StoreOptions{})
	// run-2 as committed in this store.
	victimDir := filepath.Join(t.TempDir(), "run-2")
	recordSession(t, victimDir, "run-2", "", payloads(1, 2, 2000), testVault)
	if _, err := store.Push(ctx, victimDir); err != nil {
		t.Fatal(err)
	}
	before := keys(t, mem, l.SessionPrefix("run-2"))
	// sessions/run/ holds a copy of another run-2 (from another bucket or an earlier run-2): its
	// meta.json and its record.
	otherDir := filepath.Join(t.TempDir(), "run-2")
	recordSession(t, otherDir, "run-2", "", payloads(70, 2, 2000), sealedBytes(5, 300))
	otherMeta, err := os.ReadFile(filepath.Join(otherDir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	mem.Set(l.SessionMeta("run"), otherMeta)
	mem.Set(l.SessionMetaSum("run", sha256Hex(otherMeta)), metaSumRecord(otherMeta))
	// Someone pushes their own session "run".
	runDir := filepath.Join(t.TempDir(), "run")
	recordSession(t, runDir, "run", "", payloads(30, 1, 2000), nil)
	_, err = store.Push(ctx, runDir)
	var ce *ConflictError
	t.Logf("push of run: %v (conflict %v)", err, errors.As(err, &ce))
	after := keys(t, mem, l.SessionPrefix("run-2"))
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("a push of session run deleted objects of session run-2:\nbefore %v\nafter  %v", before, after)
	}
	if perr := hsPull(t, store, "run-2"); perr != nil {
		t.Errorf("session run-2 no longer pulls: %v", perr)
	}
}

// Held: Session ids that are prefixes of each other: sessions/run/ and sessions/run-2/,
// sessions/run.1/: strays of run are dropped, nothing of the others.
func TestHostileStraysOfPrefixSessionIDs(t *testing.T) {
	ctx := context.Background()
	mem := NewMemObjectStore()
	l, _ := NewLayout("team/prod")
	store := NewSessionStore(mem, l, StoreOptions{})
	dirs := map[string]string{}
	for i, id := range []string{"run", "run-2", "run.1", "runx"} {
		d := filepath.Join(t.TempDir(), id)
		recordSession(t, d, id, "", payloads(uint64(10*i+1), 2, 2000), sealedBytes(uint64(i), 300))
		dirs[id] = d
		if _, err := store.Push(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// strays of "run-2" and "run.1": a loser's record, index and vault; and odd keys nobody should touch
	h := strings.Repeat("ab", 32)
	for _, id := range []string{"run-2", "run.1", "runx"} {
		mem.Set(l.SessionMetaSum(id, h), []byte("x"))
		mem.Set(l.SessionSegments(id, h), []byte("x"))
		mem.Set(l.SessionVault(id, h), []byte("x"))
	}
	odd := []string{
		l.SessionPrefix("run") + "segments." + h + ".json.bak",
		l.SessionPrefix("run") + "notes/segments." + h + ".json",
		l.SessionPrefix("run") + "vault." + strings.ToUpper(h) + ".enc",
		l.SessionPrefix("run") + "meta.json." + strings.ToUpper(h) + ".sha256",
		l.SessionPrefix("run") + "vault.enc",
		l.SessionPrefix("run") + "segments.json",
		l.SessionPrefix("run") + "events.jsonl",
		l.SessionPrefix("run") + "meta.json.sha256",
		l.SessionPrefix("run") + "vault." + h + ".enc/extra",
		l.SessionPrefix("run") + "meta.json." + h + ".sha256.tmp",
	}
	for _, k := range odd {
		mem.Set(k, []byte("x"))
	}
	// a real stray of run
	mem.Set(l.SessionSegments("run", h), []byte("stray"))
	others := map[string][]string{}
	for _, id := range []string{"run-2", "run.1", "runx"} {
		others[id] = keys(t, mem, l.SessionPrefix(id))
	}
	// legacy keys like meta.json.sha256 are read as records: make the legacy record a valid one so
	// the session still verifies.
	wMeta, _ := os.ReadFile(filepath.Join(dirs["run"], "meta.json"))
	mem.Set(l.SessionLegacyMetaSum("run"), metaSumRecord(wMeta))
	res, err := store.Push(ctx, dirs["run"])
	if err != nil {
		t.Fatal(err)
	}
	if !res.AlreadyCommitted {
		t.Fatal("not already committed")
	}
	for id, want := range others {
		if got := keys(t, mem, l.SessionPrefix(id)); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("a re-push of run changed session %s: %v -> %v", id, want, got)
		}
	}
	for _, k := range odd {
		if _, ok := mem.Bytes(k); !ok {
			t.Errorf("odd key %s was deleted", k)
		}
	}
	if _, ok := mem.Bytes(l.SessionSegments("run", h)); ok {
		t.Errorf("the stray index of run was not dropped")
	}
	for id := range dirs {
		if err := hsPull(t, store, id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// Held: A session committed in the legacy layout (meta.json.sha256, segments.json, vault.enc), plus
// strays of a loser: a re-push and a conflicting push drop only the loser's; the session still pulls
// and the loser still cannot take the id.
func TestHostileLegacyLayoutSurvivesStrayDrops(t *testing.T) {
	ctx := context.Background()
	mem := NewMemObjectStore()
	l := Layout{}
	store := NewSessionStore(mem, l, StoreOptions{})
	wDir := filepath.Join(t.TempDir(), "run")
	wm := recordSession(t, wDir, "run", "", payloads(1, 2, 2000), testVault)
	if _, err := store.Push(ctx, wDir); err != nil {
		t.Fatal(err)
	}
	wMeta, _ := os.ReadFile(filepath.Join(wDir, "meta.json"))
	// rewrite into the legacy layout
	move := func(from, to string) {
		data, ok := mem.Bytes(from)
		if !ok {
			t.Fatalf("no %s", from)
		}
		mem.Set(to, data)
		mem.Delete(ctx, from)
	}
	move(l.SessionSegments("run", wm.EventsHash), l.SessionLegacySegments("run"))
	move(l.SessionVault("run", wm.VaultHash), l.SessionLegacyVault("run"))
	move(l.SessionMetaSum("run", sha256Hex(wMeta)), l.SessionLegacyMetaSum("run"))
	if err := hsPull(t, store, "run"); err != nil {
		t.Fatalf("setup: legacy layout does not pull: %v", err)
	}
	// a loser killed after storing its objects
	lDir := filepath.Join(t.TempDir(), "run")
	lm := recordSession(t, lDir, "run", "", payloads(40, 2, 2000), sealedBytes(3, 300))
	lMeta, _ := os.ReadFile(filepath.Join(lDir, "meta.json"))
	mem.Set(l.SessionMetaSum("run", sha256Hex(lMeta)), metaSumRecord(lMeta))
	mem.Set(l.SessionSegments("run", lm.EventsHash), []byte("{}"))
	mem.Set(l.SessionVault("run", lm.VaultHash), []byte("v"))
	legacy := []string{l.SessionLegacySegments("run"), l.SessionLegacyVault("run"), l.SessionLegacyMetaSum("run"), l.SessionMeta("run")}

	// the loser pushes again: refused, and its strays go
	_, err := store.Push(ctx, lDir)
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("the loser's push: %v, want a conflict", err)
	}
	for _, k := range legacy {
		if _, ok := mem.Bytes(k); !ok {
			t.Errorf("legacy object %s deleted by the loser's push", k)
		}
	}
	if got, _ := readObject(mem, l.SessionMeta("run")); !bytes.Equal(got, wMeta) {
		t.Errorf("the loser took the id")
	}
	// the winner re-pushes
	if _, err := store.Push(ctx, wDir); err != nil {
		t.Fatalf("winner re-push: %v", err)
	}
	for _, k := range legacy {
		if _, ok := mem.Bytes(k); !ok {
			t.Errorf("legacy object %s deleted by the winner's re-push", k)
		}
	}
	t.Logf("keys now: %v", keys(t, mem, l.SessionPrefix("run")))
	if err := hsPull(t, store, "run"); err != nil {
		t.Errorf("the legacy session no longer pulls: %v", err)
	}
	// the loser once more, after its strays are gone: still refused
	if _, err := store.Push(ctx, lDir); !errors.As(err, &ce) {
		t.Errorf("the loser's third push: %v, want a conflict", err)
	}
	if got, _ := readObject(mem, l.SessionMeta("run")); !bytes.Equal(got, wMeta) {
		t.Errorf("the loser took the id")
	}
}

// Held: The stored meta.json is damaged at rest and the loser's record is the only one left besides
// the winner's: the loser's push must not be able to take the id after dropStrays removed records.
func TestHostileLoserCannotTakeIDAfterStrayDrop(t *testing.T) {
	ctx := context.Background()
	mem := NewMemObjectStore()
	l := Layout{}
	store := NewSessionStore(mem, l, StoreOptions{})
	wDir := filepath.Join(t.TempDir(), "run")
	recordSession(t, wDir, "run", "", payloads(1, 2, 2000), testVault)
	lDir := filepath.Join(t.TempDir(), "run")
	lm := recordSession(t, lDir, "run", "", payloads(40, 2, 2000), sealedBytes(3, 300))
	if _, err := store.Push(ctx, wDir); err != nil {
		t.Fatal(err)
	}
	lMeta, _ := os.ReadFile(filepath.Join(lDir, "meta.json"))
	mem.Set(l.SessionMetaSum("run", sha256Hex(lMeta)), metaSumRecord(lMeta))
	mem.Set(l.SessionSegments("run", lm.EventsHash), []byte("{}"))
	// the winner's re-push drops the loser's record
	if _, err := store.Push(ctx, wDir); err != nil {
		t.Fatal(err)
	}
	// then meta.json is damaged at rest (a byte flipped)
	wMeta, _ := readObject(mem, l.SessionMeta("run"))
	bad := bytes.Clone(wMeta)
	bad[len(bad)/2] ^= 0x20
	mem.Set(l.SessionMeta("run"), bad)
	_, err := store.Push(ctx, lDir)
	t.Logf("loser's push against a damaged meta.json: %v", err)
	if got, _ := readObject(mem, l.SessionMeta("run")); bytes.Equal(got, lMeta) {
		t.Errorf("the loser took the id")
	}
	// winner repairs
	if _, err := store.Push(ctx, wDir); err != nil {
		t.Errorf("winner repair: %v", err)
	}
	if err := hsPull(t, store, "run"); err != nil {
		t.Errorf("winner does not pull: %v", err)
	}
}
