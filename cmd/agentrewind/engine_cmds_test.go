package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// jobResultFrom reads results/<uid>.json back from the store and decodes it the way a controller will.
func jobResultFrom(t *testing.T, srv interface {
	Client() (*minio.Client, error)
}, bucket, prefix, uid string) *task.Result {
	t.Helper()
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := client.GetObject(context.Background(), bucket, prefix+"/results/"+uid+".json", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("reading the result of job %s: %v", uid, err)
	}
	res, err := task.Decode(data)
	if err != nil {
		t.Fatalf("decoding the result of job %s: %v\n%s", uid, err, data)
	}
	return res
}

// TestEngineTasksWriteTheirResultsToTheStore runs the verify and resume-plan tasks as a Job would,
// against versitygw, and reads each result back as the controller will: from results/<uid>.json and
// from the termination message.
func TestEngineTasksWriteTheirResultsToTheStore(t *testing.T) {
	srv := storeServer(t)
	const store = "s3://engine-bucket/team"
	fixture := storeFixture(t, "run-1")
	if _, _, err := runStoreCommand(t, newPushCommand, fixture, "--store", store, "--create-bucket"); err != nil {
		t.Fatal(err)
	}
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	job := func(task, session, uid string) (string, error) {
		out, _, err := runStoreCommand(t, newEngineCommand, task, "--store", store, "--session-id", session, "--job-uid", uid, "--termination-log", termLog)
		return out, err
	}

	out, err := job("verify", "run-1", "uid-verify")
	if err != nil {
		t.Fatalf("engine verify: %v\n%s", err, out)
	}
	res := jobResultFrom(t, srv, "engine-bucket", "team", "uid-verify")
	v := res.Verify
	if res.Outcome != task.Succeeded || v == nil || !v.Intact || !v.Ended || v.Events != 3 || v.ToolCalls != 1 || v.Blobs != 1 || !v.Vault || v.EventsHash == "" {
		t.Fatalf("verify result %+v: %+v", res, v)
	}
	if want := sessionBytes(t, fixture); v.Bytes != want {
		t.Errorf("verify result: %d bytes, want %d, the session's log, meta.json, vault and blobs", v.Bytes, want)
	}
	summary, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := task.DecodeSummary(summary); err != nil || s.Headline != "intact" || s.JobUID != "uid-verify" || len(summary) > task.MaxTerminationMessage {
		t.Fatalf("termination message %s: %v", summary, err)
	}

	// A blob damaged at rest is a finding of the verify task, which succeeded as a task.
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	var blobKey string
	for obj := range client.ListObjects(context.Background(), "engine-bucket", minio.ListObjectsOptions{Prefix: "team/blobs/", Recursive: true}) {
		blobKey = obj.Key
	}
	if _, err := client.PutObject(context.Background(), "engine-bucket", blobKey, strings.NewReader("tampered"), 8, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := job("verify", "run-1", "uid-corrupt"); err != nil {
		t.Fatalf("a corrupt session is a finding, not a failed task: %v\n%s", err, out)
	}
	if res := jobResultFrom(t, srv, "engine-bucket", "team", "uid-corrupt"); res.Outcome != task.Succeeded || res.Verify.Intact || res.Verify.Problem == "" ||
		res.Verify.ProblemKind != task.ProblemDigestMismatch {
		t.Fatalf("verify of a damaged session: %+v %+v", res, res.Verify)
	}
	// resume-plan cannot judge a session it cannot trust: the task fails, and says so.
	if _, err := job("resume-plan", "run-1", "uid-plan-corrupt"); exitCode(err) != exitCorrupt {
		t.Fatalf("resume-plan of a damaged session: exit %d (%v), want %d", exitCode(err), err, exitCorrupt)
	}
	if res := jobResultFrom(t, srv, "engine-bucket", "team", "uid-plan-corrupt"); res.Outcome != task.Failed || res.Failure.Reason != task.ReasonSessionCorrupt {
		t.Fatalf("resume-plan of a damaged session: %+v", res)
	}

	// A session that is not there fails the task with a reason the controller can act on.
	if _, err := job("verify", "no-such-run", "uid-missing"); err == nil {
		t.Fatal("verify of a missing session succeeded")
	}
	if res := jobResultFrom(t, srv, "engine-bucket", "team", "uid-missing"); res.Outcome != task.Failed || res.Failure.Reason != task.ReasonSessionNotFound {
		t.Fatalf("verify of a missing session: %+v %+v", res, res.Failure)
	}

	// resume-plan of a crashed run pulled from the store, judged against its workspace.
	repo := newPlanRepo(t, false)
	if _, _, err := runStoreCommand(t, newPushCommand, planSession(t, repo), "--store", store); err != nil {
		t.Fatal(err)
	}
	out, _, err = runStoreCommand(t, newEngineCommand, "resume-plan", "--store", store, "--session-id", "run-session", "--job-uid", "uid-plan",
		"--git-dir", repo.dir, "--termination-log", termLog)
	if err != nil {
		t.Fatalf("engine resume-plan: %v\n%s", err, out)
	}
	res = jobResultFrom(t, srv, "engine-bucket", "team", "uid-plan")
	rp := res.ResumePlan
	if res.Outcome != task.Succeeded || rp == nil || rp.Report.Resume.Verdict != resume.Resumable || !rp.Evidence.Workspace ||
		rp.Evidence.ResolvedCommit == "" || !rp.Evidence.PlanPresent || rp.Evidence.EventsHash == "" {
		t.Fatalf("resume-plan result %+v: %+v", res, rp)
	}
	if s, err := os.ReadFile(termLog); err != nil || !strings.Contains(string(s), "RESUMABLE REACHABLE") {
		t.Fatalf("termination message %s: %v", s, err)
	}

	// A Job never clones its own file system, whatever URL it is handed.
	for i, url := range []string{"file:///etc", "/var/run/secrets/kubernetes.io/serviceaccount", "http://169.254.169.254/"} {
		uid := fmt.Sprintf("uid-plan-local-%d", i)
		if _, _, err := runStoreCommand(t, newEngineCommand, "resume-plan", "--store", store, "--session-id", "run-session", "--job-uid", uid,
			"--git-url", url, "--termination-log", termLog); err == nil {
			t.Fatalf("an engine resume-plan cloned %q", url)
		}
		if res := jobResultFrom(t, srv, "engine-bucket", "team", uid); res.Outcome != task.Failed || res.Failure.Reason != task.ReasonInvalidInput ||
			!strings.Contains(res.Failure.Message, "clones only https://, ssh:// or git://") {
			t.Fatalf("resume-plan with --git-url %s: %+v %+v", url, res, res.Failure)
		}
	}
}

func TestEngineTasksRefuseAJobWithoutItsIdentity(t *testing.T) {
	storeServer(t)
	t.Setenv("JOB_UID", "")
	_, _, err := runStoreCommand(t, newEngineCommand, "verify", "--store", "s3://b/p", "--session-id", "run-1")
	if err == nil || !strings.Contains(err.Error(), "--job-uid") {
		t.Fatalf("err = %v", err)
	}
	_, _, err = runStoreCommand(t, newEngineCommand, "verify", "--store", "s3://b/p", "--session-id", "run-1", "--job-uid", "../x")
	if err == nil || !strings.Contains(err.Error(), "--job-uid") {
		t.Fatalf("a uid that is no key: err = %v", err)
	}
}

// TestASecretReadFromTheEnvironmentReachesNoStoredObject records an agent that reads a credential with
// plain os.Getenv and sends it to a model and a tool, pushes the recording, and reads back every object
// in the bucket: none holds the secret.
func TestASecretReadFromTheEnvironmentReachesNoStoredObject(t *testing.T) {
	srv := storeServer(t)
	const canary = "canary-billing-9f3e71c2d4"
	t.Setenv("BILLING_API_TOKEN", canary)
	dir := filepath.Join(t.TempDir(), "run-env")
	tools := map[string]replay.Tool{"charge": func(_ context.Context, args json.RawMessage) (any, error) { return string(args), nil }}
	_, err := replay.Record(context.Background(), replay.RecordOptions{Dir: dir, ID: "run-env", Model: echoModel{}, Tools: tools},
		func(ctx context.Context, ac replay.AgentContext) error {
			token := os.Getenv("BILLING_API_TOKEN")
			if _, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{msg("user", "bill with "+token+strings.Repeat(" pad", 5000))}}); err != nil {
				return err
			}
			_, err := ac.Tool(ctx, "charge", map[string]string{"token": token})
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStoreCommand(t, newPushCommand, dir, "--store", "s3://canary-bucket/team", "--create-bucket"); err != nil {
		t.Fatal(err)
	}
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for info := range client.ListObjects(context.Background(), "canary-bucket", minio.ListObjectsOptions{Recursive: true}) {
		obj, err := client.GetObject(context.Background(), "canary-bucket", info.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			t.Fatal(err)
		}
		read++
		if strings.Contains(string(data), canary) {
			t.Errorf("%s holds the secret", info.Key)
		}
	}
	if read < 4 { // meta.json, its record, events.jsonl and the request's blob at least
		t.Fatalf("only %d objects were read back", read)
	}
}

// TestLsEscapesWhatAMetaJSONSays: ls prints fields of meta.json files anyone with write access to the
// bucket may have written; terminal controls in them are shown escaped, never acted on.
func TestLsEscapesWhatAMetaJSONSays(t *testing.T) {
	hostile := "p\x1b]0;PWNED\x07\x1b[31mRED\r\nFAKE LINE"
	var out strings.Builder
	err := printLs(&out, blobstore.StoreURL{Bucket: "b"}, []blobstore.SessionInfo{{ID: "run-1",
		Meta: session.Meta{ID: "run-1", Parent: hostile}, Problem: "bad\x1b[2J"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07\r") || strings.Count(out.String(), "\n") != 2 {
		t.Fatalf("ls printed terminal controls:\n%q", out.String())
	}
}

// TestEngineCheckpointTaskWritesItsResult runs the checkpoint task as a Job would, against versitygw:
// the checkpoint lands in the store and its result is read back as the controller will.
func TestEngineCheckpointTaskWritesItsResult(t *testing.T) {
	srv := storeServer(t)
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.MakeBucket(context.Background(), "ckpt-jobs", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	const store = "s3://ckpt-jobs/team"
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"main.go": "package main", "build/out.o": "object code"})
	digest := strings.Repeat("d", 64)
	job := func(uid string, extra ...string) error {
		args := append([]string{"checkpoint", "--store", store, "--workspace", ws, "--session-id", "run-7", "--job-uid", uid,
			"--step", "12", "--turn", "5", "--turn-digest", digest, "--exclude", "build/", "--termination-log", termLog}, extra...)
		_, _, err := runStoreCommand(t, newEngineCommand, args...)
		return err
	}

	if err := job("uid-ckpt-1"); err != nil {
		t.Fatal(err)
	}
	res := jobResultFrom(t, srv, "ckpt-jobs", "team", "uid-ckpt-1")
	if res.Outcome != task.Succeeded || res.Task != task.Checkpoint || res.Checkpoint == nil {
		t.Fatalf("result %+v", res)
	}
	id := res.Checkpoint.CheckpointID
	want := task.CheckpointResult{CheckpointID: id, SessionID: "run-7", ManifestHash: id, Files: 1, Bytes: 12, IncrementalBytes: 12}
	if d := cmp.Diff(want, *res.Checkpoint); d != "" || !session.ValidBlobHash(id) {
		t.Errorf("checkpoint result (-want +got):\n%s", d)
	}
	if _, err := client.StatObject(context.Background(), "ckpt-jobs", "team/checkpoints/"+id+"/manifest.json", minio.StatObjectOptions{}); err != nil {
		t.Errorf("the checkpoint's manifest is not in the store: %v", err)
	}
	summary, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := task.DecodeSummary(summary); err != nil || s.Headline != "captured" || s.JobUID != "uid-ckpt-1" {
		t.Errorf("termination message %s: %v", summary, err)
	}
	// A Job's checkpoint is minted for a proxy-minted Checkpoint: it anchors a rewind at its turn.
	out, err := runCheckpoint(t, "list", "--store", store, "-o", "json")
	var list []checkpoint.Summary
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if a := list[0].Anchor; !a.AnchorsRewind() || a.Step != 12 || a.Turn != 5 || a.TurnDigest != digest {
		t.Errorf("anchor %+v", a)
	}

	// The same workspace again writes nothing and names the same checkpoint.
	if err := job("uid-ckpt-2"); err != nil {
		t.Fatal(err)
	}
	want.Deduplicated, want.IncrementalBytes = true, 0
	if d := cmp.Diff(want, *jobResultFrom(t, srv, "ckpt-jobs", "team", "uid-ckpt-2").Checkpoint); d != "" {
		t.Errorf("deduplicated checkpoint result (-want +got):\n%s", d)
	}
	if s, err := task.DecodeSummary(mustRead(t, termLog)); err != nil || s.Headline != "unchanged" {
		t.Errorf("termination message of a deduplicated capture: %+v, %v", s, err)
	}

	// Input the Job cannot use fails it with a reason that says retrying will not help.
	for uid, extra := range map[string][]string{
		"uid-no-workspace": {"--workspace", filepath.Join(ws, "missing")},
		"uid-bad-digest":   {"--turn-digest", "ABC"},
	} {
		if err := job(uid, extra...); err == nil {
			t.Errorf("%s: the task succeeded", uid)
		}
		res := jobResultFrom(t, srv, "ckpt-jobs", "team", uid)
		if res.Outcome != task.Failed || res.Failure.Reason != task.ReasonInvalidInput || res.Failure.Reason.Retryable() {
			t.Errorf("%s: %+v %+v", uid, res, res.Failure)
		}
	}
}

// TestEveryCommandsErrorIsPrintedEscaped runs commands through the root, as the binary does, with a
// path that carries terminal controls: whatever command fails, its error shows them escaped.
func TestEveryCommandsErrorIsPrintedEscaped(t *testing.T) {
	hostile := filepath.Join(t.TempDir(), "run\x1b]0;PWNED\x07\r\nFAKE")
	for _, args := range [][]string{{"plan", hostile}, {"unpack", hostile, t.TempDir()}, {"pack", hostile, hostile + ".rewind"},
		{"checkpoint", "create", hostile, "--store-dir", t.TempDir()}} {
		root := newRootCommand()
		root.SetArgs(args)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		err := root.ExecuteContext(context.Background())
		if err == nil {
			t.Fatalf("%s succeeded on a path that does not exist", args[0])
		}
		if strings.ContainsAny(err.Error(), "\x1b\x07\r\n") {
			t.Errorf("%s: the error prints terminal controls: %q", args[0], err.Error())
		}
	}
}

// TestVerifyListsOnlyTheRecordersAnchors records a session with two SUSPEND stamps the recorder minted
// (author OS_RECORDED, the turn and the digest of that turn's transcript, as replay's Suspend writes
// them) and one the agent wrote in the same shape: the verify result lists the two, at their steps.
func TestVerifyListsOnlyTheRecordersAnchors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "anchored")
	w, err := session.Create(dir, session.Meta{ID: "anchored", CreatedAt: 1700000000000, FingerprintMode: "strict"}, session.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := func(text string) *session.Request {
		msg, _ := json.Marshal(text)
		return &session.Request{Model: "m", Messages: []session.Message{{Role: "user", Content: msg}}}
	}
	r0, r1 := req("plan the fix"), req("apply the fix")
	d0, d1 := evidence.TurnDigest(r0), evidence.TurnDigest(r1)
	for i, ev := range []session.Event{
		{Kind: session.KindSessionStart},
		{Kind: session.KindModelCall, Request: r0},
		{Kind: session.KindLedger, Author: session.AuthorRecorder, Ledger: ledger.Suspend(0, d0, "").JSON()},
		{Kind: session.KindModelCall, Request: r1},
		{Kind: session.KindLedger, Author: session.AuthorAgent, Ledger: ledger.Suspend(1, d1, "").JSON()},
		{Kind: session.KindLedger, Author: session.AuthorRecorder, Ledger: ledger.Suspend(1, d1, "").JSON()},
	} {
		ev.Step, ev.Seq, ev.Lane = int64(i), int64(i), "0"
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var v task.VerifyResult
	if err := describeSession(dir, &v); err != nil || !v.Intact {
		t.Fatalf("describeSession: %v, %+v", err, v)
	}
	want := []task.Anchor{{Step: s.Events[2].Step, TurnIndex: 0, TranscriptDigest: d0}, {Step: s.Events[5].Step, TurnIndex: 1, TranscriptDigest: d1}}
	if d := cmp.Diff(want, v.Anchors); d != "" || v.TotalAnchors != 2 {
		t.Errorf("anchors (-want +got):\n%s\ntotal %d, want 2", d, v.TotalAnchors)
	}
	if s.Events[4].Author != session.AuthorAgent || s.Events[4].Step == want[1].Step {
		t.Fatalf("the look-alike was not recorded as the agent's at a step of its own: %+v", s.Events[4])
	}
	// The run is parked at its latest anchor: the log is open and ends with it.
	if a, ok := v.ParkedAt(); !ok || a != want[1] {
		t.Errorf("ParkedAt = %+v, %v; want the latest anchor", a, ok)
	}
}

// sessionBytes is the size of a session directory's files: meta.json, events.jsonl, vault.enc, blobs/*.
func sessionBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
