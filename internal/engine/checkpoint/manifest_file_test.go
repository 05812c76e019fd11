package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAManifestThatIsNotARegularFileIsRefusedNotWaitedOn: whatever is put where a local store keeps a
// manifest — a named pipe (open and read block forever, past --timeout and SIGTERM), a link to
// /dev/zero (read until memory runs out), a device, any other link or a file larger than a manifest
// may be — listing, loading and a new capture beside it answer at once: that one checkpoint is
// refused as corrupt, the others stay usable.
func TestAManifestThatIsNotARegularFileIsRefusedNotWaitedOn(t *testing.T) {
	cases := map[string]func(t *testing.T, p, good string){
		"fifo": func(t *testing.T, p, _ string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Skipf("no FIFO here: %v", err)
			}
		},
		"link to /dev/zero": func(t *testing.T, p, _ string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		},
		"link to a manifest": func(t *testing.T, p, good string) {
			if err := os.Symlink(good, p); err != nil {
				t.Fatal(err)
			}
		},
		"character device": func(t *testing.T, p, _ string) {
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o644, 1<<8|5); err != nil { // 1:5 is /dev/zero
				t.Skipf("cannot make a device here: %v", err)
			}
		},
		"oversized file": func(t *testing.T, p, _ string) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, manifestLimit+1); err != nil { // sparse: costs no space
				t.Fatal(err)
			}
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			ws, st := t.TempDir(), OpenStore(t.TempDir())
			write(t, ws, map[string]string{"a.txt": "one"})
			now := clock()
			good := create(t, st, ws, now, 1)
			bad := strings.Repeat("ab", 32)
			p, err := DirManifests{Dir: storeDir(st)}.path(bad)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			goodPath, _ := DirManifests{Dir: storeDir(st)}.path(good.ID)
			plant(t, p, goodPath)

			done := make(chan struct{})
			go func() {
				defer close(done)
				_, err := st.Load(ctx, bad)
				var me *ManifestError
				if !errors.As(err, &me) {
					t.Errorf("Load of a %s: %v, want a ManifestError", name, err)
				}
				list, unreadable, err := st.Scan(ctx)
				if err != nil || len(list) != 1 || list[0].ID != good.ID || len(unreadable) != 1 || unreadable[0].ID != bad {
					t.Errorf("Scan beside a %s: %v %v %v, want the good checkpoint and the bad one unreadable", name, list, unreadable, err)
				}
				write(t, ws, map[string]string{"a.txt": "two"})
				if _, err := st.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(2), Now: now}); err != nil {
					t.Errorf("a capture beside a %s: %v", name, err)
				}
				if _, err := st.Restore(ctx, ws, good.ID, RestoreOptions{Guard: GuardRequire, Now: now}); err != nil || read(t, filepath.Join(ws, "a.txt")) != "one" {
					t.Errorf("a restore beside a %s: %v", name, err)
				}
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("the store blocked on a manifest that is a %s", name)
			}
		})
	}
}

// TestSaveRefusesAManifestTooLargeToBeReadBack: a checkpoint the store would then refuse to read is
// never written.
func TestSaveRefusesAManifestTooLargeToBeReadBack(t *testing.T) {
	defer func(n int64) { manifestLimit = n }(manifestLimit)
	manifestLimit = 4096
	ws, st := t.TempDir(), OpenStore(t.TempDir())
	files := map[string]string{}
	for i := range 40 {
		files[strconv.Itoa(i)+strings.Repeat("x", 200)] = "x" // names sharing no prefix
	}
	write(t, ws, files)
	if _, err := st.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(1)}); err == nil || !strings.Contains(err.Error(), "more than a manifest may hold") {
		t.Fatalf("a capture whose manifest is over the limit: %v", err)
	}
	if ids, _ := st.Manifests.List(ctx); len(ids) != 0 {
		t.Fatalf("an oversized manifest was stored: %v", ids)
	}
}
