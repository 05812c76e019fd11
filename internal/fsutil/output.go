package fsutil

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// OutputInsideInputError refuses an output path that resolves into the directory a command reads:
// writing there would change (or replace) one of its inputs.
type OutputInsideInputError struct {
	Output string // as given
	Input  string // the directory, as given
	// Resolved is the output's path once symlinks and ".." in its directory are resolved.
	Resolved string
}

func (e *OutputInsideInputError) Error() string {
	return fmt.Sprintf("output %s resolves to %s, inside %s, which this command reads: write it somewhere else", e.Output, e.Resolved, e.Input)
}

// CheckOutputOutside returns an *OutputInsideInputError when output, with symlinks and ".." resolved,
// is inputDir itself or lies under it. The output's directory must exist; the output itself need not,
// and when it is a symlink it is judged by where the link is, since an atomic write replaces the link
// rather than writing through it.
func CheckOutputOutside(output, inputDir string) error {
	in, err := resolve(inputDir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", inputDir, err)
	}
	abs, err := filepath.Abs(output)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", output, err)
	}
	parent, err := resolve(filepath.Dir(abs))
	if err != nil {
		return fmt.Errorf("resolving the directory of %s: %w", output, err)
	}
	out := filepath.Join(parent, filepath.Base(abs))
	if within(out, in) {
		return &OutputInsideInputError{Output: output, Input: inputDir, Resolved: out}
	}
	return nil
}

func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// within reports whether path is dir or below it; both are absolute and clean.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// WriteFileAtomic replaces path with what write produces: it writes to a temporary file beside path,
// syncs it, gives it perm and renames it over path, so a reader — or a failure half way — never sees
// a truncated file, and an existing file is untouched until the new one is complete. When path is a
// symlink, the link is replaced, not its target.
func WriteFileAtomic(path string, perm fs.FileMode, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), perm); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// syncDir makes a rename in dir durable where the platform allows; failing to is not an error.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
