package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTheWalkVisitsEntriesInPathOrder: siblings are ordered as their paths are, a directory's name
// as if followed by "/" ("a-b" and "a.c" before the directory "a", "a0" after it), so a capture's
// entries need no sort; a directory the walk is told not to enter is visited but not read.
func TestTheWalkVisitsEntriesInPathOrder(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"a/x": "1", "a-b": "2", "a.c": "3", "a0": "4", "a/b/c": "5", "a b": "6", "skip/y": "7", "z": "8"})
	root, err := os.OpenRoot(ws)
	must(t, err)
	defer root.Close()
	tree, err := readTree(ctx, root, walkOptions{descend: func(rel string) bool { return rel != "skip" }, stat: true})
	must(t, err)
	var got []string
	must(t, visitTree(tree, func(rel string, c *walkChild, err error) error {
		must(t, err)
		if c.typ == 0 && !c.statted {
			t.Errorf("%s: no stat taken", rel)
		}
		got = append(got, rel)
		return nil
	}))
	want := []string{"a b", "a-b", "a.c", "a", "a/b", "a/b/c", "a/x", "a0", "skip", "z"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("visit order (-want +got):\n%s", d)
	}
	var files []string
	for _, p := range got {
		if p != "a" && p != "a/b" && p != "skip" {
			files = append(files, p)
		}
	}
	if !slices.IsSorted(files) {
		t.Errorf("the files %v are not in path order", files)
	}
}

// TestADirectoryThatVanishesBeforeItIsReadIsReportedNotFatal: a directory removed between its
// parent's listing and its own read is passed to the visit as gone (a capture reports it in
// Vanished), and the rest of the tree is still read.
func TestADirectoryThatVanishesBeforeItIsReadIsReportedNotFatal(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"gone/x": "1", "kept/y": "2"})
	root, err := os.OpenRoot(ws)
	must(t, err)
	defer root.Close()
	descend := func(rel string) bool {
		if rel == "gone" {
			must(t, os.RemoveAll(filepath.Join(ws, "gone")))
		}
		return true
	}
	tree, err := readTree(ctx, root, walkOptions{descend: descend})
	must(t, err)
	var visited, vanished []string
	must(t, visitTree(tree, func(rel string, _ *walkChild, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			vanished = append(vanished, rel)
			return fs.SkipDir
		}
		must(t, err)
		visited = append(visited, rel)
		return nil
	}))
	if d := cmp.Diff([]string{"gone"}, vanished); d != "" {
		t.Errorf("vanished (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"kept", "kept/y"}, visited); d != "" {
		t.Errorf("visited (-want +got):\n%s", d)
	}
}
