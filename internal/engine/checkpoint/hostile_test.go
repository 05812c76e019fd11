package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestABlobThatIsAFIFOIsRefusedNotWaitedOn: a named pipe put where a blob belongs used to block the
// restore forever in open(2); it is refused before anything is written.
func TestABlobThatIsAFIFOIsRefusedNotWaitedOn(t *testing.T) {
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "original"})
	c := create(t, st, ws, clock(), 1)
	blob, err := DirBlobs{Dir: storeDir(st)}.path(hashOf("original"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(blob, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	write(t, ws, map[string]string{"a.txt": "changed"})
	before := tree(t, ws)
	done := make(chan error, 1)
	go func() {
		_, err := st.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardOff, Now: clock()})
		done <- err
	}()
	select {
	case err := <-done:
		var bh *BlobHashError
		if !errors.As(err, &bh) {
			t.Fatalf("restore with a FIFO for a blob: %v, want a BlobHashError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("restore blocked on a FIFO blob")
	}
	if after := tree(t, ws); read(t, filepath.Join(ws, "a.txt")) != "changed" || len(after) != len(before) {
		t.Fatalf("the refused restore wrote into the workspace: %v", after)
	}
}

// TestAWorkspaceThatIsASymlinkIsRefused: restore and preview refuse a workspace path that is itself a
// link, as they refuse one anywhere below it.
func TestAWorkspaceThatIsASymlinkIsRefused(t *testing.T) {
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a.txt": "original"})
	c := create(t, st, ws, clock(), 1)
	victim := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Preview(ctx, link, c.ID, nil); err == nil {
		t.Fatal("preview through a symlinked workspace was accepted")
	}
	if _, err := st.Restore(ctx, link, c.ID, RestoreOptions{Guard: GuardOff, Now: clock()}); err == nil {
		t.Fatal("restore through a symlinked workspace was accepted")
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 0 {
		t.Fatalf("the restore wrote where the link points: %v", entries)
	}
}

// TestAnIDPrefixOfAnotherSessionIsNotFound: with a session given, an id prefix names only that
// session's checkpoints.
func TestAnIDPrefixOfAnotherSessionIsNotFound(t *testing.T) {
	list := []Summary{{ID: "aaaa1111", Anchor: Anchor{Session: "B", Step: 1}}}
	if _, err := Resolve(list, "A", "aaaa"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve of session B's checkpoint for session A: %v", err)
	}
	if s, err := Resolve(list, "B", "aaaa"); err != nil || s.ID != "aaaa1111" {
		t.Fatalf("Resolve within its own session: %v %v", s, err)
	}
	if s, err := Resolve(list, "", "aaaa"); err != nil || s.ID != "aaaa1111" {
		t.Fatalf("Resolve without a session: %v %v", s, err)
	}
}

// TestTheGuardHoldsEveryFileTheRestoreOverwrites: a manifest (edited in the store, id recomputed)
// whose excludes cover a file it writes must not leave that file out of the guard, or the restore
// could not be undone for it.
func TestTheGuardHoldsEveryFileTheRestoreOverwrites(t *testing.T) {
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"keep/notes.txt": "mine", "a.txt": "a"})
	blobs := DirBlobs{Dir: storeDir(st)}
	if err := blobs.Put(ctx, hashOf("theirs"), 6, strings.NewReader("theirs")); err != nil {
		t.Fatal(err)
	}
	m := &Manifest{SchemaVersion: 1, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Anchor: recorderAnchor(1),
		Reason: "capture", Excludes: []string{"keep/", "*.log"},
		Files: []Entry{{Path: "keep/notes.txt", Type: TypeFile, Mode: 0o644, Size: 6, Hash: hashOf("theirs")}}}
	id, err := st.Save(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Restore(ctx, ws, id, RestoreOptions{Guard: GuardRequire, Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := st.Load(ctx, res.Guard)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for _, e := range guard.Files {
		held[e.Path] = e.Hash
	}
	if held["keep/notes.txt"] != hashOf("mine") {
		t.Fatalf("the guard does not hold the overwritten keep/notes.txt: %v (excludes %v)", held, guard.Excludes)
	}
	if !slices.Contains(guard.Excludes, "*.log") || slices.Contains(guard.Excludes, "keep/") {
		t.Fatalf("guard excludes %v: only the ones covering a restored path are dropped", guard.Excludes)
	}
}
