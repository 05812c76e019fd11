package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// forkFrom is a Fork ForkRun of session that starts from Checkpoint checkpoint.
func forkFrom(name, session, checkpoint string) *v1alpha1.ForkRun {
	fr := newFork(name, session, 0)
	fr.Spec.Fork.AtStep, fr.Spec.Fork.CheckpointRef = nil, v1alpha1.LocalObjectReference{Name: checkpoint}
	return fr
}

// runRestoreContainer plays the kubelet for a ForkRun pod's restore init container: the real engine
// binary with the container's args and resolved environment, its /workspace mount at dir. It fails the
// test when the restore exits non-zero, and returns its output.
func (e *env) runRestoreContainer(job *batchv1.Job, dir string) string {
	e.t.Helper()
	pod := job.Spec.Template.Spec
	i := slices.IndexFunc(pod.InitContainers, func(c corev1.Container) bool { return c.Name == RestoreContainer })
	if i < 0 {
		e.t.Fatalf("Job %s has no %s init container", job.Name, RestoreContainer)
	}
	c := pod.InitContainers[i]
	args := slices.Clone(c.Args)
	if w := slices.Index(args, workspaceMount); w < 0 {
		e.t.Fatalf("restore args %v do not name %s", args, workspaceMount)
	} else {
		args[w] = dir
	}
	cmd := exec.Command(engineBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.t.TempDir()}, e.resolveEnv(job, c.Env)...)
	cmd.Env = append(cmd.Env, "TMPDIR="+e.t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("the restore container failed: %v\n%s", err, out)
	}
	return string(out)
}

// filesIn reads every regular file under dir, by slash path.
func filesIn(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventNotes lists the notes of the events about name with reason.
func (e *env) eventNotes(name, reason string) []string {
	e.t.Helper()
	var list eventsv1.EventList
	if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns)); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == name && ev.Reason == reason {
			out = append(out, ev.Note)
		}
	}
	return out
}

func stalledMessage(fr *v1alpha1.ForkRun) string {
	if c := meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionStalled); c != nil {
		return c.Message
	}
	return ""
}

// TestAForkFromACheckpointRestoresItsWorkspaceFirst is the path end to end on the real Checkpoint
// controller and the real store: a ForkRun from the Checkpoint the recorder's parked anchor minted
// waits while the Checkpoint is not Ready; once the checkpoint Job captured a workspace into versitygw,
// the fork's Job goes live at the Checkpoint's step and restores that snapshot in an init container
// ordered before the proxy sidecar. Played as the kubelet would (the real engine binary), the restore
// brings back exactly the checkpoint's files: into an emptyDir for an agent without a workspace, and
// into the agent's claim behind a guard checkpoint of what it overwrote, leaving later files in place.
// The child session records the step, and the outcome says which Checkpoint the files came from.
func TestAForkFromACheckpointRestoresItsWorkspaceFirst(t *testing.T) {
	e := newEnv(t)
	dir, anchors := recordAnchoredSession(t, "ck-run")
	push(t, e.storeKey(), dir)
	e.forkSecrets()
	e.startForkManager(nil)
	e.startCheckpointManager()
	e.create(anchoredSession("ck-run"))
	e.verifySession("ck-run")
	const parked = "ck-run-step-5" // the anchor the run is parked at: the one with a snapshot

	intoClaim := forkFrom("into-claim", "ck-run", parked)
	intoClaim.Spec.Agent.Workspace = v1alpha1.WorkspaceVolume{ClaimName: "fork-ws", SubPath: "repo"}
	e.create(intoClaim)
	e.create(forkFrom("into-empty", "ck-run", parked))

	// The Checkpoint's snapshot Job has not run: the forks wait for it, and start nothing.
	snapshot := e.waitJob(parked, "checkpoint")
	for _, name := range []string{"into-claim", "into-empty"} {
		got := e.waitForkRun(name, v1alpha1.ConditionReconciling, metav1.ConditionTrue, ReasonWaitingForCheckpoint)
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReconciling); !strings.Contains(c.Message, parked) {
			t.Errorf("%s: Reconciling %q should name the Checkpoint", name, c.Message)
		}
	}
	time.Sleep(time.Second)
	if n := len(e.jobsOf("into-claim", "fork")) + len(e.jobsOf("into-empty", "fork")); n != 0 {
		t.Fatalf("%d fork Jobs before the Checkpoint was Ready", n)
	}

	want := map[string]string{"main.go": "package main\n", "docs/README.md": strings.Repeat("read me ", 50), "a/b/c.txt": "deep\n"}
	if out := e.runSnapshotJob(snapshot, writeWorkspace(t, want)); !strings.Contains(out, `"outcome":"Succeeded"`) {
		t.Fatalf("engine checkpoint:\n%s", out)
	}
	ck := e.waitCheckpoint(parked, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSnapshotStored)
	manifest := ck.Status.Snapshot.ManifestDigest

	// The Job of the fork into a claim: restore, then the proxy going live at the Checkpoint's step.
	job := e.waitJob("into-claim", "fork")
	pod := job.Spec.Template.Spec
	names := func(cs []corev1.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	if d := cmp.Diff([]string{RestoreContainer, ProxyContainer}, names(pod.InitContainers)); d != "" {
		t.Errorf("init containers, in order (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{AgentContainer}, names(pod.Containers)); d != "" {
		t.Errorf("containers (-want +got):\n%s", d)
	}
	restricted := &corev1.SecurityContext{RunAsNonRoot: new(true), ReadOnlyRootFilesystem: new(true), AllowPrivilegeEscalation: new(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	wantRestore := corev1.Container{
		Name:  RestoreContainer,
		Image: "registry.example/agentrewind:test",
		Args: []string{"checkpoint", "restore", "/workspace", manifest, "--store", "s3://" + testBucket + "/" + e.storeKey(), "--session", "ck-run",
			"--endpoint", "http://" + s3.Endpoint, "--guard", "require"},
		Env: []corev1.EnvVar{{Name: jobs.EnvTmpDir, Value: jobs.TmpDir},
			jobs.SecretEnv("AWS_ACCESS_KEY_ID", jobSecret, "accessKeyID", false), jobs.SecretEnv("AWS_SECRET_ACCESS_KEY", jobSecret, "secretAccessKey", false)},
		VolumeMounts:             []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "workspace", MountPath: "/workspace", SubPath: "repo"}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		SecurityContext:          restricted,
	}
	if d := cmp.Diff(wantRestore, pod.InitContainers[0]); d != "" {
		t.Errorf("restore container (-want +got):\n%s", d)
	}
	proxyArgs := pod.InitContainers[1].Args
	if i := slices.Index(proxyArgs, "--at-step"); i < 0 || proxyArgs[i+1] != fmt.Sprint(anchors[1].step) {
		t.Errorf("proxy args %v: want --at-step %d, the Checkpoint's step", proxyArgs, anchors[1].step)
	}
	if d := cmp.Diff(&corev1.PersistentVolumeClaimVolumeSource{ClaimName: "fork-ws"}, volumeNamed(t, pod.Volumes, "workspace").PersistentVolumeClaim); d != "" {
		t.Errorf("workspace volume (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]corev1.VolumeMount{{Name: "agent-tmp", MountPath: "/tmp"}, {Name: "workspace", MountPath: "/workspace", SubPath: "repo"}}, pod.Containers[0].VolumeMounts); d != "" {
		t.Errorf("agent mounts (-want +got):\n%s", d)
	}

	// The kubelet runs the restore into the claim, which holds a stale main.go and a later file.
	claim := writeWorkspace(t, map[string]string{"main.go": "package stale\n", "scratch.txt": "written after the checkpoint\n"})
	e.runRestoreContainer(job, claim)
	wantClaim := map[string]string{"scratch.txt": "written after the checkpoint\n"}
	for k, v := range want {
		wantClaim[k] = v
	}
	if d := cmp.Diff(wantClaim, filesIn(t, claim)); d != "" {
		t.Errorf("the claim after the restore: the checkpoint's files, the later file left in place (-want +got):\n%s", d)
	}
	stored, _, err := openStore(t, e.storeKey()).Checkpoints().Scan(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var guards []int
	for _, s := range stored {
		if s.Guard {
			guards = append(guards, s.Files)
		}
	}
	if d := cmp.Diff([]int{2}, guards); d != "" {
		t.Errorf("guard checkpoints by files: the claim's two files before the restore (-want +got):\n%s", d)
	}
	e.eventually("the RestoringWorkspace event", func() (bool, string) {
		notes := e.eventNotes("into-claim", ReasonRestoringWorkspace)
		return len(notes) == 1 && strings.Contains(notes[0], parked) && strings.Contains(notes[0], "claim fork-ws"), fmt.Sprint(notes)
	})

	// The fork into an emptyDir: nothing to guard, and exactly the checkpoint's files.
	empty := e.waitJob("into-empty", "fork")
	epod := empty.Spec.Template.Spec
	if d := cmp.Diff(&corev1.EmptyDirVolumeSource{}, volumeNamed(t, epod.Volumes, "workspace").EmptyDir); d != "" {
		t.Errorf("workspace volume of an agent without one (-want +got):\n%s", d)
	}
	if args := epod.InitContainers[0].Args; !slices.Equal(args[len(args)-2:], []string{"--guard", "off"}) {
		t.Errorf("restore args into an emptyDir %v: want --guard off", args)
	}
	restored := t.TempDir()
	e.runRestoreContainer(empty, restored)
	if d := cmp.Diff(want, filesIn(t, restored)); d != "" {
		t.Errorf("the emptyDir after the restore (-want +got):\n%s", d)
	}

	// The proxy committed the fork: the child forked at the Checkpoint's step, the outcome names it.
	child := childSessionName(intoClaim)
	e.writeResult(job, &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ParentSessionID: "ck-run", ChildSessionID: child,
		AtStep: anchors[1].step, Provenance: task.Provenance{Recorded: 1, Live: 1}}})
	e.finishJob(job, true, "")
	done := e.waitForkRun("into-claim", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonCompleted)
	if c := meta.FindStatusCondition(done.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "the workspace was restored from Checkpoint "+parked) {
		t.Errorf("Ready %q should say which Checkpoint the workspace came from", c.Message)
	}
	if got := e.session(child).Spec.ForkedAtStep; got == nil || *got != anchors[1].step {
		t.Errorf("child forkedAtStep %v, want %d", got, anchors[1].step)
	}
}

// TestForksFromCheckpointsThatCannotRestore: a ForkRun waits for a Checkpoint that does not exist;
// one from another session's Checkpoint stalls (InvalidSpec); one from an anchor-only Checkpoint stalls
// when its agent works in a claim (nothing could bring the files back) and, when the agent has no
// workspace, forks the conversation at the anchor's step with no restore container.
func TestForksFromCheckpointsThatCannotRestore(t *testing.T) {
	e := newEnv(t)
	dir, anchors := recordAnchoredSession(t, "ck-bad")
	push(t, e.storeKey(), dir)
	e.forkSecrets()
	e.startForkManager(nil)
	e.startCheckpointManager()
	e.create(anchoredSession("ck-bad"))
	e.create(newSession("other", "other")) // never verified: the Checkpoint is refused before that matters
	e.verifySession("ck-bad")
	const anchorOnly = "ck-bad-step-2"
	e.waitCheckpoint(anchorOnly, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAnchorOnly)

	e.create(forkFrom("missing", "ck-bad", "no-such-checkpoint"))
	e.create(forkFrom("wrong-session", "other", anchorOnly))
	claimed := forkFrom("anchor-claim", "ck-bad", anchorOnly)
	claimed.Spec.Agent.Workspace = v1alpha1.WorkspaceVolume{ClaimName: "fork-ws"}
	e.create(claimed)
	e.create(forkFrom("anchor-only", "ck-bad", anchorOnly))

	got := e.waitForkRun("missing", v1alpha1.ConditionReconciling, metav1.ConditionTrue, ReasonWaitingForCheckpoint)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReconciling); !strings.Contains(c.Message, "Checkpoint no-such-checkpoint does not exist") {
		t.Errorf("Reconciling %q", c.Message)
	}
	got = e.waitForkRun("wrong-session", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
	if m := stalledMessage(got); !strings.Contains(m, "is an anchor of AgentSession ck-bad, not of other") {
		t.Errorf("Stalled %q should name both sessions", m)
	}
	got = e.waitForkRun("anchor-claim", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
	if m := stalledMessage(got); !strings.Contains(m, "holds no workspace snapshot") || !strings.Contains(m, fmt.Sprintf("spec.fork.atStep: %d", anchors[0].step)) {
		t.Errorf("Stalled %q should say there is no snapshot and how to fork the conversation only", m)
	}

	job := e.waitJob("anchor-only", "fork")
	pod := job.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != ProxyContainer || slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == workspaceVolume }) {
		t.Errorf("an anchor-only fork without a workspace: init containers %v, volumes %v; want the proxy only and no workspace", pod.InitContainers, pod.Volumes)
	}
	if i := slices.Index(pod.InitContainers[0].Args, "--at-step"); i < 0 || pod.InitContainers[0].Args[i+1] != fmt.Sprint(anchors[0].step) {
		t.Errorf("proxy args %v: want --at-step %d", pod.InitContainers[0].Args, anchors[0].step)
	}
	e.eventually("the event saying nothing is restored", func() (bool, string) {
		notes := e.eventNotes("anchor-only", ReasonRestoringWorkspace)
		return len(notes) == 1 && strings.Contains(notes[0], "no files are restored"), fmt.Sprint(notes)
	})
	time.Sleep(time.Second)
	for _, name := range []string{"missing", "wrong-session", "anchor-claim"} {
		if n := len(e.jobsOf(name, "fork")); n != 0 {
			t.Errorf("%s: %d Jobs", name, n)
		}
	}
}

// TestDecideCheckpointStart is the decision alone: wait, refuse, or start at the Checkpoint's step with
// or without a snapshot to restore.
func TestDecideCheckpointStart(t *testing.T) {
	ready := func(manifest string) *v1alpha1.Checkpoint {
		ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: "ck", Generation: 1},
			Spec: v1alpha1.CheckpointSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "s"}, Step: new(int64(7))}}
		ck.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSnapshotStored, ObservedGeneration: 1}}
		ck.Status.Snapshot.ManifestDigest = manifest
		return ck
	}
	digest := strings.Repeat("ab", 32)
	claim := v1alpha1.AgentSpec{Image: agentImage, Workspace: v1alpha1.WorkspaceVolume{ClaimName: "w"}}
	bare := v1alpha1.AgentSpec{Image: agentImage}
	fr := forkFrom("f", "s", "ck")
	cases := []struct {
		name  string
		ck    *v1alpha1.Checkpoint
		agent v1alpha1.AgentSpec
		start forkStart
		wait  string
		spec  string
	}{
		{name: "missing", agent: claim, wait: "Checkpoint ck does not exist"},
		{name: "not ready", ck: func() *v1alpha1.Checkpoint {
			ck := ready(digest)
			ck.Status.Conditions[0].Status, ck.Status.Conditions[0].Reason, ck.Status.Conditions[0].Message = metav1.ConditionFalse, "JobRunning", "capturing"
			return ck
		}(), agent: claim, wait: "waiting for Checkpoint ck to be Ready (now JobRunning: capturing)"},
		{name: "ready for an older generation", ck: func() *v1alpha1.Checkpoint { ck := ready(digest); ck.Generation = 2; return ck }(), agent: claim,
			wait: "waiting for Checkpoint ck to be Ready (now SnapshotStored)"},
		{name: "another session", ck: func() *v1alpha1.Checkpoint { ck := ready(digest); ck.Spec.SessionRef.Name = "t"; return ck }(), agent: claim,
			spec: "Checkpoint ck is an anchor of AgentSession t, not of s"},
		{name: "anchor only, agent with a claim", ck: ready(""), agent: claim, spec: "set spec.fork.atStep: 7 instead"},
		{name: "anchor only, agent without a workspace", ck: ready(""), agent: bare, start: forkStart{step: 7, checkpoint: "ck"}},
		{name: "snapshot into a claim", ck: ready(digest), agent: claim, start: forkStart{step: 7, checkpoint: "ck", manifest: digest}},
		{name: "snapshot into an emptyDir", ck: ready(digest), agent: bare, start: forkStart{step: 7, checkpoint: "ck", manifest: digest}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start, wait, err := decideCheckpointStart(fr, tc.ck, tc.agent)
			var se *specError
			switch {
			case tc.spec != "":
				if !errors.As(err, &se) || !strings.Contains(se.msg, tc.spec) {
					t.Fatalf("error %v, want a spec error saying %q", err, tc.spec)
				}
			case err != nil:
				t.Fatalf("error %v", err)
			}
			if wait != tc.wait {
				t.Errorf("wait %q, want %q", wait, tc.wait)
			}
			if d := cmp.Diff(tc.start, start, cmp.AllowUnexported(forkStart{})); d != "" {
				t.Errorf("start (-want +got):\n%s", d)
			}
		})
	}
}
