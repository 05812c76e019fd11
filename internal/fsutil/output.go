package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
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

// OutputIsDirectoryError refuses an output path that names a directory: a command writes a file.
type OutputIsDirectoryError struct {
	Output string
}

func (e *OutputIsDirectoryError) Error() string {
	return fmt.Sprintf("%s: the output is a directory: give a file name", e.Output)
}

// CheckOutputOutside returns an *OutputInsideInputError when output, with symlinks and ".." resolved,
// is inputDir itself or lies under it, and an *OutputIsDirectoryError when it is a directory. The
// output's directory must exist; the output itself need not. An existing output is also resolved
// itself: a symlink that leads into inputDir, or a hard link to one of its files (same device and
// inode), is refused like the file it reaches, since whoever named it meant that file.
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
	info, err := os.Stat(out) // follows a link at the last component
	if errors.Is(err, fs.ErrNotExist) {
		return nil // missing, or a dangling link: nothing of the input is there
	}
	if err != nil {
		return fmt.Errorf("resolving %s: %w", output, err)
	}
	if target, err := filepath.EvalSymlinks(out); err == nil && within(target, in) {
		return &OutputInsideInputError{Output: output, Input: inputDir, Resolved: target}
	}
	if info.IsDir() {
		return &OutputIsDirectoryError{Output: output}
	}
	if same, err := sameFileUnder(info, in); err != nil {
		return fmt.Errorf("comparing %s with the files of %s: %w", output, inputDir, err)
	} else if same != "" {
		return &OutputInsideInputError{Output: output, Input: inputDir, Resolved: same}
	}
	return nil
}

// sameFileUnder returns the file under dir that is info's file (a hard link to it), or "".
func sameFileUnder(info fs.FileInfo, dir string) (string, error) {
	var found string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		}
		if err != nil {
			return err
		}
		if os.SameFile(info, fi) {
			found = path
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
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
// symlink, the link is replaced, not its target; a directory is refused (*OutputIsDirectoryError).
// The temporary is named as this process's (see CreateTemp), and the ones killed writers left beside
// path are removed first.
func WriteFileAtomic(path string, perm fs.FileMode, write func(io.Writer) error) (err error) {
	if info, err := os.Lstat(path); err == nil && info.IsDir() {
		return &OutputIsDirectoryError{Output: path}
	}
	RemoveStaleTemps(path, tempPurpose, time.Now())
	tmp, err := CreateTemp(path, tempPurpose)
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

// tempPurpose names WriteFileAtomic's temporaries: .<name>.tmp-<owner>.
const tempPurpose = "tmp"

// syncDir makes a rename in dir durable where the platform allows; failing to is not an error.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
