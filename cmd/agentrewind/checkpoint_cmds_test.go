package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/minio/minio-go/v7"
	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
)

// runCheckpoint runs `agentrewind checkpoint args…` under a root of its own, so the test does not
// depend on root.go registering the command.
func runCheckpoint(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "agentrewind", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newCheckpointCommand())
	var out bytes.Buffer
	root.SetArgs(append([]string{"checkpoint"}, args...))
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	err := root.Execute()
	return out.String(), err
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckpointCreatePreviewRestorePrune(t *testing.T) {
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"main.go": "v12", "notes/todo.md": "todo", "debug.log": "noise"})
	create := func(step int) checkpoint.Created {
		t.Helper()
		out, err := runCheckpoint(t, "create", ws, "--store-dir", store, "--session", "s1", "--step", fmt.Sprint(step), "--exclude", "*.log", "-o", "json")
		if err != nil {
			t.Fatalf("create at step %d: %v", step, err)
		}
		var c checkpoint.Created
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	at12 := create(12)
	if !at12.New || at12.Stats.Files != 2 || at12.Stats.IncrementalBytes != 7 {
		t.Fatalf("create at step 12: %+v", at12)
	}
	writeFiles(t, ws, map[string]string{"main.go": "broken at step 40", "scratch.txt": "new"})
	at40 := create(40)

	out, err := runCheckpoint(t, "list", "--store-dir", store, "-o", "json")
	var list []checkpoint.Summary
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0].ID != at40.ID {
		t.Fatalf("list: %v\n%s", err, out)
	}

	out, err = runCheckpoint(t, "preview", ws, "step", "20", "--store-dir", store, "--session", "s1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{at12.ID, "overwrite main.go (17 -> 3 bytes)", "leftover  scratch.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("preview output lacks %q:\n%s", want, out)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "main.go")); string(got) != "broken at step 40" {
		t.Fatalf("preview wrote main.go: %q", got)
	}

	out, err = runCheckpoint(t, "restore", ws, at12.ID[:8], "--store-dir", store, "--session", "s1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res checkpoint.RestoreResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "main.go")); string(got) != "v12" || res.Written != 1 {
		t.Fatalf("restore: main.go = %q, %+v", got, res)
	}
	// The workspace at step 40 is what the latest checkpoint holds, so the guard is that checkpoint.
	if res.Guard != at40.ID || !cmp.Equal(res.Leftovers, []string{"scratch.txt"}) {
		t.Errorf("guard %s (want %s), leftovers %v", res.Guard, at40.ID, res.Leftovers)
	}
	if _, err := os.Stat(filepath.Join(ws, "scratch.txt")); err != nil {
		t.Errorf("restore removed a leftover: %v", err)
	}

	out, err = runCheckpoint(t, "prune", "--store-dir", store, "--keep", "1", "--dry-run")
	if err != nil || !strings.Contains(out, "would delete "+at12.ID[:12]) || !strings.Contains(out, "rule keepPerSession") {
		t.Fatalf("prune --dry-run: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(store, "checkpoints", at12.ID)); err != nil {
		t.Fatal("a dry run deleted a checkpoint")
	}
	if _, err := runCheckpoint(t, "prune", "--store-dir", store, "--keep", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(store, "checkpoints", at12.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("prune kept the checkpoint of step 12: %v", err)
	}
}

func TestCheckpointCommandErrorsAndExitCodes(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha"})
	out, err := runCheckpoint(t, "create", ws, "--store-dir", store, "-o", "json")
	var c checkpoint.Created
	if err != nil || json.Unmarshal([]byte(out), &c) != nil {
		t.Fatal(err, out)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "changed"})
	blob := filepath.Join(store, "blobs", "sha256", hashHex("alpha")[:2], hashHex("alpha"))
	if err := os.WriteFile(blob, []byte("ALPHA"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		exit int
		want string
	}{
		{"a corrupt blob", []string{"restore", ws, "latest", "--store-dir", store}, exitCorrupt, "corrupt or tampered"},
		{"an unknown address", []string{"restore", ws, "ffff", "--store-dir", store}, exitError, "no checkpoint matches"},
		{"a path the checkpoint lacks", []string{"preview", ws, "latest", "--store-dir", store, "--files", "b.txt"}, exitError, "does not hold b.txt"},
		{"a store inside the workspace", []string{"create", ws, "--store-dir", filepath.Join(ws, "store")}, exitError, "overlap"},
		{"no store", []string{"list"}, exitError, "pass --store-dir <dir> or --store s3://"},
		{"two stores", []string{"list", "--store-dir", store, "--store", "s3://bucket/team"}, exitError, "pass one of them"},
		{"an unknown guard mode", []string{"restore", ws, "latest", "--store-dir", store, "--guard", "maybe"}, exitError, "guard mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCheckpoint(t, tc.args...)
			if err == nil || exitCode(err) != tc.exit || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: exit %d, %v; want exit %d with %q", tc.args, exitCode(err), err, tc.exit, tc.want)
			}
		})
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "changed" {
		t.Errorf("a refused restore wrote a.txt: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "store")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused store inside the workspace was still created: %v", err)
	}
}

// checkpointErrors is every exported error type and sentinel of the checkpoint package with the exit
// code it must give.
var checkpointErrors = map[string]struct {
	err  error
	exit int
}{
	"ManifestError":          {&checkpoint.ManifestError{Path: "../x", Reason: "traversal"}, exitCorrupt},
	"TamperedError":          {&checkpoint.TamperedError{ID: "ab"}, exitCorrupt},
	"BlobHashError":          {&checkpoint.BlobHashError{Path: "a", Hash: "ab"}, exitCorrupt},
	"UnsafeDestinationError": {&checkpoint.UnsafeDestinationError{Path: "a", At: "a", Reason: "a symbolic link"}, exitError},
	"UnknownPathsError":      {&checkpoint.UnknownPathsError{Paths: []string{"b"}}, exitError},
	"AmbiguousError":         {&checkpoint.AmbiguousError{Query: "a"}, exitError},
	"ErrNotFound":            {checkpoint.ErrNotFound, exitError},
	"GuardError":             {&checkpoint.GuardError{Err: errors.New("x")}, exitError},
	"ErrBareRepository":      {checkpoint.ErrBareRepository, exitError},
	"NameError":              {&checkpoint.NameError{Names: []checkpoint.BadName{{Path: "caf\xe9"}}, Count: 1}, exitError},
	"UnwritableError":        {&checkpoint.UnwritableError{Path: "a", At: ".", Err: errors.New("read-only file system")}, exitError},
	"AttributeError":         {&checkpoint.AttributeError{Attribute: checkpoint.AttributeAppendOnly}, exitError},
	"NoSpaceError":           {&checkpoint.NoSpaceError{At: ".", Need: 2, Available: 1}, exitError},
	"ErrRestoreInProgress":   {checkpoint.ErrRestoreInProgress, exitError},
}

func TestCheckpointExitCodesCoverEveryErrorType(t *testing.T) {
	for _, name := range exportedErrors(t, "../../internal/engine/checkpoint") {
		tc, ok := checkpointErrors[name]
		if !ok {
			t.Errorf("checkpoint.%s has no exit code in checkpointErrors", name)
			continue
		}
		for _, err := range []error{tc.err, fmt.Errorf("restore: %w", tc.err)} {
			if got := exitCode(classifyCheckpoint(err)); got != tc.exit {
				t.Errorf("checkpoint.%s: exit %d, want %d", name, got, tc.exit)
			}
		}
	}
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestCheckpointCreateGitKeepsTheFilesInTheStore(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"main.go": "v1"})
	refs, _ := os.ReadDir(filepath.Join(r.Dir, ".git", "refs"))
	store := t.TempDir()
	out, err := runCheckpoint(t, "create", r.Dir, "--git", "--store-dir", store, "--session", "s1", "--step", "3", "-o", "json")
	var c checkpoint.Created
	if err != nil || json.Unmarshal([]byte(out), &c) != nil || !c.New {
		t.Fatalf("create --git: %v\n%s", err, out)
	}
	writeFiles(t, r.Dir, map[string]string{"main.go": "broken"})
	if out, err := runCheckpoint(t, "restore", r.Dir, "latest", "--store-dir", store, "--session", "s1", "--guard", "off"); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(r.Dir, "main.go")); string(got) != "v1" {
		t.Errorf("main.go = %q after restoring the git checkpoint", got)
	}
	if _, err := os.Stat(filepath.Join(store, "blobs", "sha256", hashHex("v1")[:2], hashHex("v1"))); err != nil {
		t.Errorf("the git checkpoint's file is not in the store: %v", err)
	}
	if after, _ := os.ReadDir(filepath.Join(r.Dir, ".git", "refs")); len(after) != len(refs) {
		t.Errorf("the git checkpoint added refs: %v, before %v", after, refs)
	}
}

// TestCheckpointsRoundTripThroughTheS3Store creates, lists, restores and refuses checkpoints in a
// real S3 server (versitygw), counting the objects each step stores.
func TestCheckpointsRoundTripThroughTheS3Store(t *testing.T) {
	srv := storeServer(t)
	const bucket, prefix = "ckpt-bucket", "team"
	store := "s3://" + bucket + "/" + prefix
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	keys := func(under string) []string {
		t.Helper()
		var out []string
		for obj := range client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix + "/" + under, Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			out = append(out, obj.Key)
		}
		return out
	}
	blobKey := func(content string) string {
		h := hashHex(content)
		return prefix + "/blobs/sha256/" + h[:2] + "/" + h
	}
	// chunkKeys are the blobs holding a checkpoint's manifest chunks.
	chunkKeys := func(id string) map[string]bool {
		t.Helper()
		obj, err := client.GetObject(context.Background(), bucket, prefix+"/checkpoints/"+id+"/manifest.json", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		var root bytes.Buffer
		if _, err := root.ReadFrom(obj); err != nil {
			t.Fatal(err)
		}
		chunks, err := checkpoint.ManifestChunks(root.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, h := range chunks {
			out[prefix+"/blobs/sha256/"+h[:2]+"/"+h] = true
		}
		return out
	}
	create := func(ws string, step int, extra ...string) checkpoint.Created {
		t.Helper()
		args := append([]string{"create", ws, "--store", store, "--session", "s1", "--step", fmt.Sprint(step), "-o", "json"}, extra...)
		out, err := runCheckpoint(t, args...)
		if err != nil {
			t.Fatalf("create at step %d: %v", step, err)
		}
		var c checkpoint.Created
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatal(err, out)
		}
		return c
	}

	ws := t.TempDir()
	v1 := map[string]string{"main.go": "package main // v1", "notes/todo.md": "todo", "data.bin": strings.Repeat("x", 5000)}
	writeFiles(t, ws, v1)
	first := create(ws, 1, "--create-bucket")
	if !first.New || first.Stats.UploadedBlobs != 3 || first.Stats.IncrementalBytes != int64(len(v1["main.go"])+4+5000) {
		t.Fatalf("first checkpoint: %+v", first)
	}
	blobsBefore := keys("blobs/")

	const v2 = "package main // v2, longer"
	writeFiles(t, ws, map[string]string{"main.go": v2})
	second := create(ws, 2)
	if !second.New || second.Stats.UploadedBlobs != 1 || second.Stats.IncrementalBytes != int64(len(v2)) {
		t.Fatalf("second checkpoint: %+v; want one blob of %d bytes uploaded", second, len(v2))
	}
	// The second manifest's one chunk differs from the first's: it and main.go's bytes are all that
	// is added.
	wantBlobs := append(blobsBefore, blobKey(v2))
	firstChunks := chunkKeys(first.ID)
	for k := range chunkKeys(second.ID) {
		if !firstChunks[k] {
			wantBlobs = append(wantBlobs, k)
		}
	}
	if len(wantBlobs) != len(blobsBefore)+2 || len(blobsBefore) != 3+len(firstChunks) {
		t.Errorf("%d blobs before (%d of them chunks), %d wanted after: want the 3 files and 1 chunk, then 1 file and 1 chunk more", len(blobsBefore), len(firstChunks), len(wantBlobs))
	}
	if d := cmp.Diff(wantBlobs, keys("blobs/"), cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("blobs after the second checkpoint (-want +got): only main.go's new blob and the changed manifest chunk should be added\n%s", d)
	}
	// Each manifest, and the mark that its capture settled against the blob sweeps.
	wantManifests := []string{prefix + "/checkpoints/" + first.ID + "/manifest.json", prefix + "/checkpoints/" + second.ID + "/manifest.json",
		prefix + "/checkpoints/" + first.ID + "/settled", prefix + "/checkpoints/" + second.ID + "/settled"}
	if d := cmp.Diff(wantManifests, keys("checkpoints/"), cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("manifests (-want +got):\n%s", d)
	}
	out, err := runCheckpoint(t, "list", "--store", store, "-o", "json")
	var list []checkpoint.Summary
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0].ID != second.ID || list[1].ID != first.ID {
		t.Fatalf("list: %v\n%s", err, out)
	}

	// Restore the first checkpoint into a workspace changed since: its files come back, the new file stays.
	writeFiles(t, ws, map[string]string{"notes/todo.md": "done", "new.txt": "created after"})
	out, err = runCheckpoint(t, "restore", ws, first.ID[:12], "--store", store, "--session", "s1", "-o", "json")
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	var res checkpoint.RestoreResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err, out)
	}
	want := map[string]string{"main.go": v1["main.go"], "notes/todo.md": "todo", "data.bin": v1["data.bin"], "new.txt": "created after"}
	got := map[string]string{}
	for p := range want {
		data, err := os.ReadFile(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		got[p] = string(data)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("workspace after the restore (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"new.txt"}, res.Leftovers); d != "" || res.Written != 2 || res.Guard == "" {
		t.Errorf("restore wrote %d files, guard %q, leftovers (-want +got):\n%s", res.Written, res.Guard, d)
	}

	// A blob damaged at rest in the server's directory is refused before anything is written: no file,
	// and no guard checkpoint either.
	if err := os.WriteFile(filepath.Join(srv.Dir, bucket, filepath.FromSlash(blobKey("todo"))), []byte("TODO"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"notes/todo.md": "changed again"})
	beforeWS, beforeManifests := snapshotDir(t, ws), keys("checkpoints/")
	_, err = runCheckpoint(t, "restore", ws, first.ID[:12], "--store", store, "--session", "s1")
	if exitCode(err) != exitCorrupt || !strings.Contains(err.Error(), "notes/todo.md") || !strings.Contains(err.Error(), "hashes to "+hashHex("TODO")) {
		t.Fatalf("restore with a blob damaged at rest: exit %d, %v; want exit %d naming notes/todo.md", exitCode(err), err, exitCorrupt)
	}
	if d := cmp.Diff(beforeWS, snapshotDir(t, ws)); d != "" {
		t.Errorf("the refused restore changed the workspace (-before +after):\n%s", d)
	}
	if d := cmp.Diff(beforeManifests, keys("checkpoints/")); d != "" {
		t.Errorf("the refused restore stored a checkpoint (-before +after):\n%s", d)
	}
}

// snapshotDir maps every file under dir to its bytes.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runCheckpointStderr is runCheckpoint that also returns what the command wrote on stderr.
func runCheckpointStderr(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := &cobra.Command{Use: "agentrewind", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newCheckpointCommand())
	var out, errOut bytes.Buffer
	root.SetArgs(append([]string{"checkpoint"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func TestCheckpointAManifestThatDoesNotLoadBlocksNoOtherCheckpoint(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha"})
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", store, "--session", "s1", "--step", "1"); err != nil {
		t.Fatal(err)
	}
	// Two non-UTF-8 names the capture wrote before it refused them, both become "n\ufffd".
	empty := hashHex("")
	data := []byte(`{"schemaVersion":1,"createdAt":"2026-01-01T00:00:00Z","anchor":{"session":"s1","turn":0,"step":9,"author":""},"incrementalBytes":0,"files":[` +
		`{"path":"n\ufffd","type":"file","size":0,"sha256":"` + empty + `"},{"path":"n\ufffd","type":"file","size":0,"sha256":"` + empty + `"}]}`)
	badID := hashHex(string(data))
	if err := checkpoint.OpenStore(store).Manifests.Put(context.Background(), badID, data); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "changed"})
	for _, args := range [][]string{
		{"list", "--store-dir", store},
		{"preview", ws, "latest", "--store-dir", store},
		{"restore", ws, "step 5", "--store-dir", store, "--guard", "off"},
		{"prune", "--store-dir", store, "--keep", "1"},
	} {
		_, stderr, err := runCheckpointStderr(t, args...)
		if err != nil || !strings.Contains(stderr, "skipped checkpoint "+badID) {
			t.Errorf("%s: %v, stderr %q; want success reporting the skipped %s", args[0], err, stderr, badID[:12])
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "alpha" {
		t.Errorf("restore beside a bad checkpoint left a.txt %q", got)
	}
	// Named by its id, the bad checkpoint is refused as corrupt.
	if _, err := runCheckpoint(t, "restore", ws, badID[:10], "--store-dir", store); exitCode(err) != exitCorrupt || !strings.Contains(fmt.Sprint(err), "listed twice") {
		t.Errorf("restore of the bad checkpoint: exit %d, %v", exitCode(err), err)
	}
}

func TestCheckpointAGuardThatCannotBeTakenIsLoudOrRefused(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha"})
	if err := os.Symlink("a.txt", filepath.Join(ws, "l")); err != nil {
		t.Fatal(err)
	}
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", store); err != nil {
		t.Fatal(err)
	}
	// The restore replaces l, whose target now no manifest can record: its guard cannot be taken.
	writeFiles(t, ws, map[string]string{"a.txt": "changed"})
	if err := os.Remove(filepath.Join(ws, "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("n\xff", filepath.Join(ws, "l")); err != nil {
		t.Fatal(err)
	}
	_, err := runCheckpoint(t, "restore", ws, "latest", "--store-dir", store, "--guard", "require")
	var ge *checkpoint.GuardError
	if !errors.As(err, &ge) || !strings.Contains(err.Error(), `target "n\xff" that is not valid UTF-8`) {
		t.Fatalf("--guard require: %v; want a GuardError naming \"n\\xff\"", err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "changed" {
		t.Fatalf("a refused restore wrote a.txt: %q", got)
	}
	_, stderr, err := runCheckpointStderr(t, "restore", ws, "latest", "--store-dir", store, "--guard", "warn")
	if err != nil || !strings.Contains(stderr, "NO GUARD CHECKPOINT WAS TAKEN") || !strings.Contains(stderr, `n\xff`) {
		t.Fatalf("--guard warn: %v, stderr %q", err, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "alpha" {
		t.Errorf("restore under --guard warn left a.txt %q", got)
	}
}

// TestCheckpointNamesWithBackslashesAndNewlinesRestoreUnderARequiredGuard: legal Linux names that
// once made the guard's manifest "corrupt" (exit 2) are captured, guarded and restored.
func TestCheckpointNamesWithBackslashesAndNewlinesRestoreUnderARequiredGuard(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	names := []string{`back\slash.txt`, `..\escape`, "new\nline", "-rf", `dir\x/--files`}
	files := map[string]string{}
	for _, n := range names {
		files[n] = "v1 " + n
	}
	writeFiles(t, ws, files)
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", store); err != nil {
		t.Fatalf("create: exit %d, %v", exitCode(err), err)
	}
	for _, n := range names {
		writeFiles(t, ws, map[string]string{n: "broken"})
	}
	out, err := runCheckpoint(t, "restore", ws, "latest", "--store-dir", store, "--guard", "require", "-o", "json")
	var res checkpoint.RestoreResult
	if err != nil || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("restore --guard require: exit %d, %v\n%s", exitCode(err), err, out)
	}
	for _, n := range names {
		if got, _ := os.ReadFile(filepath.Join(ws, n)); string(got) != "v1 "+n {
			t.Errorf("%q = %q after the restore", n, got)
		}
	}
	if res.Guard == "" || res.Written != len(names) {
		t.Errorf("restore: guard %q, %d written; want a guard and %d written", res.Guard, res.Written, len(names))
	}
}

// TestCheckpointRestoreIntoAReadOnlyDirectoryWritesNothing: a restore the workspace would refuse
// partway exits 1 naming the path, and a.txt, which sorts before it, is not written.
func TestCheckpointRestoreIntoAReadOnlyDirectoryWritesNothing(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha", "ro/b.txt": "beta"})
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", store); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "changed", "ro/b.txt": "changed"})
	ro := filepath.Join(ws, "ro")
	if os.Geteuid() != 0 {
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(ro, 0o755) })
	} else {
		// Root writes through permission bits: make ro a read-only bind mount of itself.
		if out, err := exec.Command("mount", "--bind", ro, ro).CombinedOutput(); err != nil {
			t.Skipf("root cannot bind-mount here, so nothing makes a directory read-only for it: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", ro).Run() })
		if out, err := exec.Command("mount", "-o", "remount,bind,ro", ro).CombinedOutput(); err != nil {
			t.Skipf("root cannot remount a bind mount read-only here: %v %s", err, out)
		}
	}
	_, err := runCheckpoint(t, "restore", ws, "latest", "--store-dir", store, "--guard", "require")
	var ue *checkpoint.UnwritableError
	if exitCode(err) != exitError || !errors.As(err, &ue) || !strings.Contains(err.Error(), `restore of "ro/b.txt" refused: "ro" cannot be written`) {
		t.Fatalf("restore into a read-only directory: exit %d, %v", exitCode(err), err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "changed" {
		t.Errorf("the refused restore wrote a.txt: %q", got)
	}
}

// TestCheckpointAnAppendOnlyFileIsRefusedWithWhatToDo: the refusal names the file and its attribute
// and says how to clear it, with the path a user can paste; nothing is written.
func TestCheckpointAnAppendOnlyFileIsRefusedWithWhatToDo(t *testing.T) {
	t.Setenv(envStore, "")
	if os.Geteuid() != 0 {
		t.Skip("setting the append-only attribute needs root")
	}
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha", "log/b.txt": "beta"})
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", store); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "changed", "log/b.txt": "changed"})
	b := filepath.Join(ws, "log", "b.txt")
	if out, err := exec.Command("chattr", "+a", b).CombinedOutput(); err != nil {
		t.Skipf("the file system under the temporary directory refuses chattr +a: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-a", b).Run() })
	_, err := runCheckpoint(t, "restore", ws, "latest", "--store-dir", store, "--guard", "require")
	want := fmt.Sprintf("restore of \"log/b.txt\" refused: \"log/b.txt\" cannot be written: it is append-only (attribute \"a\", see lsattr), which the kernel enforces even for root: "+
		"if the workspace may be changed, clear the attribute with `chattr -a %q` (as root) and restore again", b)
	if exitCode(err) != exitError || err == nil || err.Error() != want {
		t.Fatalf("restore over an append-only file: exit %d, %v\nwant %s", exitCode(err), err, want)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "changed" {
		t.Errorf("the refused restore wrote a.txt: %q", got)
	}
}

// TestCheckpointPruneDeletesTheRefsOfPrunedGitCheckpoints: a pruned git checkpoint's ref would keep
// its commit from git gc forever; with --workspace prune deletes it (the kept checkpoint's stays),
// without it prune says which refs stay and how to delete them.
func TestCheckpointPruneDeletesTheRefsOfPrunedGitCheckpoints(t *testing.T) {
	t.Setenv(envStore, "")
	refs := func(dir string) []string {
		t.Helper()
		out, err := exec.Command("git", "-C", dir, "for-each-ref", "--format=%(refname)", checkpoint.GitRefPrefix).CombinedOutput()
		if err != nil {
			t.Skipf("no usable git binary: %v %s", err, out)
		}
		return strings.Fields(string(out))
	}
	for _, withWorkspace := range []bool{true, false} {
		t.Run(fmt.Sprintf("workspace=%v", withWorkspace), func(t *testing.T) {
			r := gittest.New(t)
			r.Commit("init", map[string]string{"main.go": "v1"})
			store := t.TempDir()
			var commits []string
			for step, content := range []string{"v2", "v3"} {
				writeFiles(t, r.Dir, map[string]string{"main.go": content})
				legacyGitCheckpoint(t, r.Dir, store, int64(step+1))
				list, err := checkpoint.OpenStore(store).List(context.Background())
				if err != nil || len(list) != step+1 {
					t.Fatalf("%d checkpoints, %v", len(list), err)
				}
				commits = append(commits, list[0].GitCommit)
			}
			if got := len(refs(r.Dir)); got != 2 {
				t.Fatalf("%d checkpoint refs before prune, want 2", got)
			}
			args := []string{"prune", "--store-dir", store, "--keep", "1"}
			if withWorkspace {
				args = append(args, "--workspace", r.Dir)
			}
			out, stderr, err := runCheckpointStderr(t, args...)
			if err != nil {
				t.Fatalf("prune: %v\n%s%s", err, out, stderr)
			}
			oldRef, newRef := checkpoint.GitRefPrefix+commits[0], checkpoint.GitRefPrefix+commits[1]
			if withWorkspace {
				if d := cmp.Diff([]string{newRef}, refs(r.Dir)); d != "" {
					t.Errorf("refs after prune --workspace (-want +got):\n%s", d)
				}
				if !strings.Contains(out, "deleted git ref "+oldRef) {
					t.Errorf("prune did not say it deleted %s:\n%s", oldRef, out)
				}
				return
			}
			if d := cmp.Diff([]string{oldRef, newRef}, refs(r.Dir), cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
				t.Errorf("refs after prune without --workspace (-want +got):\n%s", d)
			}
			if !strings.Contains(stderr, "git update-ref -d "+oldRef) || strings.Contains(stderr, newRef) {
				t.Errorf("prune without --workspace did not name the ref left behind, or named the kept one:\n%s", stderr)
			}
		})
	}
}

// bindMount bind-mounts src at a new directory, unmounted when the test ends, and returns it; the test
// is skipped where mounting is not allowed.
func bindMount(t *testing.T, src string) string {
	t.Helper()
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Mkdir(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", src, alias).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if exec.Command("umount", alias).Run() != nil {
			_ = exec.Command("umount", "-l", alias).Run()
		}
	})
	return alias
}

// TestCheckpointAStoreReachedThroughABindMountOfTheWorkspaceIsRefused: a bind mount shows the
// workspace under another path that no symlink resolution leads back to; the store must still be
// seen inside it (the capture would read its own output), by device and inode, either way round.
func TestCheckpointAStoreReachedThroughABindMountOfTheWorkspaceIsRefused(t *testing.T) {
	t.Setenv(envStore, "")
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root")
	}
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha"})
	wsAlias, storeAlias := bindMount(t, ws), bindMount(t, store)
	if err := os.Mkdir(filepath.Join(store, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ws, store string }{
		{"the store inside the workspace's alias", ws, filepath.Join(wsAlias, "store")},
		{"the workspace inside the store's alias", filepath.Join(storeAlias, "ws"), store},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCheckpoint(t, "create", tc.ws, "--store-dir", tc.store)
			if exitCode(err) != exitError || err == nil || !strings.Contains(err.Error(), "overlap") {
				t.Fatalf("create %s --store-dir %s: exit %d, %v; want the overlap refused", tc.ws, tc.store, exitCode(err), err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(ws, "store")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused store was created in the workspace: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(store, "ws")); len(ents) != 0 {
		t.Errorf("the refused capture wrote into the store: %v", ents)
	}
}

func TestCheckpointRestoringTheSameStepTwiceDoesNotUndoIt(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	for step, content := range []string{"one", "two"} {
		writeFiles(t, ws, map[string]string{"a.txt": content})
		if _, err := runCheckpoint(t, "create", ws, "--store-dir", store, "--session", "s1", "--step", fmt.Sprint(step+1)); err != nil {
			t.Fatal(err)
		}
	}
	// Each restore takes a guard of the dirty workspace at the latest step, step 2.
	for i := range 2 {
		writeFiles(t, ws, map[string]string{"a.txt": fmt.Sprint("dirty ", i)})
		if _, err := runCheckpoint(t, "restore", ws, "step 2", "--store-dir", store, "--session", "s1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "two" {
			t.Fatalf("restore %d of step 2 left a.txt %q", i+1, got)
		}
	}
	out, err := runCheckpoint(t, "prune", "--store-dir", store, "--keep", "1", "-o", "json")
	var plan checkpoint.PrunePlan
	if err != nil || json.Unmarshal([]byte(out), &plan) != nil {
		t.Fatal(err, out)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "dirty again"})
	if _, err := runCheckpoint(t, "restore", ws, "latest", "--store-dir", store, "--session", "s1", "--guard", "off"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "two" {
		t.Errorf("after prune --keep 1, latest restored %q, want the step 2 capture", got)
	}
}

func TestCheckpointPruneSessionTouchesOnlyThatSession(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	ids := map[string][]string{}
	for _, sess := range []string{"A", "B"} {
		for step := range 2 {
			writeFiles(t, ws, map[string]string{"a.txt": fmt.Sprint(sess, step)})
			out, err := runCheckpoint(t, "create", ws, "--store-dir", store, "--session", sess, "--step", fmt.Sprint(step), "-o", "json")
			var c checkpoint.Created
			if err != nil || json.Unmarshal([]byte(out), &c) != nil {
				t.Fatal(err, out)
			}
			ids[sess] = append(ids[sess], c.ID)
		}
	}
	if _, err := runCheckpoint(t, "prune", "--store-dir", store, "--session", "A", "--keep", "1"); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, sess := range []string{"A", "B"} {
		for _, id := range ids[sess] {
			if _, err := os.Stat(filepath.Join(store, "checkpoints", id)); err == nil {
				left[id] = true
			}
		}
	}
	want := map[string]bool{ids["A"][1]: true, ids["B"][0]: true, ids["B"][1]: true}
	if d := cmp.Diff(want, left); d != "" {
		t.Errorf("checkpoints left (-want +got):\n%s", d)
	}
}

func TestCheckpointAnEmptyFilesListIsAUsageError(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha", "b.txt": "beta"})
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", store); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "changed", "b.txt": "changed"})
	for _, verb := range []string{"preview", "restore"} {
		_, err := runCheckpoint(t, verb, ws, "latest", "--store-dir", store, "--files", "")
		if exitCode(err) != exitError || !strings.Contains(fmt.Sprint(err), "--files names no path") {
			t.Errorf("%s --files \"\": exit %d, %v", verb, exitCode(err), err)
		}
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if got, _ := os.ReadFile(filepath.Join(ws, f)); string(got) != "changed" {
			t.Errorf("restore --files \"\" wrote %s: %q", f, got)
		}
	}
}

func TestCheckpointTextOutputEscapesControlCharacters(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	const sess, evil, left = "s\x1b[2J", "evil\x1b[31m.txt", "new\a\t.txt"
	writeFiles(t, ws, map[string]string{evil: "e", "a.txt": "alpha"})
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", store, "--session", sess); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(ws, evil)))
	writeFiles(t, ws, map[string]string{left: "x", "a.txt": "changed"})
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"list", "--store-dir", store}, []string{`s\x1b[2J`}},
		{[]string{"preview", ws, "latest", "--store-dir", store, "--session", sess}, []string{`create    evil\x1b[31m.txt`, `leftover  new\x07` + "\t.txt"}},
		{[]string{"restore", ws, "latest", "--store-dir", store, "--session", sess}, []string{`create    evil\x1b[31m.txt`, `leftover  new\x07`}},
	} {
		out, err := runCheckpoint(t, tc.args...)
		must(err)
		if strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("%s printed a raw control character:\n%q", tc.args[0], out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s output lacks %q:\n%s", tc.args[0], w, out)
			}
		}
	}
}

// TestCheckpointAStoreReachedThroughABindMountOfASubdirectoryIsRefused: a bind mount of a directory
// inside the workspace (or the store) shows it under a path whose parents are not its real ones, so
// neither path resolution nor walking up by device and inode finds the other; the file system's own
// path of each, from the mount table, does. The store inside the workspace used to be accepted, and
// every capture read the store's own blobs and manifests into the checkpoint.
func TestCheckpointAStoreReachedThroughABindMountOfASubdirectoryIsRefused(t *testing.T) {
	t.Setenv(envStore, "")
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root")
	}
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha", "sub/b.txt": "beta"})
	if err := os.MkdirAll(filepath.Join(store, "deep", "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	wsSub, storeSub := bindMount(t, filepath.Join(ws, "sub")), bindMount(t, filepath.Join(store, "deep"))
	for _, tc := range []struct{ name, ws, store string }{
		{"the store inside a bind mount of a workspace subdirectory", ws, filepath.Join(wsSub, "store")},
		{"the workspace inside a bind mount of a store subdirectory", filepath.Join(storeSub, "ws"), store},
		{"the store a bind mount of a workspace subdirectory", ws, wsSub},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCheckpoint(t, "create", tc.ws, "--store-dir", tc.store)
			if exitCode(err) != exitError || err == nil || !strings.Contains(err.Error(), "overlap") {
				t.Fatalf("create %s --store-dir %s: exit %d, %v; want the overlap refused", tc.ws, tc.store, exitCode(err), err)
			}
		})
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, "sub")); len(ents) != 1 {
		t.Errorf("the refused store was created in the workspace: %v", ents)
	}
	// Side by side on one file system, or under aliases that do not nest, is still fine.
	other := t.TempDir()
	if _, err := runCheckpoint(t, "create", filepath.Join(store, "deep", "ws"), "--store-dir", other); err != nil {
		t.Errorf("a store beside the workspace was refused: %v", err)
	}
	if _, err := runCheckpoint(t, "create", wsSub, "--store-dir", filepath.Join(store, "s")); err != nil {
		t.Errorf("a workspace reached through a bind mount, with its store outside it, was refused: %v", err)
	}
}

func TestUnescapeMountInfoPaths(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/x\134y`: `/x\y`, `/n\012`: "/n\n", `/plain`: "/plain", `/trail\04`: `/trail\04`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheckpointPruneWithTheWrongWorkspaceDeletesNothingOrSaysWhichRefsStay: a --workspace that is no
// git work tree used to fail only after the checkpoints were deleted (exit 1, nothing said about
// them, their refs left and no longer named anywhere); one of another repository printed "deleted git
// ref" for refs it never held. Now the first deletes nothing, and the second deletes the checkpoints
// and says which refs its repository does not hold and how to delete them.
func TestCheckpointPruneWithTheWrongWorkspaceDeletesNothingOrSaysWhichRefsStay(t *testing.T) {
	t.Setenv(envStore, "")
	refs := func(dir string) []string {
		t.Helper()
		out, err := exec.Command("git", "-C", dir, "for-each-ref", "--format=%(refname)", checkpoint.GitRefPrefix).CombinedOutput()
		if err != nil {
			t.Skipf("no usable git binary: %v %s", err, out)
		}
		return strings.Fields(string(out))
	}
	r, other := gittest.New(t), gittest.New(t)
	r.Commit("init", map[string]string{"main.go": "v1"})
	other.Commit("init", map[string]string{"x": "y"})
	store := t.TempDir()
	for step, content := range []string{"v2", "v3", "v4"} {
		writeFiles(t, r.Dir, map[string]string{"main.go": content})
		legacyGitCheckpoint(t, r.Dir, store, int64(step+1))
	}
	count := func() int {
		list, err := checkpoint.OpenStore(store).List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}

	_, _, err := runCheckpointStderr(t, "prune", "--store-dir", store, "--keep", "1", "--workspace", t.TempDir())
	if exitCode(err) != exitError || !strings.Contains(err.Error(), "nothing was deleted") || count() != 3 || len(refs(r.Dir)) != 3 {
		t.Fatalf("prune --workspace <not a repository>: exit %d, %v; %d checkpoints, %d refs left; want a refusal deleting nothing", exitCode(err), err, count(), len(refs(r.Dir)))
	}

	out, stderr, err := runCheckpointStderr(t, "prune", "--store-dir", store, "--keep", "1", "--workspace", other.Dir)
	if err != nil || count() != 1 {
		t.Fatalf("prune --workspace <another repository>: %v, %d checkpoints left", err, count())
	}
	left := refs(r.Dir)
	if len(left) != 3 || strings.Contains(out, "git ref") {
		t.Fatalf("prune --workspace <another repository> claimed refs it does not hold:\n%s\n%d refs in the real repository", out, len(left))
	}
	if !strings.Contains(stderr, "does not hold the refs of 2 pruned git checkpoints") || strings.Count(stderr, "git update-ref -d "+checkpoint.GitRefPrefix) != 2 {
		t.Errorf("prune --workspace <another repository> did not say which refs stay and how to delete them:\n%s", stderr)
	}
}

// TestCheckpointAMissingStoreDirIsSaidSoAndNotMade: a --store-dir that does not exist (a typo) is
// named as missing by every verb but create, and none of them makes it: a restore used to answer "no
// checkpoint matches", a list an empty table, and both left an empty store directory behind.
func TestCheckpointAMissingStoreDirIsSaidSoAndNotMade(t *testing.T) {
	t.Setenv(envStore, "")
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha"})
	missing := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{
		{"restore", ws, "latest", "--store-dir", missing},
		{"preview", ws, "latest", "--store-dir", missing},
		{"list", "--store-dir", missing},
		{"prune", "--store-dir", missing, "--keep", "1"},
	} {
		_, err := runCheckpoint(t, args...)
		if exitCode(err) != exitError || err == nil || !strings.Contains(err.Error(), "no checkpoint was ever stored there") {
			t.Errorf("%s with a missing --store-dir: exit %d, %v", args[0], exitCode(err), err)
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s made the missing --store-dir: %v", args[0], err)
		}
	}
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", missing); err != nil {
		t.Fatalf("create into a new --store-dir: %v", err)
	}
	if _, err := runCheckpoint(t, "restore", ws, "latest", "--store-dir", missing); err != nil {
		t.Fatalf("restore once the store exists: %v", err)
	}
}

// TestCheckpointAnUnrecordableLeftoverDoesNotCostTheGuard: a leftover whose name is not UTF-8 used to
// fail the guard, so the default --guard warn restored with no guard; the guard now leaves it out and
// the restore says so beside the guard's id.
func TestCheckpointAnUnrecordableLeftoverDoesNotCostTheGuard(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha"})
	if _, err := runCheckpoint(t, "create", ws, "--store-dir", store); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"a.txt": "changed", "n\xff": "x"})
	out, stderr, err := runCheckpointStderr(t, "restore", ws, "latest", "--store-dir", store)
	if err != nil || !strings.Contains(out, "guard checkpoint ") || strings.Contains(stderr, "NO GUARD") || !strings.Contains(stderr, `the guard leaves out n\xff`) {
		t.Fatalf("restore beside an unrecordable leftover: %v\nstdout %s\nstderr %s", err, out, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "alpha" {
		t.Errorf("a.txt = %q after the restore", got)
	}
}

// TestCheckpointCreateLeavesOutANameItCannotRecord: one file name that is not UTF-8 used to fail
// every checkpoint of its workspace. The capture now stores the rest and says, on stderr, which
// names it left out and what a restore does with them.
func TestCheckpointCreateLeavesOutANameItCannotRecord(t *testing.T) {
	t.Setenv(envStore, "")
	ws, store := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"a.txt": "alpha", "caf\xe9.txt": "latin-1"})
	out, stderr, err := runCheckpointStderr(t, "create", ws, "--store-dir", store)
	if err != nil || !strings.Contains(out, "1 files") || !strings.Contains(stderr, `left out caf\xe9.txt: its name or link target is not valid UTF-8`) {
		t.Fatalf("create beside a name a checkpoint cannot record: %v\nstdout %s\nstderr %s", err, out, stderr)
	}
}

// TestCheckpointCreateSaysWhichStoredBlobsItSentAgain: a capture renews every blob it reuses, and a
// store that cannot renew in place (versitygw keeps the time on a same-key copy) gets them sent
// again. The summary counts them apart from the new bytes, rather than "0 new bytes uploaded".
func TestCheckpointCreateSaysWhichStoredBlobsItSentAgain(t *testing.T) {
	storeServer(t)
	const store = "s3://resend-bucket/team"
	ws := t.TempDir()
	files := map[string]string{"main.go": "package main", "data.bin": strings.Repeat("x", 5000)}
	writeFiles(t, ws, files)
	out, err := runCheckpoint(t, "create", ws, "--store", store, "--session", "s1", "--create-bucket")
	if err != nil || strings.Contains(out, "sent again") {
		t.Fatalf("first capture: %v\n%s", err, out)
	}
	// Another session's capture of the same files has no baseline: it finds every blob stored.
	out, err = runCheckpoint(t, "create", ws, "--store", store, "--session", "s2", "-o", "json")
	if err != nil {
		t.Fatalf("second capture: %v\n%s", err, out)
	}
	var c checkpoint.Created
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err, out)
	}
	fileBytes := int64(len(files["main.go"]) + len(files["data.bin"]))
	// The files' two blobs, and the one manifest chunk the two checkpoints share: the manifest
	// bytes not uploaded as new.
	chunkBytes := c.Stats.ManifestBytes - c.Stats.ManifestUploadedBytes
	if !c.New || c.Stats.UploadedBlobs != 0 || c.Stats.ResentBlobs != 3 || c.Stats.ResentBytes != fileBytes+chunkBytes || chunkBytes <= 0 {
		t.Fatalf("second capture: %+v; want no blob uploaded, and the 2 files' blobs and 1 chunk (%d+%d bytes) sent again", c.Stats, fileBytes, chunkBytes)
	}
	out, err = runCheckpoint(t, "create", ws, "--store", store, "--session", "s3")
	want := fmt.Sprintf("0 new bytes uploaded; %d blobs already stored were sent again (%d bytes) because the store cannot renew them in place\n",
		c.Stats.ResentBlobs, c.Stats.ResentBytes)
	if err != nil || !strings.HasSuffix(out, want) {
		t.Fatalf("third capture: %v\n%s\nwant it to end %q", err, out, want)
	}
}
