package checkpoint

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAPreviewOfARestoreThatDoesNotFitSaysSo: the preview resolves as the restore does, so a restore
// the file system has no room for is refused by its preview too (it used to say what it would write,
// exit 0, and the restore then refused with NoSpaceError), and the preview writes nothing either way.
func TestAPreviewOfARestoreThatDoesNotFitSaysSo(t *testing.T) {
	mnt := mountTmpfs(t, "1m")
	ws, store := filepath.Join(mnt, "ws"), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"big.bin": strings.Repeat("b", 600<<10)})
	c := create(t, store, ws, clock(), 1)
	write(t, ws, map[string]string{"big.bin": "small"}) // first: with it whole the filler does not fit
	write(t, ws, map[string]string{"filler.bin": strings.Repeat("f", 500<<10)})
	before := tree(t, ws)
	_, perr := store.Preview(ctx, ws, c.ID, nil)
	_, rerr := store.Restore(ctx, ws, c.ID, RestoreOptions{Guard: GuardOff, Now: clock()})
	var pns, rns *NoSpaceError
	if !errors.As(perr, &pns) || !errors.As(rerr, &rns) || pns.Need != rns.Need {
		t.Fatalf("preview: %v; restore: %v; want the same NoSpaceError from both", perr, rerr)
	}
	if d := cmp.Diff(before, tree(t, ws)); d != "" {
		t.Errorf("the preview or the refused restore wrote (-before +after):\n%s", d)
	}
}
