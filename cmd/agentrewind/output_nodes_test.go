//go:build unix

package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOutputsWriteIntoDevicesAndFIFOs: pack and resume-plan --output-file given a character device,
// a FIFO or a link to either write into it, as a shell redirection would, and leave the node in
// place; run as root they used to rename a regular file over it (pack S /dev/null replaced the
// machine's /dev/null). A socket is refused with the reason.
func TestOutputsWriteIntoDevicesAndFIFOs(t *testing.T) {
	session := fixtureSession(t)
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		null = os.DevNull // not root: the machine's own, which only root could have replaced
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	if err := os.Symlink(null, filepath.Join(dir, "to-null")); err != nil {
		t.Skipf("cannot make a symlink here: %v", err)
	}
	_ = os.Symlink(fifo, filepath.Join(dir, "to-fifo"))
	// Gzip magic for a bundle, a JSON document for a plan.
	isBundle := func(b []byte) bool { _, err := gzip.NewReader(bytes.NewReader(b)); return err == nil }
	isPlan := func(b []byte) bool { return json.Valid(b) && bytes.Contains(b, []byte(`"session"`)) }
	commands := []struct {
		name  string
		args  func(out string) []string
		valid func([]byte) bool
	}{
		{"pack", func(out string) []string { return []string{"pack", session, out} }, isBundle},
		{"resume-plan", func(out string) []string {
			return []string{"engine", "resume-plan", "--session", session, "--output-file", out}
		}, isPlan},
	}
	for _, c := range commands {
		for _, out := range []struct {
			path string
			kind fs.FileMode
			fifo bool
		}{
			{null, fs.ModeDevice | fs.ModeCharDevice, false},
			{filepath.Join(dir, "to-null"), fs.ModeSymlink, false},
			{fifo, fs.ModeNamedPipe, true},
			{filepath.Join(dir, "to-fifo"), fs.ModeSymlink, true},
		} {
			t.Run(c.name+" "+filepath.Base(out.path), func(t *testing.T) {
				got := make(chan []byte, 1)
				if out.fifo {
					go func() {
						f, err := os.Open(fifo)
						if err != nil {
							got <- nil
							return
						}
						defer f.Close()
						data, _ := io.ReadAll(f)
						got <- data
					}()
				}
				if _, err := runCLI(t, c.args(out.path)...); err != nil {
					t.Fatalf("%s into %s: %v", c.name, out.path, err)
				}
				if info, err := os.Lstat(out.path); err != nil || info.Mode().Type() != out.kind {
					t.Fatalf("%s is now %v (%v), want %v left in place", out.path, info.Mode().Type(), err, out.kind)
				}
				if out.fifo {
					if data := <-got; !c.valid(data) {
						t.Fatalf("the FIFO's reader got %d bytes that are not the output", len(data))
					}
				}
			})
		}
		t.Run(c.name+" socket", func(t *testing.T) {
			sock := filepath.Join(dir, c.name+".sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Skipf("cannot make a socket here: %v", err)
			}
			defer l.Close()
			_, err = runCLI(t, c.args(sock)...)
			if err == nil || !strings.Contains(err.Error(), "is a socket") || exitCode(err) != exitError {
				t.Fatalf("%s into a socket: exit %d, %v", c.name, exitCode(err), err)
			}
			if info, err := os.Lstat(sock); err != nil || info.Mode().Type() != fs.ModeSocket {
				t.Fatalf("the socket was replaced: %v %v", info.Mode(), err)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Fatalf("temporaries were left beside the outputs: %v", entries)
	}
}
