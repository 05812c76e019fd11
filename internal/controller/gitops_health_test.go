package controller

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/config/argocd"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/coherence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

var updateFixtures = flag.Bool("update", false, "write the objects TestGitOpsHealth produces to config/argocd/resource_customizations/*/*/testdata")

// healthCase is one state a user meets, as the API server returned it after the real reconcilers
// wrote it: what the Argo CD check in config/argocd must say of it, and what kstatus (Flux, and Argo
// CD for kinds without a check) computes.
type healthCase struct {
	fixture string
	obj     map[string]any
	want    string
	kstatus status.Status
}

// healthRecorder checks each state as it is reached and keeps it as a fixture.
type healthRecorder struct {
	e     *env
	kind  string
	cases []healthCase
}

func (e *env) healthOf(kind string) *healthRecorder { return &healthRecorder{e: e, kind: kind} }

// check reads object name back from the API server and asserts the Lua check's status and kstatus.
func (h *healthRecorder) check(name, fixture, want string, wantKstatus status.Status) {
	e := h.e
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(h.kind))
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, u); err != nil {
		e.t.Fatal(err)
	}
	script, err := argocd.Script(h.kind)
	if err != nil {
		e.t.Fatal(err)
	}
	got, err := argocd.Evaluate(script, u.Object)
	if err != nil {
		e.t.Fatalf("%s %s: the Argo CD check failed: %v", h.kind, name, err)
	}
	if got.Status != want {
		e.t.Errorf("%s %s (%s): Argo CD health %s (%q), want %s; status:\n%s", h.kind, name, fixture, got.Status, got.Message, want, statusYAML(u))
	}
	res, err := status.Compute(u)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.Status != wantKstatus {
		e.t.Errorf("%s %s (%s): kstatus %s (%q), want %s; status:\n%s", h.kind, name, fixture, res.Status, res.Message, wantKstatus, statusYAML(u))
	}
	h.cases = append(h.cases, healthCase{fixture: fixture, obj: u.Object, want: want, kstatus: wantKstatus})
}

func statusYAML(u *unstructured.Unstructured) string {
	b, _ := yaml.Marshal(u.Object["status"])
	return string(b)
}

// save writes the fixtures and health_test.yaml of the kind when the test runs with -update and passed.
func (h *healthRecorder) save() {
	e := h.e
	e.t.Helper()
	if !*updateFixtures || e.t.Failed() {
		return
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		e.t.Fatal(err)
	}
	dir := filepath.Join(root, "config", "argocd", argocd.Dir(h.kind))
	if err := os.RemoveAll(filepath.Join(dir, "testdata")); err != nil {
		e.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "testdata"), 0o755); err != nil {
		e.t.Fatal(err)
	}
	script, err := argocd.Script(h.kind)
	if err != nil {
		e.t.Fatal(err)
	}
	var tests argocd.HealthTests
	for _, c := range h.cases {
		path := "testdata/" + c.fixture + ".yaml"
		fixture := fixtureOf(c.obj, e.ns)
		health, err := argocd.Evaluate(script, fixture)
		if err != nil || health.Status != c.want {
			e.t.Fatalf("%s: the check says %+v (%v) of the fixture, %s of the object", path, health, err, c.want)
		}
		b, err := yaml.Marshal(fixture)
		if err != nil {
			e.t.Fatal(err)
		}
		header := fmt.Sprintf("# Written by the %s controller on envtest (internal/controller TestGitOpsHealth -update); kstatus: %s.\n", h.kind, c.kstatus)
		if err := os.WriteFile(filepath.Join(dir, path), append([]byte(header), b...), 0o644); err != nil {
			e.t.Fatal(err)
		}
		tests.Tests = append(tests.Tests, argocd.HealthTest{HealthStatus: health, InputPath: path})
	}
	b, err := yaml.Marshal(tests)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "health_test.yaml"), b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// fixtureOf is the object as Argo CD sees it, less what only says which run of the test wrote it: the
// generated namespace becomes team-a, and the managed fields, UIDs and resource version go.
func fixtureOf(obj map[string]any, ns string) map[string]any {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	b = bytes.ReplaceAll(b, []byte(ns), []byte("team-a"))
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	m := out["metadata"].(map[string]any)
	for _, f := range []string{"managedFields", "uid", "resourceVersion"} {
		delete(m, f)
	}
	if refs, ok := m["ownerReferences"].([]any); ok {
		for _, r := range refs {
			delete(r.(map[string]any), "uid")
		}
	}
	return out
}

// TestGitOpsHealth runs the real reconcilers on envtest into each state a user meets for each kind,
// and checks what Argo CD (the Lua checks in config/argocd, run as Argo CD runs them) and kstatus
// (Flux) say of the objects the API server returns. With -update it keeps them as the fixtures
// config/argocd's own test runs the checks on.
func TestGitOpsHealth(t *testing.T) {
	t.Run("AgentSession", testSessionHealth)
	t.Run("ForkRun", testForkRunHealth)
	t.Run("ResumePlan", testResumePlanHealth)
	t.Run("Checkpoint", testCheckpointHealth)
}

func testSessionHealth(t *testing.T) {
	e := newEnv(t)
	h := e.healthOf("AgentSession")
	defer h.save()
	push(t, e.storeKey(), recordSession(t, "run-1", strings.Repeat("result ", 40), false))
	push(t, e.storeKey(), recordSession(t, "run-bad", strings.Repeat("corrupt me ", 40), false))
	tamperBlob(e, strings.Repeat("corrupt me ", 40))
	stop := e.startManager(nil)

	e.create(newSession("run-1", "run-1"))
	job := e.waitJob("run-1", "verify")
	e.waitSession("run-1", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	h.check("run-1", "progressing_verifying", "Progressing", status.InProgressStatus)

	e.runJob(job)
	e.waitSession("run-1", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	e.runJob(e.waitJob("run-1", "resume-plan"))
	e.eventually("the session to mirror its plan's verdict", func() (bool, string) {
		s := e.session("run-1")
		return s.Status.ResumeVerdict == v1alpha1.VerdictUnresumable, string(s.Status.ResumeVerdict)
	})
	h.check("run-1", "healthy_verified", "Healthy", status.CurrentStatus)

	e.create(newSession("run-bad", "run-bad"))
	e.runJob(e.waitJob("run-bad", "verify"))
	e.waitSession("run-bad", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDigestMismatch)
	h.check("run-bad", "degraded_digest_mismatch", "Degraded", status.FailedStatus)

	// A commit changes the spec while the operator is down: the status describes the last generation.
	stop()
	e.editSession("run-1", func(s *v1alpha1.AgentSession) {
		s.Spec.Retention = v1alpha1.RetentionSpec{Policy: v1alpha1.RetentionRetain}
	})
	h.check("run-1", "progressing_spec_not_observed", "Progressing", status.InProgressStatus)
}

// tamperBlob overwrites the blob of a session recordSession wrote with toolResult, so its
// verification finds a digest mismatch.
func tamperBlob(e *env, toolResult string) {
	e.t.Helper()
	c, err := s3.Client()
	if err != nil {
		e.t.Fatal(err)
	}
	key := e.storeKey("blobs", "sha256", blobOf(e.t, toolResult))
	if !slices.Contains(keys(e.t, e.storeKey("blobs")+"/"), key) {
		e.t.Fatalf("no blob %s in %v", key, keys(e.t, e.storeKey("blobs")+"/"))
	}
	if _, err := c.PutObject(e.ctx, testBucket, key, strings.NewReader("tampered"), 8, minio.PutObjectOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func testForkRunHealth(t *testing.T) {
	e := newEnv(t)
	h := e.healthOf("ForkRun")
	defer h.save()
	e.recordThroughProxy("golden", hiThere, "hello")
	e.forkSecrets()

	// Applied from Git before the operator runs: nothing has written status yet.
	suite := func(name string) *v1alpha1.ForkRun {
		fr := newReplay(name, "golden")
		fr.Labels = map[string]string{suiteLabel: "nightly"}
		return fr
	}
	e.create(suite("nightly-pass"))
	h.check("nightly-pass", "progressing_no_status", "Progressing", status.CurrentStatus)

	stop := e.startForkManager(nil)
	e.waitForkRun("nightly-pass", v1alpha1.ConditionReconciling, metav1.ConditionTrue, conditions.ReasonWaitingForSession)
	h.check("nightly-pass", "progressing_waiting_for_session", "Progressing", status.InProgressStatus)

	e.readySession("golden")
	job := e.waitJob("nightly-pass", "replay")
	e.waitForkRun("nightly-pass", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	h.check("nightly-pass", "progressing_replay_running", "Progressing", status.InProgressStatus)

	if code, out := e.runForkPod(job, askAgent("hello")); code != 0 {
		t.Fatalf("the agent failed against the replaying proxy:\n%s", out)
	}
	e.waitForkRun("nightly-pass", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	h.check("nightly-pass", "healthy_replay_passed", "Healthy", status.CurrentStatus)

	// The agent changed what it asks: the regression test fails and the app turns red.
	e.create(suite("nightly-drift"))
	if code, _ := e.runForkPod(e.waitJob("nightly-drift", "replay"), askAgent("something else")); code == 0 {
		t.Fatal("the agent was answered a question the recording does not hold")
	}
	e.waitForkRun("nightly-drift", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDiverged)
	h.check("nightly-drift", "degraded_replay_diverged", "Degraded", status.FailedStatus)

	fork := newFork("prompt-fix", "golden", 1)
	fork.Spec.Goal = v1alpha1.Goal{Tool: "submit", ArgsMatch: &apiextensionsv1.JSON{Raw: []byte(`{"ok":true}`)}}
	e.create(fork)
	job = e.waitJob("prompt-fix", "fork")
	e.writeResult(job, &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ParentSessionID: "golden",
		ChildSessionID: childSessionName(fork), AtStep: 1, ReachedGoal: new(true), TokensSpent: task.Usage{InputTokens: 100, OutputTokens: 52},
		Provenance: task.Provenance{Recorded: 1, Live: 2}}})
	e.finishJob(job, true, "")
	e.waitForkRun("prompt-fix", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonGoalReached)
	h.check("prompt-fix", "healthy_fork_goal_reached", "Healthy", status.CurrentStatus)

	miss := newFork("prompt-miss", "golden", 1)
	miss.Spec.Goal = v1alpha1.Goal{Tool: "submit"}
	e.create(miss)
	job = e.waitJob("prompt-miss", "fork")
	e.writeResult(job, &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ParentSessionID: "golden",
		ChildSessionID: childSessionName(miss), AtStep: 1, ReachedGoal: new(false), TokensSpent: task.Usage{InputTokens: 10, OutputTokens: 5}}})
	e.finishJob(job, true, "")
	e.waitForkRun("prompt-miss", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonGoalMissed)
	h.check("prompt-miss", "degraded_fork_goal_missed", "Degraded", status.FailedStatus)

	e.create(suite("nightly-crash"))
	e.finishJob(e.waitJob("nightly-crash", "replay"), false, "") // the pod died: no result
	e.waitForkRun("nightly-crash", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonJobFailed)
	h.check("nightly-crash", "degraded_job_failed", "Degraded", status.FailedStatus)

	// A commit bumps the agent image of the diverged replay while the operator is down, then the
	// operator runs the new generation.
	stop()
	editObject(e, &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: "nightly-drift"}}, func(fr *v1alpha1.ForkRun) { fr.Spec.Agent.Image = agentImage + "-1.1" })
	h.check("nightly-drift", "progressing_spec_not_observed", "Progressing", status.InProgressStatus)
	e.startForkManager(nil)
	rerun := e.waitForkRun("nightly-drift", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	if rerun.Status.ObservedGeneration != 2 {
		t.Fatalf("observedGeneration %d while generation 2 runs", rerun.Status.ObservedGeneration)
	}
	h.check("nightly-drift", "progressing_new_generation_running", "Progressing", status.InProgressStatus)
}

// planFacts are the facts of a run that declared steps s1 and s2 and verified s1 on its own commit
// (and s2 too when complete); moved says work it did not record landed on its lane since.
func planFacts(complete, moved bool) verdict.Facts {
	const start, a, b, head = "1111111111111111111111111111111111111111", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "cccccccccccccccccccccccccccccccccccccccc"
	led := func(r ledger.Record) session.Event {
		return session.Event{Kind: session.KindLedger, Author: session.AuthorAgent, Ledger: r.JSON()}
	}
	events := []session.Event{
		led(ledger.Intent("run-1", "fix the flaky test", start, ledger.Step{ID: "s1", Text: "write lib/a.go"}, ledger.Step{ID: "s2", Text: "write lib/b.go"})),
		led(ledger.Verified("s1", a, resume.ViaFilePath)),
	}
	read := map[string]string{"s1": a}
	if complete {
		events = append(events, led(ledger.Verified("s2", b, resume.ViaFilePath)))
		read["s2"] = b
	}
	return verdict.Facts{Ledger: ledger.Fold(events),
		Ancestry: resume.AncestryFacts{SHAsInAncestry: []string{start, a, b, head}, VerifiedAtRead: read, HeadSHA: head, LaneAdvancedPastResume: moved},
		Rounds:   []coherence.Round{}}
}

// judge finishes a plan's Job with the verdicts the engine's pure verdict.Evaluate computes over facts,
// written as the Job writes its result: the verdicts are the engine's, the facts made up (a git history
// would be needed to gather them).
func (e *env) judge(plan string, facts verdict.Facts, eventsHash string) {
	e.t.Helper()
	rep, err := task.NewReport(verdict.Evaluate(facts, verdict.DefaultPolicy()))
	if err != nil {
		e.t.Fatal(err)
	}
	job := e.waitJob(plan, "resume-plan")
	e.writeResult(job, &task.Result{Task: task.ResumePlan, Outcome: task.Succeeded, ResumePlan: &task.ResumePlanResult{SessionID: "run-1",
		Evidence: task.Evidence{EventsHash: eventsHash, Workspace: true, ResolvedCommit: facts.Ancestry.HeadSHA, PlanPresent: true}, Report: rep}})
	e.finishJob(job, true, "")
	e.waitPlan(plan, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerdictComputed)
}

func (e *env) waitPlan(name, typ string, st metav1.ConditionStatus, reason string) *v1alpha1.ResumePlan {
	e.t.Helper()
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	e.waitCondition(rp, func() []metav1.Condition { return rp.Status.Conditions }, typ, st, reason)
	return rp
}

func testResumePlanHealth(t *testing.T) {
	e := newEnv(t)
	h := e.healthOf("ResumePlan")
	defer h.save()
	push(t, e.storeKey(), recordSession(t, "run-1", strings.Repeat("result ", 40), false))
	stop := e.startManager(nil)
	byHand := func(name string) {
		e.create(&v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run-1"}}})
	}

	byHand("run-1-diverged")
	e.waitPlan("run-1-diverged", v1alpha1.ConditionReconciling, metav1.ConditionTrue, conditions.ReasonWaitingForSession)
	h.check("run-1-diverged", "progressing_waiting_for_session", "Progressing", status.InProgressStatus)

	e.create(newSession("run-1", "run-1"))
	e.runJob(e.waitJob("run-1", "verify"))
	s := e.waitSession("run-1", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	e.waitPlan("run-1", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	h.check("run-1", "progressing_job_running", "Progressing", status.InProgressStatus)

	// The session's own plan, judged by the real engine: no ledger, so nothing to resume.
	e.runJob(e.waitJob("run-1", "resume-plan"))
	if rp := e.waitPlan("run-1", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerdictComputed); rp.Status.Verdict != v1alpha1.VerdictUnresumable {
		t.Fatalf("verdict %s, want Unresumable", rp.Status.Verdict)
	}
	h.check("run-1", "healthy_unresumable", "Healthy", status.CurrentStatus)

	hash := s.Status.Recording.EventsHash
	for _, p := range []struct {
		name, fixture, want string
		complete, moved     bool
		verdict             v1alpha1.ResumeVerdict
	}{
		{"run-1-diverged", "degraded_diverged", "Degraded", false, true, v1alpha1.VerdictDiverged},
		{"run-1-resumable", "suspended_resumable", "Suspended", false, false, v1alpha1.VerdictResumable},
		{"run-1-complete", "healthy_complete", "Healthy", true, true, v1alpha1.VerdictComplete},
	} {
		if p.name != "run-1-diverged" {
			byHand(p.name)
		}
		e.judge(p.name, planFacts(p.complete, p.moved), hash)
		var rp v1alpha1.ResumePlan
		if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: p.name}, &rp); err != nil {
			t.Fatal(err)
		}
		if rp.Status.Verdict != p.verdict {
			t.Fatalf("%s: verdict %s, want %s", p.name, rp.Status.Verdict, p.verdict)
		}
		// A verdict is what the plan reports, not a failure to reconcile it: kstatus reads it as Current.
		h.check(p.name, p.fixture, p.want, status.CurrentStatus)
	}

	byHand("run-1-crashed")
	e.finishJob(e.waitJob("run-1-crashed", "resume-plan"), false, "")
	e.waitPlan("run-1-crashed", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonJobFailed)
	h.check("run-1-crashed", "degraded_job_failed", "Degraded", status.FailedStatus)

	stop()
	editObject(e, &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "run-1-resumable"}}, func(rp *v1alpha1.ResumePlan) {
		rp.Spec.Git = v1alpha1.GitEvidence{URL: "https://git.example.com/team-a/service.git", Ref: "main"}
	})
	h.check("run-1-resumable", "progressing_spec_not_observed", "Progressing", status.InProgressStatus)
}

func testCheckpointHealth(t *testing.T) {
	e := newEnv(t)
	h := e.healthOf("Checkpoint")
	defer h.save()
	for _, id := range []string{"run-1", "run-2"} {
		dir, _ := recordAnchoredSession(t, id)
		push(t, e.storeKey(), dir)
	}
	e.startManager(nil)
	e.startCheckpointManager()
	e.create(anchoredSession("run-1"))
	e.verifySession("run-1")

	e.waitCheckpoint("run-1-step-2", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAnchorOnly)
	h.check("run-1-step-2", "healthy_anchor_only", "Healthy", status.CurrentStatus)

	job := e.waitJob("run-1-step-5", "checkpoint")
	e.waitCheckpoint("run-1-step-5", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	h.check("run-1-step-5", "progressing_snapshot_running", "Progressing", status.InProgressStatus)

	ws := writeWorkspace(t, map[string]string{"main.go": "package main\n"})
	if out := e.runSnapshotJob(job, ws); !strings.Contains(out, `"outcome":"Succeeded"`) {
		t.Fatalf("engine checkpoint:\n%s", out)
	}
	e.waitCheckpoint("run-1-step-5", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSnapshotStored)
	h.check("run-1-step-5", "healthy_snapshot_stored", "Healthy", status.CurrentStatus)

	e.create(anchoredSession("run-2"))
	e.verifySession("run-2")
	e.finishJob(e.waitJob("run-2-step-5", "checkpoint"), false, "") // the pod died: no result
	e.waitCheckpoint("run-2-step-5", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonSnapshotFailed)
	h.check("run-2-step-5", "degraded_snapshot_failed", "Degraded", status.FailedStatus)

	// A new generation of the session: its Checkpoints wait for it to be verified again.
	e.editSession("run-1", func(s *v1alpha1.AgentSession) {
		s.Spec.Retention = v1alpha1.RetentionSpec{Policy: v1alpha1.RetentionRetain}
	})
	e.waitCheckpoint("run-1-step-2", v1alpha1.ConditionReconciling, metav1.ConditionTrue, conditions.ReasonWaitingForSession)
	h.check("run-1-step-2", "progressing_waiting_for_session", "Progressing", status.InProgressStatus)
}

// TestTheGitOpsGuidesManifestsAreValid creates every agentrewind.io object and every core object in
// the yaml blocks of docs/gitops.md with a server-side dry run on the API server with the real CRDs, so
// the guide cannot show a field the CRDs refuse or do not know (strict field validation). Objects of other tools (Argo CD, Flux, kustomize)
// are counted, not created: their CRDs are not installed here.
func TestTheGitOpsGuidesManifestsAreValid(t *testing.T) {
	e := newEnv(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile(filepath.Join(root, "docs", "gitops.md"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for i, doc := range yamlDocs(t, string(guide)) {
		var u unstructured.Unstructured
		if err := yaml.UnmarshalStrict([]byte(doc), &u.Object); err != nil {
			t.Errorf("yaml document %d of the guide: %v\n%s", i, err, doc)
			continue
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			continue // values for Helm, not an object
		}
		kinds[u.GetAPIVersion()+"/"+u.GetKind()]++
		group := u.GroupVersionKind().Group
		if group != v1alpha1.GroupVersion.Group && group != "" {
			continue
		}
		if u.GetKind() == "Namespace" {
			continue
		}
		u.SetNamespace(e.ns)
		if err := e.c.Create(e.ctx, &u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
			t.Errorf("%s %s in docs/gitops.md: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, k := range []string{"AgentSession", "ForkRun", "ResumePlan"} {
		if kinds[v1alpha1.GroupVersion.String()+"/"+k] == 0 {
			t.Errorf("the guide shows no %s; kinds shown: %v", k, kinds)
		}
	}
	for _, k := range []string{"argoproj.io/v1alpha1/Application", "kustomize.toolkit.fluxcd.io/v1/Kustomization"} {
		if kinds[k] == 0 {
			t.Errorf("the guide shows no %s; kinds shown: %v", k, kinds)
		}
	}
}

// yamlDocs are the YAML documents of the guide's ```yaml blocks.
func yamlDocs(t *testing.T, md string) []string {
	t.Helper()
	var docs []string
	var cur []string
	in := false
	flush := func() {
		if doc := strings.TrimSpace(strings.Join(cur, "\n")); doc != "" && strings.Trim(doc, "-\n ") != "" {
			docs = append(docs, doc)
		}
		cur = nil
	}
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "```yaml"):
			in = true
		case in && strings.HasPrefix(line, "```"):
			flush()
			in = false
		case in && line == "---":
			flush()
		case in:
			cur = append(cur, line)
		}
	}
	if in {
		t.Fatal("docs/gitops.md has an unclosed yaml block")
	}
	return slices.Clip(docs)
}

// TestTheArgoCDConfigMapPatchKeepsArgoCDsOwnKeys applies config/argocd/argocd-cm.yaml to an argocd-cm
// that holds a key of Argo CD's own, as the guide's `kubectl patch --patch-file` does (a strategic
// merge patch): the health checks are added, byte for byte, and the other key stays.
func TestTheArgoCDConfigMapPatchKeepsArgoCDsOwnKeys(t *testing.T) {
	e := newEnv(t)
	if err := e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: "argocd"}, Data: map[string]string{"url": "https://argocd.example.com"}}
	if err := e.c.Create(e.ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(e.ctx, cm) })
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(root, "config", "argocd", argocd.ConfigMapPath))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSON(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Patch(e.ctx, cm, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		t.Fatalf("patching argocd-cm with %s: %v", argocd.ConfigMapPath, err)
	}
	want := map[string]string{"url": "https://argocd.example.com"}
	for _, kind := range argocd.Kinds {
		if want[argocd.ConfigMapKey(kind)], err = argocd.Script(kind); err != nil {
			t.Fatal(err)
		}
	}
	if d := diff(want, cm.Data); d != "" {
		t.Errorf("argocd-cm after the patch (-want +got):\n%s", d)
	}
}
