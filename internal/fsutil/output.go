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

// OutputKindError refuses an output path that is neither a file to replace (or nothing yet) nor a
// character device or FIFO to write into: a socket, a block device (writing would overwrite a disk),
// or a symbolic link that leads nowhere.
type OutputKindError struct {
	Output string
	Kind   string // "a socket", "a block device", "a symbolic link to a missing file"...
}

func (e *OutputKindError) Error() string {
	return fmt.Sprintf("%s is %s: write to a regular file, a character device or a FIFO", e.Output, e.Kind)
}

// WriteFileAtomic writes what write produces to path.
//
// A path that does not exist or is a regular file is replaced: write goes to a temporary file beside
// it, which is synced, given perm and renamed over path, so a reader — or a failure half way — never
// sees a truncated file, and an existing file is untouched until the new one is complete. A character
// device or FIFO (/dev/null, /dev/stdout, a named pipe) is written into, as a shell redirection would:
// it is never replaced, and perm does not apply. A symbolic link is followed: the file it leads to is
// replaced and the link kept, a device it leads to written into, and the file this process's stdout
// or stderr is (/dev/stdout redirected to a file) written into through that stream. A directory is refused
// (*OutputIsDirectoryError), and so is anything else (*OutputKindError). The rename only ever
// replaces a regular file: a path that became something else meanwhile is refused, not replaced.
// The temporary is named as this process's (see CreateTemp), and the ones killed writers left beside
// the file are removed first.
func WriteFileAtomic(path string, perm fs.FileMode, write func(io.Writer) error) (err error) {
	target, stream, err := outputTarget(path)
	if err != nil {
		return err
	}
	if f := processOutput(path); f != nil {
		return write(f) // /dev/stdout redirected to a file: the file the shell opened, at its offset
	}
	if stream {
		return writeInto(path, write)
	}
	RemoveStaleTemps(target, tempPurpose, time.Now())
	tmp, err := CreateTemp(target, tempPurpose)
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
	if err := RenameOverFile(tmp.Name(), target); err != nil {
		if target != path {
			err = fmt.Errorf("%s, which %s leads to: %w", target, path, err)
		}
		return err
	}
	syncDir(filepath.Dir(target))
	return nil
}

// RenameOverFile renames tmp to path only when path does not exist or is a regular file. Anything
// else there — a device, a FIFO, a socket, a link, a directory — is left alone and refused with an
// *OutputKindError (*OutputIsDirectoryError for a directory): a rename would replace the node itself,
// and /dev/null replaced by a file breaks every program on the machine. The check and the rename
// are two calls, so a path swapped between them is not caught; what a caller checked earlier is
// checked again here, right before the rename.
func RenameOverFile(tmp, path string) error {
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case info.IsDir():
		return &OutputIsDirectoryError{Output: path}
	case !info.Mode().IsRegular():
		return &OutputKindError{Output: path, Kind: kindOf(info.Mode())}
	}
	return os.Rename(tmp, path)
}

// outputTarget says where WriteFileAtomic writes path: the regular file (or free name) to replace,
// which for a symbolic link is the file it leads to, or stream when path is a device or FIFO to be
// written into.
func outputTarget(path string) (target string, stream bool, err error) {
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, false, nil
	case err != nil:
		return "", false, err
	case info.Mode()&fs.ModeSymlink == 0:
		return path, isStream(info.Mode()), checkKind(path, info.Mode())
	}
	info, err = os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, &OutputKindError{Output: path, Kind: "a symbolic link to a missing file"}
	}
	if err != nil {
		return "", false, err
	}
	if err := checkKind(path, info.Mode()); err != nil || !info.Mode().IsRegular() {
		return path, err == nil, err
	}
	if processOutput(path) != nil {
		return path, true, nil
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", false, &OutputKindError{Output: path, Kind: fmt.Sprintf("a symbolic link that cannot be resolved to a file name (%v)", err)}
	}
	if info, err := os.Lstat(resolved); err != nil || !info.Mode().IsRegular() {
		return "", false, &OutputKindError{Output: path, Kind: "a symbolic link to " + resolved + ", which is not a regular file"}
	}
	return resolved, false, nil
}

// processOutput returns this process's stdout or stderr when path is a symbolic link to the regular
// file it is (/dev/stdout, /dev/fd/1 with stdout redirected to a file): that file is written into,
// as the shell set it up (appending, say), never replaced under it. Otherwise nil.
func processOutput(path string) *os.File {
	if info, err := os.Lstat(path); err != nil || info.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() {
		return nil
	}
	for _, f := range []*os.File{os.Stdout, os.Stderr} {
		if fi, err := f.Stat(); err == nil && os.SameFile(fi, info) {
			return f
		}
	}
	return nil
}

// checkKind refuses what WriteFileAtomic neither replaces nor writes into.
func checkKind(path string, m fs.FileMode) error {
	switch {
	case m.IsDir():
		return &OutputIsDirectoryError{Output: path}
	case m.IsRegular(), isStream(m):
		return nil
	}
	return &OutputKindError{Output: path, Kind: kindOf(m)}
}

// IsStreamOutput reports whether WriteFileAtomic writes into path rather than replacing it: a
// character device or FIFO, a link to one, or a link to the file this process's stdout or stderr is
// (/dev/stdout). A command writing there prints its
// messages to stderr, so they cannot end up inside its output.
func IsStreamOutput(path string) bool {
	info, err := os.Stat(path)
	return err == nil && isStream(info.Mode()) || processOutput(path) != nil
}

// isStream reports whether m is a node written into rather than replaced.
func isStream(m fs.FileMode) bool {
	return m&fs.ModeNamedPipe != 0 || m&fs.ModeCharDevice != 0
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// writeInto writes into the device or FIFO at path, following links as open does. A FIFO blocks
// until a reader opens it, as a shell redirection would. The node is checked again once open, so a
// file put there meanwhile is not overwritten in place.
func writeInto(path string, write func(io.Writer) error) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !isStream(info.Mode()) {
		return &OutputKindError{Output: path, Kind: "no longer a character device or FIFO (" + kindOf(info.Mode()) + ")"}
	}
	return write(f)
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
