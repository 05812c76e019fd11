package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// TestAForksAddedBytesAreWhatItAddsToTheStoreBesideItsParent: a parent's bytes plus its fork's
// addedBytes are the bytes of the two sessions' files with every blob counted once, as the store
// keeps them; a fork's bytes alone would count the blobs of the steps it inherited twice.
func TestAForksAddedBytesAreWhatItAddsToTheStoreBesideItsParent(t *testing.T) {
	root := t.TempDir()
	system := strings.Repeat("be brief; ", 20_000) // stored as a blob, in the parent's lines
	tools := map[string]replay.Tool{"search": func(context.Context, json.RawMessage) (any, error) {
		return strings.Repeat("result ", 20_000), nil // a blob, in the parent's lines too
	}}
	if _, err := replay.Record(context.Background(), replay.RecordOptions{Dir: filepath.Join(root, "run"), ID: "run", Model: echoModel{}, Tools: tools},
		searchAgent(system)); err != nil {
		t.Fatal(err)
	}
	parent, err := session.Open(filepath.Join(root, "run"))
	if err != nil {
		t.Fatal(err)
	}
	fix := system + "and cite the result" // the fork's tail stores a blob of its own
	if _, err := replay.Fork(context.Background(), replay.ForkOptions{Parent: parent, Dir: filepath.Join(root, "run-fix"), ID: "run-fix", AtStep: 3,
		Model: echoModel{}, Overrides: replay.Overrides{System: &fix}}, searchAgent(system)); err != nil {
		t.Fatal(err)
	}

	var p, f task.VerifyResult
	if err := describeSession(filepath.Join(root, "run"), &p); err != nil || !p.Intact {
		t.Fatalf("parent: %v, %+v", err, p)
	}
	if err := describeSession(filepath.Join(root, "run-fix"), &f); err != nil || !f.Intact {
		t.Fatalf("fork: %v, %+v", err, f)
	}
	if p.AddedBytes != p.Bytes {
		t.Errorf("a session that is not a fork adds %d of its %d bytes, want all", p.AddedBytes, p.Bytes)
	}
	stored := storedOnce(t, filepath.Join(root, "run"), filepath.Join(root, "run-fix"))
	if p.Bytes+f.AddedBytes != stored {
		t.Errorf("parent %d + fork added %d = %d bytes, want %d, what the store keeps of the two", p.Bytes, f.AddedBytes, p.Bytes+f.AddedBytes, stored)
	}
	if f.Bytes-f.AddedBytes < 200_000 {
		t.Errorf("the fork's bytes %d and added bytes %d differ by less than the inherited blobs", f.Bytes, f.AddedBytes)
	}
}

// storedOnce is the size of the sessions' files, each blob counted once however many sessions hold it.
func storedOnce(t *testing.T, dirs ...string) int64 {
	t.Helper()
	var n int64
	blobs := map[string]bool{}
	for _, dir := range dirs {
		for _, name := range []string{session.MetaFile, session.EventsFile, session.VaultFile} {
			if info, err := os.Stat(filepath.Join(dir, name)); err == nil {
				n += info.Size()
			}
		}
		entries, err := os.ReadDir(filepath.Join(dir, session.BlobsDir))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if !blobs[e.Name()] {
				blobs[e.Name()] = true
				n += info.Size()
			}
		}
	}
	return n
}
