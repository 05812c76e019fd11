package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/controller"
	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// gcStore is a store with one session, an orphan blob older than a 2s margin and a young orphan.
// It returns the keys of both orphans and of the session's blob. Until the test ends every sweep
// begins one second after the time the store stamped the young orphan with, however long the test's
// commands take on a busy machine: the young orphan is within the 2s margin, yet a sweep that ignored
// the margin would delete it; the old one, stored 3.5s before it by the store's clock, is past it.
func gcStore(t *testing.T, srv *testenv.S3Server, store string) (oldOrphan, youngOrphan, sessionBlob string) {
	t.Helper()
	if _, _, err := runStoreCommand(t, newPushCommand, storeFixture(t, "run-1"), "--store", store, "--create-bucket"); err != nil {
		t.Fatal(err)
	}
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(store, "s3://"), "/")
	for obj := range client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix + "/blobs/", Recursive: true}) {
		sessionBlob = obj.Key
	}
	put := func(data string) string {
		sum := sha256.Sum256([]byte(data))
		h := hex.EncodeToString(sum[:])
		key := prefix + "/blobs/sha256/" + h[:2] + "/" + h
		if _, err := client.PutObject(context.Background(), bucket, key, strings.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		return key
	}
	oldOrphan = put("the blob of a session the GC deleted")
	time.Sleep(3500 * time.Millisecond) // past the 2s margin the tests sweep with
	youngOrphan = put("a blob uploaded a moment ago")
	young, err := client.StatObject(context.Background(), bucket, youngOrphan, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prev := sweepClock
	t.Cleanup(func() { sweepClock = prev })
	sweepClock = func() time.Time { return young.LastModified.Add(time.Second) }
	return oldOrphan, youngOrphan, sessionBlob
}

func bucketKeys(t *testing.T, srv *testenv.S3Server, bucket string) []string {
	t.Helper()
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for obj := range client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if !strings.Contains(obj.Key, "/results/") {
			keys = append(keys, obj.Key)
		}
	}
	return keys
}

func TestGCReportListsWhatASweepWouldDeleteAndWhy(t *testing.T) {
	srv := storeServer(t)
	const store = "s3://gc-bucket/team"
	oldOrphan, youngOrphan, _ := gcStore(t, srv, store)
	before := bucketKeys(t, srv, "gc-bucket")

	out, _, err := runStoreCommand(t, newGCCommand, "report", "--store", store, "--margin", "2s")
	if err != nil {
		t.Fatalf("gc report: %v\n%s", err, out)
	}
	lines := strings.Split(out, "\n")
	want := map[string]string{ // hash -> action and reason
		filepath.Base(oldOrphan):   "delete  Unreferenced",
		filepath.Base(youngOrphan): "keep    UnreferencedYoung",
	}
	for h, action := range want {
		found := false
		for _, l := range lines {
			found = found || (strings.HasPrefix(l, h) && strings.HasSuffix(strings.TrimSpace(l), action))
		}
		if !found {
			t.Errorf("no line for %s ending %q in:\n%s", h, action, out)
		}
	}
	if !strings.Contains(out, "1 blob(s) would be deleted") || !strings.Contains(out, "Marked from 1 session(s), 0 upload(s) in progress and 0 checkpoint(s)") {
		t.Errorf("summary:\n%s", out)
	}

	out, _, err = runStoreCommand(t, newGCCommand, "report", "--store", store, "--margin", "2s", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		DryRun   bool              `json:"dryRun"`
		Sessions int64             `json:"sessions"`
		Blobs    []gc.BlobDecision `json:"blobs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !rep.DryRun || rep.Sessions != 1 || len(rep.Blobs) != 2 || rep.Blobs[0].Delete == rep.Blobs[1].Delete {
		t.Errorf("json report: %+v", rep)
	}
	if after := bucketKeys(t, srv, "gc-bucket"); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("gc report changed the store:\nbefore %v\nafter  %v", before, after)
	}
}

func TestEngineGCSweepWritesItsResultAndDeletesOnlyUnderTheLock(t *testing.T) {
	srv := storeServer(t)
	const store = "s3://sweep-bucket/team"
	oldOrphan, youngOrphan, sessionBlob := gcStore(t, srv, store)
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sweep := func(uid string, extra ...string) (string, error) {
		args := append([]string{"--store", store, "--job-uid", uid, "--margin", "2s", "--termination-log", termLog}, extra...)
		out, _, err := runStoreCommand(t, func() *cobra.Command { return newGCSweepTaskCommand() }, args...)
		return out, err
	}

	// Without --lease-name there is no lock: a sweep that would delete fails, says why, and deletes nothing.
	if _, err := sweep("uid-nolock"); err == nil {
		t.Fatal("a deleting sweep ran without a lock")
	}
	res := jobResultFrom(t, srv, "sweep-bucket", "team", "uid-nolock")
	if res.Outcome != task.Failed || res.Failure.Reason != task.ReasonInvalidInput || !strings.Contains(res.Failure.Message, "lock") {
		t.Fatalf("result without a lock: %+v %+v", res, res.Failure)
	}

	// A dry run needs no lock and deletes nothing.
	if out, err := sweep("uid-dry", "--dry-run"); err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	res = jobResultFrom(t, srv, "sweep-bucket", "team", "uid-dry")
	if g := res.GCSweep; res.Outcome != task.Succeeded || g == nil || !g.DryRun || g.DeletedBlobs != 0 || g.Candidates != 2 || g.Young != 1 {
		t.Fatalf("dry-run result %+v: %+v", res, res.GCSweep)
	}

	lock := &blobsweep.MemLock{}
	defer func(prev func(*cobra.Command) (blobsweep.Lock, error)) { gcSweepLock = prev }(gcSweepLock)
	gcSweepLock = func(*cobra.Command) (blobsweep.Lock, error) { return lock, nil }
	if out, err := sweep("uid-sweep"); err != nil {
		t.Fatalf("sweep: %v\n%s", err, out)
	}
	res = jobResultFrom(t, srv, "sweep-bucket", "team", "uid-sweep")
	want := task.GCSweepResult{RetainedSessions: 1, MarkedBlobs: res.GCSweep.MarkedBlobs, Candidates: 2, Young: 1, DeletedBlobs: 1,
		FreedBytes: int64(len("the blob of a session the GC deleted"))}
	if res.Outcome != task.Succeeded || *res.GCSweep != want || res.GCSweep.MarkedBlobs < 1 {
		t.Fatalf("sweep result %+v: %+v, want %+v", res, res.GCSweep, want)
	}
	summary, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := task.DecodeSummary(summary); err != nil || s.Headline != "deleted 1 blob(s)" || s.JobUID != "uid-sweep" {
		t.Fatalf("termination message %s: %v", summary, err)
	}
	keys := strings.Join(bucketKeys(t, srv, "sweep-bucket"), "\n")
	if strings.Contains(keys, oldOrphan) || !strings.Contains(keys, youngOrphan) || !strings.Contains(keys, sessionBlob) {
		t.Errorf("keys after the sweep:\n%s", keys)
	}
	if lock.Holder() != "" {
		t.Errorf("the sweep left the lock held by %q", lock.Holder())
	}

	// Another sweep holding the lock: this one fails (retryably) and deletes nothing.
	if _, err := lock.Acquire(context.Background(), "other-sweep"); err != nil {
		t.Fatal(err)
	}
	if _, err := sweep("uid-busy"); err == nil {
		t.Fatal("a sweep ran while another held the lock")
	}
	res = jobResultFrom(t, srv, "sweep-bucket", "team", "uid-busy")
	if res.Outcome != task.Failed || !res.Failure.Reason.Retryable() || !strings.Contains(res.Failure.Message, "other-sweep") {
		t.Fatalf("result while locked: %+v %+v", res, res.Failure)
	}
}

// The lock a deleting sweep takes is the Lease its flags name, reached through the cluster
// configuration; without a Lease name or namespace there is none.
func TestGCSweepLockIsTheLeaseItsFlagsName(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	cmd := newGCSweepTaskCommand()
	if err := cmd.ParseFlags([]string{"--lease-namespace", "team-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gcSweepLock(cmd); err == nil || !strings.Contains(err.Error(), "--lease-name") {
		t.Fatalf("no --lease-name: %v, want an error naming the flag", err)
	}
	cmd = newGCSweepTaskCommand()
	if err := cmd.ParseFlags([]string{"--lease-name", "agentrewind-gc-sweep-0a1b", "--lease-namespace", "team-a", "--lease-duration", "90s"}); err != nil {
		t.Fatal(err)
	}
	lock, err := gcSweepLock(cmd)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := lock.(*controller.LeaseLock)
	if !ok {
		t.Fatalf("the lock is a %T, want a *controller.LeaseLock", lock)
	}
	if l.Name != "agentrewind-gc-sweep-0a1b" || l.Namespace != "team-a" || l.Duration != 90*time.Second || l.Client == nil || l.Clock == nil {
		t.Errorf("lock %+v", l)
	}
}
