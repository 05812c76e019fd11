//go:build linux

package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// runMeasured runs the CLI in a child process and returns its exit code, stderr and peak RSS.
func runMeasured(t *testing.T, args ...string) (int, string, int64) {
	t.Helper()
	code, stderr, state := runCLIProcess(t, io.Discard, args...)
	return code, stderr, state.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
}

// hugeLine writes a log whose second line is n bytes to w, without holding it, and returns the
// offset of that line.
func hugeLine(t *testing.T, w io.Writer, n int64) int64 {
	t.Helper()
	first := `{"seq":0,"step":0,"ts":0,"lane":"0","callSite":"session","kind":"session_start","schemaVersion":3}` + "\n"
	body := io.MultiReader(strings.NewReader(first+`{"kind":"note","text":"`), io.LimitReader(zeros{}, n), strings.NewReader("\"}\n"))
	if _, err := io.Copy(w, body); err != nil {
		t.Fatal(err)
	}
	return int64(len(first))
}

// zeros reads as an endless run of '0'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// TestCommandsReadingALongLineStayWithinTheirMemoryBound: a 0.9 MB bundle whose events.jsonl is
// one 200 MB line was unpacked with 894 MB and inspected with 1.7 GB. unpack, inspect and verify now
// refuse the line with its offset, each as a process whose peak RSS stays within its bound: a
// process's baseline plus 64 MiB plus twice the line cap (the most a reader holds), for unpack a
// baseline plus 64 MiB (it streams).
func TestCommandsReadingALongLineStayWithinTheirMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MB")
	}
	const line = 200 << 20
	base := t.TempDir()
	// A session directory: a real meta.json committing the long log, so only the line is wrong.
	dir := filepath.Join(base, "session")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, session.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	offset := hugeLine(t, io.MultiWriter(f, h), line)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(fixtureSession(t), session.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	meta["eventsHash"] = hex.EncodeToString(h.Sum(nil))
	data, _ = json.Marshal(meta)
	if err := os.WriteFile(filepath.Join(dir, session.MetaFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The same log as a bundle.
	bundlePath := filepath.Join(base, "long.rewind")
	bf, err := os.Create(bundlePath)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(bf)
	tw := tar.NewWriter(gz)
	events, _ := os.Stat(filepath.Join(dir, session.EventsFile))
	for _, e := range []struct {
		name string
		size int64
	}{{session.MetaFile, int64(len(data))}, {session.EventsFile, events.Size()}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: e.size}); err != nil {
			t.Fatal(err)
		}
		src, err := os.Open(filepath.Join(dir, e.name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(tw, src)
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []io.Closer{tw, gz, bf} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if fi, _ := os.Stat(bundlePath); fi.Size() > 1<<20 {
		t.Fatalf("the bundle is %d bytes; the test wants a small one", fi.Size())
	}

	_, _, baseline := runMeasured(t, "version")
	where := fmt.Sprintf("line 2 (byte offset %d)", offset)
	for _, c := range []struct {
		args  []string
		bound int64
	}{
		{[]string{"unpack", bundlePath, filepath.Join(base, "out")}, baseline + 64<<20},
		{[]string{"inspect", dir}, baseline + 64<<20 + 2*session.MaxLineBytes},
		{[]string{"verify", dir}, baseline + 64<<20 + 2*session.MaxLineBytes},
	} {
		code, stderr, rss := runMeasured(t, c.args...)
		t.Logf("%s: peak RSS %d MiB (baseline %d MiB)", c.args[0], rss>>20, baseline>>20)
		if code != exitCorrupt || !strings.Contains(stderr, where) || !strings.Contains(stderr, "cap") {
			t.Errorf("%s: exit %d, stderr %q; want exit %d naming %s and the cap", c.args[0], code, stderr, exitCorrupt, where)
		}
		if rss > c.bound {
			t.Errorf("%s of a %d-byte line peaked at %d MiB RSS, over its %d MiB bound", c.args[0], line, rss>>20, c.bound>>20)
		}
	}
}
