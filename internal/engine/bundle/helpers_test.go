package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// entry is one tar entry of a hand-built (possibly hostile) bundle.
type entry struct {
	hdr  tar.Header
	body string
}

func file(name, body string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body: body}
}

func special(name string, typ byte, linkname string) entry {
	return entry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: linkname, Mode: 0o644, Devmajor: 1, Devminor: 3}}
}

func tarBytes(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&e.hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipBytes(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func bundleOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	return gzipBytes(t, tarBytes(t, entries...))
}

func sha(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

func blobName(content string) string { return "blobs/" + sha(content) }

// writeTree creates files (relative slash paths → content) under dir, with 0644 permissions.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree returns every file under dir (relative slash path → content); directories are listed
// with a trailing slash and empty content, so an empty blobs/ left behind is visible too.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			tree[rel+"/"] = ""
			return nil
		}
		data, err := os.ReadFile(path)
		tree[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// assertError checks that err is (or wraps) an error of want's type with an equal value.
func assertError[E error](t *testing.T, err error, want E) {
	t.Helper()
	got, ok := errors.AsType[E](err)
	if !ok {
		t.Fatalf("err = %v (%T), want %T %v", err, err, want, want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("err = %#v\nwant  %#v", got, want)
	}
}

func emptyDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "dest")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
