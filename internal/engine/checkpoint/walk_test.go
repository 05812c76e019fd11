package checkpoint

import (
	"os"
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
