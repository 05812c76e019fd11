package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// writerWithEvents is a session being written in dir, with a few events appended.
func writerWithEvents(t *testing.T, dir string) *Writer {
	t.Helper()
	w, err := Create(dir, Meta{ID: "s1", FingerprintMode: "strict"}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range sampleEvents("answer") {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// watchSyncs shows every file the writer syncs to see until the test ends; a file see fails is not
// synced and the writer gets see's error.
func watchSyncs(t *testing.T, see func(f *os.File) error) {
	realSync := fsync
	fsync = func(f *os.File) error {
		if err := see(f); err != nil {
			return err
		}
		return realSync(f)
	}
	t.Cleanup(func() { fsync = realSync })
}

// putBlobsFromLanes stores blobs distinct blobs from lanes goroutines at once, each lane putting every
// blob (the same digest written concurrently), and returns their paths.
func putBlobsFromLanes(t *testing.T, w *Writer, blobs, lanes int) []string {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, lanes)
	for lane := range lanes {
		wg.Go(func() {
			for i := range blobs {
				if _, err := w.PutBlob(fmt.Appendf(nil, `{"blob":%d}`, i)); err != nil && errs[lane] == nil {
					errs[lane] = err
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(w.Dir(), BlobsDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestCloseCommitsNothingWhenASyncFails makes one sync fail during Close — one blob's among the many
// synced at once, the blobs directory's, or meta.json's own — as a crash or a disk error between the
// blob syncs and the commit would (the session directory's too): Close returns that error naming what failed, no meta.json and no
// temporary file is left, and the session reads as uncommitted.
func TestCloseCommitsNothingWhenASyncFails(t *testing.T) {
	for _, fail := range []string{"a blob", BlobsDir, "the session directory", MetaFile} {
		t.Run(fail, func(t *testing.T) {
			dir := t.TempDir()
			w := writerWithEvents(t, dir)
			blobs := putBlobsFromLanes(t, w, 3*blobSyncers+5, 4)
			target := map[string]string{"a blob": blobs[len(blobs)/2], BlobsDir: filepath.Join(dir, BlobsDir),
				"the session directory": dir, MetaFile: filepath.Join(dir, "."+MetaFile+".tmp-")}[fail]
			injected := errors.New("injected sync failure")
			watchSyncs(t, func(f *os.File) error {
				if f.Name() == target || fail == MetaFile && strings.HasPrefix(f.Name(), target) {
					return injected
				}
				return nil
			})

			_, err := w.Close(nil)
			if !errors.Is(err, injected) {
				t.Fatalf("Close = %v, want the injected sync failure", err)
			}
			if fail != MetaFile && !strings.Contains(err.Error(), filepath.Base(target)) {
				t.Errorf("Close's error %q does not name %s", err, filepath.Base(target))
			}
			if _, err := Open(dir); !errors.Is(err, ErrNotCommitted) {
				t.Errorf("Open after the failed Close = %v, want %v", err, ErrNotCommitted)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*"))
			if len(left) != 0 {
				t.Errorf("the failed Close left %v", left)
			}
		})
	}
}

// TestABlobPutFromSeveralLanesAtOnceIsStoredAndSyncedOnce stores the same blobs from several goroutines
// at once: each is one file with its content, synced exactly once by Close, and the session commits.
func TestABlobPutFromSeveralLanesAtOnceIsStoredAndSyncedOnce(t *testing.T) {
	dir := t.TempDir()
	w := writerWithEvents(t, dir)
	const distinct = 40
	blobs := putBlobsFromLanes(t, w, distinct, 8)
	if len(blobs) != distinct {
		t.Fatalf("%d blob files after putting %d distinct blobs from 8 lanes, want %d", len(blobs), distinct, distinct)
	}
	var mu sync.Mutex
	syncs := map[string]int{}
	watchSyncs(t, func(f *os.File) error {
		mu.Lock()
		syncs[f.Name()]++
		mu.Unlock()
		return nil
	})
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	for _, path := range blobs {
		if syncs[path] != 1 {
			t.Errorf("%s synced %d times, want once", filepath.Base(path), syncs[path])
		}
	}
	if _, err := Open(dir); err != nil {
		t.Fatalf("the committed session does not open: %v", err)
	}
}

// TestCloseSyncsTheSessionDirectoryBeforeCommitting watches Close's syncs: the session directory, which
// holds the names events.jsonl and blobs/, is synced after the log and before meta.json is written, so
// a crash cannot keep the commit and lose the entries it vouches for.
func TestCloseSyncsTheSessionDirectoryBeforeCommitting(t *testing.T) {
	dir := t.TempDir()
	w := writerWithEvents(t, dir)
	var mu sync.Mutex
	var order []string
	watchSyncs(t, func(f *os.File) error {
		mu.Lock()
		order = append(order, f.Name())
		mu.Unlock()
		return nil
	})
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	dirAt, metaAt := -1, -1
	for i, name := range order {
		switch {
		case name == dir:
			dirAt = i
		case strings.HasPrefix(name, filepath.Join(dir, "."+MetaFile+".tmp-")):
			metaAt = i
		}
	}
	if dirAt < 0 || metaAt < 0 || dirAt > metaAt {
		t.Errorf("Close synced %v: want %s synced before meta.json's temporary file", order, dir)
	}
}
