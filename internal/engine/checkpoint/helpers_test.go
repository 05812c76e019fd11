package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

var ctx = context.Background()

// clock is a fixed clock that advances a second per call, so checkpoints order deterministically.
func clock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

func recorderAnchor(step int64) Anchor {
	return Anchor{Session: "s1", Turn: step / 2, Step: step, TurnDigest: strings.Repeat("d", 64), Author: session.AuthorRecorder}
}

// write creates files (path → content) under dir.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tree describes every path under dir: a file as "mode:content", a link as "-> target", a directory
// as "dir". Its equality before and after an operation proves the operation wrote nothing there.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case fi.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%o:%s", fi.Mode().Perm(), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func create(t *testing.T, s *Store, ws string, now func() time.Time, step int64, excludes ...string) Created {
	t.Helper()
	c, err := s.Create(ctx, ws, CaptureOptions{Anchor: recorderAnchor(step), Excludes: excludes, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// storeDir is the directory a store made by OpenStore keeps everything in.
func storeDir(s *Store) string { return s.Manifests.(DirManifests).Dir }
