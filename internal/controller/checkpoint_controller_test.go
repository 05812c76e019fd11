package controller

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// startCheckpointManager runs the Checkpoint reconciler in a manager of its own, beside the one
// startManager runs, with the same dependencies.
func (e *env) startCheckpointManager() {
	e.t.Helper()
	e.runManager(nil, cache.Options{}, func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
		r := &CheckpointReconciler{Deps: *deps}
		r.Recorder = mgr.GetEventRecorder(fmt.Sprintf("checkpoint-test-%d", n))
		return []setupper{r}
	})
}

// anchor is what the test expects a Checkpoint to anchor.
type anchor struct {
	step   int64
	turn   int32
	digest string
}

// recordAnchoredSession writes a session whose recorder stamped two anchors (SUSPEND, OS_RECORDED, the
// turn and the digest of its transcript, as replay's Suspend does) and whose agent wrote a SUSPEND of
// the same shape between them. The log is open and ends with the second anchor: the run is parked there.
func recordAnchoredSession(t *testing.T, id string) (string, []anchor) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), id)
	w, err := session.Create(dir, session.Meta{ID: id, CreatedAt: 1700000000000, FingerprintMode: "strict"}, session.WriterOptions{})
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
	return dir, []anchor{{2, 0, d0}, {5, 1, d1}}
}

// anchoredSession is an AgentSession whose agent works in claim "ws", directory "repo".
func anchoredSession(name string) *v1alpha1.AgentSession {
	s := newSession(name, name)
	s.Spec.Agent = v1alpha1.AgentSpec{Image: "registry.example/agent:1", Workspace: v1alpha1.WorkspaceVolume{ClaimName: "ws", SubPath: "repo"}}
	return s
}

func (e *env) checkpoint(name string) *v1alpha1.Checkpoint {
	e.t.Helper()
	var ck v1alpha1.Checkpoint
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &ck); err != nil {
		e.t.Fatal(err)
	}
	return &ck
}

func (e *env) waitCheckpoint(name, typ string, st metav1.ConditionStatus, reason string) *v1alpha1.Checkpoint {
	e.t.Helper()
	ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	e.waitCondition(ck, func() []metav1.Condition { return ck.Status.Conditions }, typ, st, reason)
	return ck
}

// checkpointsOf lists the Checkpoints labelled with a session's name, sorted by name.
func (e *env) checkpointsOf(session string) []v1alpha1.Checkpoint {
	e.t.Helper()
	var list v1alpha1.CheckpointList
	if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{LabelSession: session}); err != nil {
		e.t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.Checkpoint) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// verifySession runs the session's verify Job and waits for the session to be Ready.
func (e *env) verifySession(name string) (*v1alpha1.AgentSession, string) {
	e.t.Helper()
	var job *batchv1.Job
	s := e.session(name)
	e.eventually("the verify Job of generation "+fmt.Sprint(s.Generation), func() (bool, string) {
		for _, j := range e.jobsOf(name, "verify") {
			if len(j.Status.Conditions) == 0 {
				job = &j
				return true, ""
			}
		}
		return false, "no unfinished verify Job"
	})
	if out := e.runJob(job); !strings.Contains(out, `"headline"`) {
		e.t.Fatalf("engine verify:\n%s", out)
	}
	e.eventually("the session verified by "+job.Name, func() (bool, string) {
		s = e.session(name)
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, job.Name), fmt.Sprintf("%+v", c)
	})
	return s, job.Name
}

// runSnapshotJob runs a checkpoint Job as the kubelet would with its workspace claim's subPath at dir.
func (e *env) runSnapshotJob(job *batchv1.Job, dir string) string {
	e.t.Helper()
	run := job.DeepCopy()
	args := run.Spec.Template.Spec.Containers[0].Args
	i := slices.Index(args, "--workspace")
	if i < 0 || args[i+1] != workspaceMount {
		e.t.Fatalf("checkpoint Job args %v do not capture %s", args, workspaceMount)
	}
	args[i+1] = dir
	return e.runJob(run)
}

func writeWorkspace(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var condOpts = cmp.Options{cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime", "Message", "ObservedGeneration"),
	cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type })}

func readyConds(reason string) []metav1.Condition {
	return []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason},
		{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionFalse, Reason: reason},
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: reason},
	}
}

func stalledConds(reason string) []metav1.Condition {
	return []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason},
		{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionFalse, Reason: reason},
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason},
	}
}

// TestTheRecordersAnchorsBecomeCheckpoints is the path end to end: a verified session with two
// recorder anchors and an agent's look-alike gets exactly two Checkpoints, named after the session and
// the step, owned by it, never minted twice; the earlier anchor is an anchor only (Ready/AnchorOnly);
// the anchor the open run is parked at snapshots the session's workspace claim, read-only, in a
// restricted Job whose real capture into versitygw fills status.snapshot.
func TestTheRecordersAnchorsBecomeCheckpoints(t *testing.T) {
	e := newEnv(t)
	dir, anchors := recordAnchoredSession(t, "run-1")
	push(t, e.storeKey(), dir)
	e.startManager(nil)
	e.startCheckpointManager()
	e.create(anchoredSession("run-1"))
	s, _ := e.verifySession("run-1")

	var cks []v1alpha1.Checkpoint
	e.eventually("two Checkpoints", func() (bool, string) {
		cks = e.checkpointsOf("run-1")
		return len(cks) == 2, fmt.Sprintf("%d Checkpoints", len(cks))
	})
	wantSpecs := map[string]v1alpha1.CheckpointSpec{
		"run-1-step-2": {SessionRef: v1alpha1.LocalObjectReference{Name: "run-1"}, Step: new(anchors[0].step), TurnIndex: new(anchors[0].turn), TranscriptDigest: anchors[0].digest},
		"run-1-step-5": {SessionRef: v1alpha1.LocalObjectReference{Name: "run-1"}, Step: new(anchors[1].step), TurnIndex: new(anchors[1].turn), TranscriptDigest: anchors[1].digest,
			Workspace: v1alpha1.WorkspaceSnapshotSpec{Volume: v1alpha1.WorkspaceVolume{ClaimName: "ws", SubPath: "repo"}}},
	}
	gotSpecs := map[string]v1alpha1.CheckpointSpec{}
	uids := map[string]types.UID{}
	for _, ck := range cks {
		gotSpecs[ck.Name] = ck.Spec
		uids[ck.Name] = ck.UID
		if ref := metav1.GetControllerOf(&ck); ref == nil || ref.UID != s.UID || ref.Kind != "AgentSession" {
			t.Errorf("Checkpoint %s has controller %+v, want AgentSession run-1", ck.Name, ref)
		}
	}
	if d := cmp.Diff(wantSpecs, gotSpecs); d != "" {
		t.Errorf("Checkpoints (-want +got):\n%s", d)
	}

	// The earlier anchor: checked against the session's verification, no snapshot.
	only := e.waitCheckpoint("run-1-step-2", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAnchorOnly)
	if d := cmp.Diff(readyConds(v1alpha1.ReasonAnchorOnly), only.Status.Conditions, condOpts); d != "" {
		t.Errorf("anchor-only conditions (-want +got):\n%s", d)
	}
	if got := e.kstatusOf(only, "Checkpoint"); got != status.CurrentStatus {
		t.Errorf("kstatus of an anchor-only Checkpoint = %s, want Current", got)
	}
	if !cmp.Equal(v1alpha1.WorkspaceSnapshot{}, only.Status.Snapshot) || len(e.jobsOf("run-1-step-2", "checkpoint")) != 0 {
		t.Errorf("an anchor-only Checkpoint has snapshot %+v and %d Jobs", only.Status.Snapshot, len(e.jobsOf("run-1-step-2", "checkpoint")))
	}

	// The parked anchor: a snapshot Job over the claim, read-only, restricted.
	job := e.waitJob("run-1-step-5", "checkpoint")
	checkJobContract(t, job, e.ns)
	checkSnapshotJob(t, job, anchors[1])
	e.waitCheckpoint("run-1-step-5", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	ws := writeWorkspace(t, map[string]string{"main.go": "package main\n", "docs/README.md": strings.Repeat("read me ", 50)})
	if out := e.runSnapshotJob(job, ws); !strings.Contains(out, `"outcome":"Succeeded"`) {
		t.Fatalf("engine checkpoint:\n%s", out)
	}
	ck := e.waitCheckpoint("run-1-step-5", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSnapshotStored)
	manifests, err := openStore(t, e.storeKey()).Checkpoints().List(e.ctx)
	if err != nil || len(manifests) != 1 {
		t.Fatalf("stored checkpoints %+v, %v; want one", manifests, err)
	}
	m := manifests[0]
	if m.Anchor.Session != "run-1" || m.Anchor.Step != 5 || m.Anchor.Turn != 1 || m.Anchor.TurnDigest != anchors[1].digest {
		t.Errorf("the stored manifest anchors %+v", m.Anchor)
	}
	wantSnap := v1alpha1.WorkspaceSnapshot{ManifestDigest: m.ID, Files: new(int64(2)), TotalBytes: new(int64(13 + 400)), IncrementalBytes: new(int64(13 + 400))}
	if d := cmp.Diff(wantSnap, ck.Status.Snapshot); d != "" {
		t.Errorf("snapshot (-want +got):\n%s", d)
	}
	if d := cmp.Diff(readyConds(v1alpha1.ReasonSnapshotStored), ck.Status.Conditions, condOpts); d != "" {
		t.Errorf("snapshot conditions (-want +got):\n%s", d)
	}
	if got := e.kstatusOf(ck, "Checkpoint"); got != status.CurrentStatus {
		t.Errorf("kstatus of a stored snapshot = %s, want Current", got)
	}

	// Resync: a new generation of the session is verified again and mints nothing new.
	e.editSession("run-1", func(s *v1alpha1.AgentSession) {
		s.Spec.Retention = v1alpha1.RetentionSpec{Policy: v1alpha1.RetentionRetain}
	})
	_, verifyJob := e.verifySession("run-1")
	e.eventually("the anchor-only Checkpoint checked against the new verification", func() (bool, string) {
		c := meta.FindStatusCondition(e.checkpoint("run-1-step-2").Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonAnchorOnly && strings.Contains(c.Message, verifyJob), fmt.Sprintf("%+v", c)
	})
	got := map[string]types.UID{}
	for _, ck := range e.checkpointsOf("run-1") {
		got[ck.Name] = ck.UID
	}
	if d := cmp.Diff(uids, got); d != "" {
		t.Errorf("Checkpoints after the session was verified again (-before +after):\n%s", d)
	}
	if n := len(e.jobsOf("run-1-step-5", "checkpoint")); n != 1 {
		t.Errorf("%d snapshot Jobs after a resync, want 1", n)
	}
	if d := cmp.Diff(wantSnap, e.checkpoint("run-1-step-5").Status.Snapshot); d != "" {
		t.Errorf("snapshot after a resync (-want +got):\n%s", d)
	}
}

// checkSnapshotJob checks what a snapshot Job adds to the contract: the claim mounted read-only at the
// workspace, and the anchor it captures at.
func checkSnapshotJob(t *testing.T, job *batchv1.Job, a anchor) {
	t.Helper()
	pod := job.Spec.Template.Spec
	vol := pod.Volumes[slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "workspace" })]
	if d := cmp.Diff(&corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ws", ReadOnly: true}, vol.PersistentVolumeClaim); d != "" {
		t.Errorf("workspace volume (-want +got):\n%s", d)
	}
	mounts := pod.Containers[0].VolumeMounts
	if d := cmp.Diff(corev1.VolumeMount{Name: "workspace", MountPath: workspaceMount, SubPath: "repo", ReadOnly: true},
		mounts[slices.IndexFunc(mounts, func(m corev1.VolumeMount) bool { return m.Name == "workspace" })]); d != "" {
		t.Errorf("workspace mount (-want +got):\n%s", d)
	}
	args := strings.Join(pod.Containers[0].Args, " ")
	want := fmt.Sprintf("engine checkpoint --store s3://%s/%s/%s --session-id run-1 --endpoint http://%s --workspace /workspace --step %d --turn %d --turn-digest %s",
		testBucket, testPrefix, job.Namespace, s3.Endpoint, a.step, a.turn, a.digest)
	if args != want {
		t.Errorf("snapshot args\n got %s\nwant %s", args, want)
	}
}

// operatorCheckpoint is a Checkpoint as the operator would mint it for session at an anchor.
func operatorCheckpoint(name, session string, a anchor, claim string) *v1alpha1.Checkpoint {
	ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelSession: session}},
		Spec: v1alpha1.CheckpointSpec{SessionRef: v1alpha1.LocalObjectReference{Name: session}, Step: new(a.step), TurnIndex: new(a.turn), TranscriptDigest: a.digest}}
	if claim != "" {
		ck.Spec.Workspace = v1alpha1.WorkspaceSnapshotSpec{Volume: v1alpha1.WorkspaceVolume{ClaimName: claim, SubPath: "repo"}}
	}
	return ck
}

// TestACheckpointItsSessionDoesNotHoldStalls: a Checkpoint whose step, turn or digest the session's
// verification does not list is Stalled with AnchorMismatch (kstatus Failed) and snapshots nothing; one
// whose session does not exist waits for it.
func TestACheckpointItsSessionDoesNotHoldStalls(t *testing.T) {
	e := newEnv(t)
	dir, anchors := recordAnchoredSession(t, "run-2")
	push(t, e.storeKey(), dir)
	e.startManager(nil)
	e.startCheckpointManager()
	e.create(operatorCheckpoint("orphan", "no-such-session", anchors[0], ""))
	e.create(anchoredSession("run-2"))
	e.verifySession("run-2")

	forged := anchors[1]
	forged.digest = strings.Repeat("f", 64)
	cases := map[string]anchor{
		"agents-step": {4, 1, anchors[1].digest}, // the step of the agent's look-alike
		"wrong-turn":  {anchors[0].step, 1, anchors[0].digest},
		"forged":      forged,
	}
	for name, a := range cases {
		e.create(operatorCheckpoint(name, "run-2", a, "ws"))
	}
	for name := range cases {
		ck := e.waitCheckpoint(name, v1alpha1.ConditionStalled, metav1.ConditionTrue, ReasonAnchorMismatch)
		if d := cmp.Diff(stalledConds(ReasonAnchorMismatch), ck.Status.Conditions, condOpts); d != "" {
			t.Errorf("%s conditions (-want +got):\n%s", name, d)
		}
		if got := e.kstatusOf(ck, "Checkpoint"); got != status.FailedStatus {
			t.Errorf("kstatus of %s = %s, want Failed", name, got)
		}
	}
	time.Sleep(time.Second)
	for name := range cases {
		if n := len(e.jobsOf(name, "checkpoint")); n != 0 {
			t.Errorf("%d snapshot Jobs for %s, whose anchor the session does not hold", n, name)
		}
	}
	e.waitCheckpoint("orphan", v1alpha1.ConditionReconciling, metav1.ConditionTrue, conditions.ReasonWaitingForSession)
}

// TestAnUnchangedWorkspaceIsDeduplicated: a second capture of the same workspace at the same anchor
// uploads nothing and names the Checkpoint whose manifest it equalled.
func TestAnUnchangedWorkspaceIsDeduplicated(t *testing.T) {
	e := newEnv(t)
	dir, anchors := recordAnchoredSession(t, "run-3")
	push(t, e.storeKey(), dir)
	e.startManager(nil)
	e.startCheckpointManager()
	e.create(anchoredSession("run-3"))
	e.verifySession("run-3")
	ws := writeWorkspace(t, map[string]string{"main.go": "package main\n"})

	first := e.waitJob("run-3-step-5", "checkpoint")
	if out := e.runSnapshotJob(first, ws); !strings.Contains(out, `"outcome":"Succeeded"`) {
		t.Fatalf("engine checkpoint:\n%s", out)
	}
	a := e.waitCheckpoint("run-3-step-5", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSnapshotStored)

	e.create(operatorCheckpoint("run-3-again", "run-3", anchors[1], "ws"))
	second := e.waitJob("run-3-again", "checkpoint")
	if second.Name == first.Name {
		t.Fatalf("the second Checkpoint reused Job %s", first.Name)
	}
	if out := e.runSnapshotJob(second, ws); !strings.Contains(out, `"outcome":"Succeeded"`) {
		t.Fatalf("engine checkpoint:\n%s", out)
	}
	b := e.waitCheckpoint("run-3-again", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSnapshotStored)
	want := v1alpha1.WorkspaceSnapshot{ManifestDigest: a.Status.Snapshot.ManifestDigest, Files: new(int64(1)), TotalBytes: new(int64(13)),
		IncrementalBytes: new(int64(0)), PreviousRef: v1alpha1.LocalObjectReference{Name: "run-3-step-5"}}
	if d := cmp.Diff(want, b.Status.Snapshot); d != "" {
		t.Errorf("deduplicated snapshot (-want +got):\n%s", d)
	}
	if *a.Status.Snapshot.IncrementalBytes != 13 {
		t.Errorf("the first capture added %d bytes, want 13", *a.Status.Snapshot.IncrementalBytes)
	}
}

// TestAFailedSnapshotJobStalls: a snapshot Job that failed without a retryable reason stalls the
// Checkpoint with SnapshotFailed, and is not run again.
func TestAFailedSnapshotJobStalls(t *testing.T) {
	e := newEnv(t)
	dir, _ := recordAnchoredSession(t, "run-4")
	push(t, e.storeKey(), dir)
	e.startManager(nil)
	e.startCheckpointManager()
	e.create(anchoredSession("run-4"))
	e.verifySession("run-4")

	job := e.waitJob("run-4-step-5", "checkpoint")
	e.finishJob(job, false, "")
	ck := e.waitCheckpoint("run-4-step-5", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonSnapshotFailed)
	if d := cmp.Diff(stalledConds(v1alpha1.ReasonSnapshotFailed), ck.Status.Conditions, condOpts); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	if c := meta.FindStatusCondition(ck.Status.Conditions, v1alpha1.ConditionStalled); !strings.Contains(c.Message, job.Name) || !strings.Contains(c.Message, "backoff limit") {
		t.Errorf("Stalled message %q should name the Job and what Kubernetes said", c.Message)
	}
	if !cmp.Equal(v1alpha1.WorkspaceSnapshot{}, ck.Status.Snapshot) {
		t.Errorf("a failed capture left snapshot %+v", ck.Status.Snapshot)
	}
	e.eventually("a SnapshotFailed event", func() (bool, string) {
		got := e.eventReasons("run-4-step-5")
		return slices.Contains(got, v1alpha1.ReasonSnapshotFailed), fmt.Sprint(got)
	})
	time.Sleep(time.Second)
	if n := len(e.jobsOf("run-4-step-5", "checkpoint")); n != 1 {
		t.Errorf("%d snapshot Jobs after a permanent failure, want 1", n)
	}
}
