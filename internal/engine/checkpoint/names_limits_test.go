package checkpoint

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAManifestNameTheKernelWouldRefuseIsRefusedBeforeWriting: a manifest entry whose name has a
// segment longer than NAME_MAX (255 bytes) or a link target longer than PATH_MAX-1 (4095 bytes) can
// never be written: symlink(2) and open(2) answer ENAMETOOLONG. Such a manifest validated, and the
// restore wrote every file sorted before that entry and then failed: a partial restore. It is refused
// as a ManifestError before anything is written.
func TestAManifestNameTheKernelWouldRefuseIsRefusedBeforeWriting(t *testing.T) {
	for name, bad := range map[string]Entry{
		"a segment of 256 bytes":      {Path: "b/" + strings.Repeat("n", 256), Type: TypeFile, Mode: 0o644, Size: 3, Hash: hashOf("new")},
		"a link target of 4096 bytes": {Path: "b/link", Type: TypeSymlink, Target: strings.Repeat("t", 4096)},
	} {
		t.Run(name, func(t *testing.T) {
			ws, st := t.TempDir(), OpenStore(t.TempDir())
			write(t, ws, map[string]string{"a.txt": "new"})
			create(t, st, ws, clock(), 1) // stores the blob of "new"
			write(t, ws, map[string]string{"a.txt": "old"})
			before := tree(t, ws)
			m := &Manifest{SchemaVersion: SchemaVersion, Reason: "capture", Files: []Entry{{Path: "a.txt", Type: TypeFile, Mode: 0o644, Size: 3, Hash: hashOf("new")}, bad}}
			var me *ManifestError
			if err := m.Validate(); !errors.As(err, &me) {
				t.Fatalf("Validate: %v, want a ManifestError", err)
			}
			_, err := st.RestoreManifest(ctx, ws, strings.Repeat("c", 64), m, RestoreOptions{Guard: GuardOff, Now: clock()})
			if !errors.As(err, &me) {
				t.Fatalf("restore: %v, want a ManifestError", err)
			}
			if d := cmp.Diff(before, tree(t, ws)); d != "" || read(t, filepath.Join(ws, "a.txt")) != "old" {
				t.Errorf("the refused restore wrote (-before +after):\n%s", d)
			}
		})
	}
	ok := &Manifest{SchemaVersion: SchemaVersion, Files: []Entry{{Path: strings.Repeat("n", 255), Type: TypeSymlink, Target: strings.Repeat("t", 4095)}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a 255-byte name linking to a 4095-byte target: %v", err)
	}
}
