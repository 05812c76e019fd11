package fsutil

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOutputOutsideRefusesEverySpellingOfTheInput(t *testing.T) {
	base := t.TempDir()
	session := filepath.Join(base, "runs", "42")
	mustMkdir(t, filepath.Join(session, "blobs"))
	mustMkdir(t, filepath.Join(base, "runs", "42-bundles"))
	mustWrite(t, filepath.Join(session, "events.jsonl"), "log")
	mustSymlink(t, session, filepath.Join(base, "alias"))                         // a link to the session
	mustSymlink(t, filepath.Join(session, "blobs"), filepath.Join(base, "blobs")) // a link into it
	mustSymlink(t, filepath.Join(session, "events.jsonl"), filepath.Join(base, "runs", "42-bundles", "link"))
	mustWrite(t, filepath.Join(session, "blobs", "b1"), "blob")
	mustWrite(t, filepath.Join(base, "runs", "42-bundles", "other"), "not the session's")
	mustSymlink(t, filepath.Join(base, "runs", "42-bundles", "other"), filepath.Join(base, "runs", "42-bundles", "elsewhere"))
	mustSymlink(t, filepath.Join(base, "nowhere"), filepath.Join(base, "runs", "42-bundles", "dangling"))
	mustLink(t, filepath.Join(session, "events.jsonl"), filepath.Join(base, "runs", "42-bundles", "hard"))
	mustLink(t, filepath.Join(session, "blobs", "b1"), filepath.Join(base, "runs", "42-bundles", "hardblob"))

	cases := []struct {
		name, output, input string
		inside              bool
	}{
		{"the events log", filepath.Join(session, "events.jsonl"), session, true},
		{"a new file in the session", filepath.Join(session, "out.rewind"), session, true},
		{"a blob", filepath.Join(session, "blobs", "x"), session, true},
		{"the session directory itself", session, session, true},
		{"through ..", filepath.Join(session, "blobs", "..", "events.jsonl"), session, true},
		{"back into the session through ..", filepath.Join(base, "runs", "42-bundles", "..", "42", "meta.json"), session, true},
		{"through a symlinked directory", filepath.Join(base, "alias", "events.jsonl"), session, true},
		{"through a link into the session", filepath.Join(base, "blobs", "x"), session, true},
		{"input named through a link", filepath.Join(session, "events.jsonl"), filepath.Join(base, "alias"), true},
		{"relative ..", filepath.Join(session, "blobs", ".."), session, true},
		{"a sibling whose name extends the session's", filepath.Join(base, "runs", "42-bundles", "out.rewind"), session, false},
		{"the parent directory", filepath.Join(base, "runs", "out.rewind"), session, false},
		{"a link elsewhere pointing into the session", filepath.Join(base, "runs", "42-bundles", "link"), session, true},
		{"a hard link elsewhere to a file of the session", filepath.Join(base, "runs", "42-bundles", "hard"), session, true},
		{"a hard link to a blob", filepath.Join(base, "runs", "42-bundles", "hardblob"), session, true},
		{"a link to a file outside", filepath.Join(base, "runs", "42-bundles", "elsewhere"), session, false},
		{"a dangling link", filepath.Join(base, "runs", "42-bundles", "dangling"), session, false},
		{"an existing file outside", filepath.Join(base, "runs", "42-bundles", "other"), session, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutputOutside(tc.output, tc.input)
			var oi *OutputInsideInputError
			if got := errors.As(err, &oi); got != tc.inside || (!tc.inside && err != nil) {
				t.Fatalf("CheckOutputOutside(%s, %s) = %v, want inside=%v", tc.output, tc.input, err, tc.inside)
			}
		})
	}
	if err := CheckOutputOutside(filepath.Join(base, "missing", "out"), session); err == nil {
		t.Fatal("an output in a directory that does not exist was accepted")
	}
	var isDir *OutputIsDirectoryError
	if err := CheckOutputOutside(filepath.Join(base, "runs", "42-bundles"), session); !errors.As(err, &isDir) ||
		!strings.Contains(err.Error(), "the output is a directory: give a file name") {
		t.Fatalf("an output that is a directory: %v", err)
	}
}

// TestWriteFileAtomicRefusesADirectory says so rather than failing the rename with "file exists".
func TestWriteFileAtomicRefusesADirectory(t *testing.T) {
	dir := t.TempDir()
	var isDir *OutputIsDirectoryError
	if err := WriteFileAtomic(dir, 0o644, func(io.Writer) error { return nil }); !errors.As(err, &isDir) {
		t.Fatalf("WriteFileAtomic over a directory: %v", err)
	}
}

func TestWriteFileAtomicReplacesOnlyWithACompleteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	mustWrite(t, path, "old content")
	boom := errors.New("disk full")
	err := WriteFileAtomic(path, 0o644, func(w io.Writer) error {
		_, _ = w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if got := read(t, path); got != "old content" {
		t.Fatalf("a failed write changed the file to %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a failed write left %v", entries)
	}
	if err := WriteFileAtomic(path, 0o640, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	if got := read(t, path); got != "new" || info.Mode().Perm() != 0o640 {
		t.Fatalf("content %q mode %v", got, info.Mode())
	}

	// A link is followed: the file it leads to is replaced, the link kept.
	target := filepath.Join(dir, "target")
	mustWrite(t, target, "old")
	link := filepath.Join(dir, "link")
	mustSymlink(t, target, link)
	if err := WriteFileAtomic(link, 0o644, func(w io.Writer) error { _, err := w.Write([]byte("bundle")); return err }); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Lstat(link); err != nil || info.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", info, err)
	}
	if read(t, target) != "bundle" {
		t.Fatalf("target %q", read(t, target))
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
}

func mustLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Link(target, link); err != nil {
		t.Skipf("cannot create hard links here: %v", err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
