//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// The operator's scenarios, driven through the API like a user: a session pushed from outside the
// cluster, a fork that fixes the agent's prompt, replays against the same and a changed agent, a fork
// from a Checkpoint, the ResumePlan verdicts as kubectl shows them, and the manager restarted while a
// ForkRun's Job runs. The tests that count the fake model's requests (fork, replay) and the one that
// restarts the manager run one at a time; the others in parallel, each in its own namespace.

// A session pushed to the store from outside the cluster appears as an AgentSession in the store
// sync's namespace and is verified: status counts what the pushed meta.json and log hold.
func TestPushedSessionIsSyncedAndVerified(t *testing.T) {
	t.Parallel()
	meta0, err := readMeta(recordedSession())
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := os.ReadDir(filepath.Join(recordedSession(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	pushSession(t, recordedSession(), syncNamespace)

	var s v1alpha1.AgentSession
	eventually(t, time.Minute, "an AgentSession for the pushed session in "+syncNamespace, func(ctx context.Context) (bool, string, error) {
		var list v1alpha1.AgentSessionList
		if err := k8s.List(ctx, &list, client.InNamespace(syncNamespace)); err != nil {
			return false, "", err
		}
		for _, item := range list.Items {
			if item.Spec.SessionID == recordedID {
				s = item
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d AgentSessions, none for %s", len(list.Items), recordedID), nil
	})
	if s.Labels["agentrewind.io/synced"] != "true" {
		t.Errorf("the synced AgentSession %s lacks agentrewind.io/synced=true: %v", s.Name, s.Labels)
	}
	waitReady(t, &s, 3*time.Minute)
	rec := s.Status.Recording
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"events", ptr.Deref(rec.Events, -1), meta0.Events},
		{"steps", ptr.Deref(rec.Steps, -1), recordedEvents},
		{"model calls", ptr.Deref(rec.ModelCalls, -1), recordedModels},
		{"tool calls", ptr.Deref(rec.ToolCalls, -1), recordedTools},
		{"blobs", ptr.Deref(rec.Blobs, -1), int64(len(blobs))},
		{"schema version", int64(rec.SchemaVersion), int64(session.CurrentSchemaVersion)},
	} {
		if c.got != c.want {
			t.Errorf("status.recording %s = %d, want %d", c.what, c.got, c.want)
		}
	}
	if rec.EventsHash != meta0.EventsHash {
		t.Errorf("status.recording.eventsHash = %q, want the pushed meta.json's %q", rec.EventsHash, meta0.EventsHash)
	}
	if ptr.Deref(rec.Usage.TotalTokens, 0) <= 0 {
		t.Errorf("status.recording.usage.totalTokens = %v, want the recorded model calls' tokens", rec.Usage.TotalTokens)
	}
}

// A Fork at the labelling decision with the one-line prompt fix reaches the goal the flawed run missed:
// Ready, outcome GoalReached, a child AgentSession with parentRef and forkedAtStep, and the fake model
// answered exactly the tail's two live calls, both with the fixed prompt.
func TestForkRunWithPromptFixReachesGoal(t *testing.T) {
	ns := sessionNamespace(t, "fork")
	verifiedSession(t, ns, "triage", recordedSession(), v1alpha1.AgentSpec{})

	before := countedLLM.Requests()
	fr := fixForkRun(ns, "prompt-fix", "triage")
	if err := k8s.Create(t.Context(), fr); err != nil {
		t.Fatal(err)
	}
	if outcome := finished(t, fr, 4*time.Minute); outcome != v1alpha1.OutcomeGoalReached {
		t.Fatalf("outcome %s, want GoalReached; status %+v", outcome, fr.Status)
	}
	waitReady(t, fr, time.Minute)
	if c := meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonGoalReached {
		t.Errorf("Ready reason %s, want %s", c.Reason, v1alpha1.ReasonGoalReached)
	}

	// The fake model saw the live tail only: the decision (its step 2) and the report (step 3), both
	// with the fix, and nothing of the replayed prefix (the plan, its step 1).
	live := countedSince(before)
	reqs := countedLLM.LastRequests(int(live))
	if live != 2 || len(reqs) != 2 {
		t.Fatalf("the fake model got %d requests during the fork, want 2 (the tail's model calls): %v", live, describe(reqs))
	}
	for i, r := range reqs {
		if r.Step != i+2 || !strings.Contains(string(r.Body), "Check CODEOWNERS") {
			t.Errorf("live request %d: step %d, fixed prompt %v; want step %d with the fix", i, r.Step, strings.Contains(string(r.Body), "Check CODEOWNERS"), i+2)
		}
	}
	if got := ptr.Deref(fr.Status.Provenance.Live, -1); got < 2 {
		t.Errorf("status.provenance.live = %d, want at least the 2 live model calls", got)
	}
	if ptr.Deref(fr.Status.Usage.Live.TotalTokens, 0) <= 0 {
		t.Errorf("status.usage.live.totalTokens = %v, want the tail's tokens", fr.Status.Usage.Live.TotalTokens)
	}

	// The child session: created by the operator, verified, pointing back at its parent and step.
	if fr.Status.ChildSessionRef.Name == "" {
		t.Fatalf("no status.childSessionRef: %+v", fr.Status)
	}
	child := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: fr.Status.ChildSessionRef.Name, Namespace: ns}}
	waitReady(t, child, 3*time.Minute)
	if child.Spec.ParentRef.Name != "triage" || ptr.Deref(child.Spec.ForkedAtStep, -1) != decisionStep {
		t.Errorf("child %s: parentRef %q forkedAtStep %v, want triage and %d", child.Name, child.Spec.ParentRef.Name, child.Spec.ForkedAtStep, decisionStep)
	}
}

// A Replay against the unchanged agent passes without a single live call; against a changed agent (it
// asks another model) it diverges at the first model call, and status names the step and call site.
func TestReplayPassesOrDivergesAtTheChangedStep(t *testing.T) {
	ns := sessionNamespace(t, "replay")
	verifiedSession(t, ns, "triage", recordedSession(), v1alpha1.AgentSpec{})
	before := countedLLM.Requests()

	replay := func(name string, env ...corev1.EnvVar) *v1alpha1.ForkRun {
		fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"agentrewind.io/suite": "e2e"}},
			Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "triage"}, Mode: v1alpha1.ModeReplay,
				Agent: v1alpha1.AgentSpec{Image: agentImage, Env: env}}}
		if err := k8s.Create(t.Context(), fr); err != nil {
			t.Fatal(err)
		}
		return fr
	}
	same := replay("unchanged")
	changed := replay("other-model", corev1.EnvVar{Name: "AGENT_MODEL", Value: "claude-opus-4-1"})

	if outcome := finished(t, same, 4*time.Minute); outcome != v1alpha1.OutcomePassed {
		t.Errorf("replay of the unchanged agent: outcome %s, want Passed; status %+v", outcome, same.Status)
	}
	if got := ptr.Deref(same.Status.Provenance.Live, -1); got != 0 {
		t.Errorf("replay of the unchanged agent: status.provenance.live = %d, want 0", got)
	}
	if got := ptr.Deref(same.Status.Provenance.Recorded, 0); got < 3 {
		t.Errorf("replay of the unchanged agent: status.provenance.recorded = %d, want every model and tool call it made (3 or more)", got)
	}
	if outcome := finished(t, changed, 4*time.Minute); outcome != v1alpha1.OutcomeDiverged {
		t.Fatalf("replay of the changed agent: outcome %s, want Diverged; status %+v", outcome, changed.Status)
	}
	d := changed.Status.FirstDivergence
	if ptr.Deref(d.Step, -1) != firstModelStep || d.Kind != v1alpha1.CallModel || d.ExpectedCallSite != "anthropic.messages" {
		t.Errorf("first divergence %+v, want step %d, a ModelCall expected at anthropic.messages", d, firstModelStep)
	}
	if d.ExpectedFingerprint == "" || d.ExpectedFingerprint == d.ActualFingerprint {
		t.Errorf("first divergence fingerprints: expected %q actual %q, want two different ones", d.ExpectedFingerprint, d.ActualFingerprint)
	}
	if n := countedSince(before); n != 0 {
		t.Errorf("the fake model got %d requests during the replays, want none: %v", n, describe(countedLLM.LastRequests(int(n))))
	}

	// The suite's table, as kubectl shows it from the printer columns.
	out, err := kubectl("get", "forkruns", "-n", ns, "-l", "agentrewind.io/suite=e2e")
	if err != nil {
		t.Fatal(err)
	}
	rows := table(t, out)
	if rows["unchanged"]["OUTCOME"] != "Passed" || rows["other-model"]["OUTCOME"] != "Diverged" || rows["other-model"]["DIVERGED"] != fmt.Sprint(firstModelStep) {
		t.Errorf("kubectl get forkruns -l agentrewind.io/suite=e2e:\n%s", out)
	}
}

// A Fork from the Checkpoint the operator minted at the parked run's SUSPEND anchor gets the workspace
// as it was at that step, restored into its own claim before the agent starts, even after the
// recorded run's workspace moved on.
func TestForkFromCheckpointRestoresTheWorkspace(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "ckpt")
	files := map[string]string{
		"NOTES.md":           "triage of #42: searched, labelled bug, parked\n",
		"src/editor/save.go": "package editor\n\n// Save writes the buffer.\nfunc Save() error { return nil }\n",
	}
	ws := hostPathClaim(t, ns, "workspace", files)
	forkWS := hostPathClaim(t, ns, "fork-workspace", nil)
	verifiedSession(t, ns, "triage", parkedSession(t), v1alpha1.AgentSpec{Image: agentImage,
		Workspace: v1alpha1.WorkspaceVolume{ClaimName: "workspace"}})

	ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("triage-step-%d", suspendStep), Namespace: ns}}
	waitReady(t, ck, 3*time.Minute)
	snap := ck.Status.Snapshot
	if snap.ManifestDigest == "" || ptr.Deref(snap.Files, -1) != int64(len(files)) || ptr.Deref(snap.TotalBytes, -1) != totalBytes(files) {
		t.Fatalf("Checkpoint %s snapshot %+v, want a manifest of %d files, %d bytes", ck.Name, snap, len(files), totalBytes(files))
	}
	// The recorded run's workspace moves on; the fork must get the snapshot's files, not these.
	if err := os.WriteFile(filepath.Join(ws, "NOTES.md"), []byte("later work, after the checkpoint\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: "from-checkpoint", Namespace: ns},
		Spec: v1alpha1.ForkRunSpec{
			SessionRef: v1alpha1.LocalObjectReference{Name: "triage"},
			Mode:       v1alpha1.ModeFork,
			Fork: v1alpha1.ForkSpec{
				CheckpointRef: v1alpha1.LocalObjectReference{Name: ck.Name},
				Overrides:     v1alpha1.ForkOverrides{System: fixedPrompt},
				Tools:         v1alpha1.ToolPolicy{OnMiss: v1alpha1.ToolMissStub},
				ProviderKeys:  v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: providerKeySecret, Key: "ANTHROPIC_API_KEY"}},
			},
			Agent: v1alpha1.AgentSpec{Image: agentImage, Workspace: v1alpha1.WorkspaceVolume{ClaimName: "fork-workspace"}},
		}}
	if err := k8s.Create(t.Context(), fr); err != nil {
		t.Fatal(err)
	}
	outcome := finished(t, fr, 4*time.Minute)
	if outcome == v1alpha1.OutcomeFailed || outcome == v1alpha1.OutcomeDiverged {
		t.Errorf("fork from %s: outcome %s; status %+v", ck.Name, outcome, fr.Status)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(forkWS, name))
		if err != nil || string(got) != want {
			t.Errorf("the fork's workspace %s: %q (%v), want the checkpoint's %q", name, got, err, want)
		}
	}
}

// kubectl get resumeplans shows the verdict columns filled for a pushed session's plan.
func TestResumePlanVerdictsInKubectl(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "plan")
	verifiedSession(t, ns, "triage", recordedSession(), v1alpha1.AgentSpec{})
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "triage", Namespace: ns}}
	waitReady(t, rp, 3*time.Minute)

	out, err := kubectl("get", "resumeplans", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	row := table(t, out)["triage"]
	for _, col := range []string{"SESSION", "READY", "VERDICT", "REACHABILITY"} {
		if v := row[col]; v == "" || v == "<none>" {
			t.Errorf("kubectl get resumeplans: column %s empty:\n%s", col, out)
		}
	}
	if row["VERDICT"] != string(rp.Status.Verdict) {
		t.Errorf("kubectl shows verdict %q, status holds %q", row["VERDICT"], rp.Status.Verdict)
	}
	wide, _ := kubectl("get", "resumeplans", "-n", ns, "-o", "wide")
	t.Logf("kubectl get resumeplans -o wide:\n%s", wide)
}

// The manager pod deleted while a ForkRun's Job runs: the new manager adopts the run, and afterwards
// there is exactly one Job and one child AgentSession for it.
func TestManagerRestartDuringForkRunDuplicatesNothing(t *testing.T) {
	ns := sessionNamespace(t, "restart")
	verifiedSession(t, ns, "triage", recordedSession(), v1alpha1.AgentSpec{})
	old, err := managerPod(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	fr := fixForkRun(ns, "across-restart", "triage")
	if err := k8s.Create(t.Context(), fr); err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	eventually(t, 2*time.Minute, "the ForkRun's Job", func(ctx context.Context) (bool, string, error) {
		jobs, err := ownedJobs(ctx, fr)
		if err != nil || len(jobs) == 0 {
			return false, "no Job yet", err
		}
		job = jobs[0]
		return true, "", nil
	})
	if err := k8s.Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if job.Status.CompletionTime != nil || job.Status.Failed > 0 {
		t.Fatalf("Job %s finished before the manager was deleted: the scenario did not happen", job.Name)
	}
	t.Logf("deleted manager pod %s while Job %s runs", old.Name, job.Name)
	eventually(t, 3*time.Minute, "a new manager pod", func(ctx context.Context) (bool, string, error) {
		p, err := managerPod(ctx)
		if err != nil {
			return false, "", err
		}
		return p.Name != old.Name, "still " + p.Name, nil
	})

	if outcome := finished(t, fr, 4*time.Minute); outcome != v1alpha1.OutcomeGoalReached {
		t.Fatalf("outcome %s, want GoalReached; status %+v", outcome, fr.Status)
	}
	// Let the new manager settle (resyncs, the child's verify) before counting.
	child := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: fr.Status.ChildSessionRef.Name, Namespace: ns}}
	waitReady(t, child, 3*time.Minute)
	jobs, err := ownedJobs(t.Context(), fr)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].UID != job.UID || fr.Status.JobRef.Name != job.Name {
		t.Errorf("Jobs of the ForkRun: %v (status.jobRef %s), want exactly the one that ran, %s", names(jobs), fr.Status.JobRef.Name, job.Name)
	}
	var sessions v1alpha1.AgentSessionList
	if err := k8s.List(t.Context(), &sessions, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var children []string
	for _, s := range sessions.Items {
		if s.Spec.ParentRef.Name == "triage" {
			children = append(children, s.Name)
		}
	}
	if len(children) != 1 || children[0] != child.Name {
		t.Errorf("child AgentSessions of triage: %v, want exactly %s", children, child.Name)
	}
}

// ownedJobs are the Jobs fr owns.
func ownedJobs(ctx context.Context, fr *v1alpha1.ForkRun) ([]batchv1.Job, error) {
	var list batchv1.JobList
	if err := k8s.List(ctx, &list, client.InNamespace(fr.Namespace)); err != nil {
		return nil, err
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		for _, o := range j.OwnerReferences {
			if o.UID == fr.UID {
				out = append(out, j)
			}
		}
	}
	return out, nil
}

func names(jobs []batchv1.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Name
	}
	return out
}

// table parses kubectl's table output into rows by NAME, each a map from column header to value.
func table(t *testing.T, out string) map[string]map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("kubectl printed no rows:\n%s", out)
	}
	header := lines[0]
	// Columns start where a header word starts; values are cut at the same offsets.
	var starts []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	rows := map[string]map[string]string{}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for c, start := range starts {
			end := len(line)
			if c+1 < len(starts) && starts[c+1] < end {
				end = starts[c+1]
			}
			name := strings.TrimSpace(header[start:min(len(header), end)])
			if start < len(line) {
				row[name] = strings.TrimSpace(line[start:end])
			}
		}
		rows[row["NAME"]] = row
	}
	return rows
}

// describe summarizes the fake model's requests for a failure message.
func describe(reqs []fakellm.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = fmt.Sprintf("%s step %d turn %d status %d", r.Path, r.Step, r.Turn, r.Status)
	}
	return out
}

func totalBytes(files map[string]string) int64 {
	var n int64
	for _, c := range files {
		n += int64(len(c))
	}
	return n
}

// An AgentSession whose spec names an agent and whose session is not in the store yet is recorded in
// the cluster: one Job runs the agent beside the proxy in record mode against the operator's upstream,
// and the session it commits is verified like a pushed one. As in the demo, the agent searches on the
// tracker's MCP server (spec.agent.mcpServers), which it reaches through the proxy, and the recording
// holds that call.
func TestAgentSessionRecordsItsAgentInCluster(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "record")
	tools, mcpServers := deployTracker(t, ns)
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "recorded", Namespace: ns},
		Spec: v1alpha1.AgentSessionSpec{SessionID: "recorded-" + ns, Agent: v1alpha1.AgentSpec{Image: agentImage, Tools: tools, MCPServers: mcpServers},
			ProviderKeys: v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: providerKeySecret, Key: "ANTHROPIC_API_KEY"}}}}
	if err := k8s.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, 4*time.Minute, "recorded and verified", func(s *v1alpha1.AgentSession) (bool, string) {
		if st := meta.FindStatusCondition(s.Status.Conditions, "Stalled"); st != nil && st.Status == metav1.ConditionTrue {
			// The agent's log says why (the operator keeps it out of status: it may print secrets).
			logs, _ := kubectl("logs", "-n", ns, "-l", "batch.kubernetes.io/job-name", "-c", "agent", "--tail", "5")
			t.Fatalf("the recording is Stalled (%s): %s\nthe agent's log:\n%s", st.Reason, st.Message, logs)
		}
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("Ready: %+v", c)
	})
	rec := s.Status.Recording
	// The tool events: the MCP initialize and search (tracker/initialize, tracker/tools/call) and add_label.
	if wantTools := int64(recordedTools + 1); ptr.Deref(rec.ModelCalls, -1) != recordedModels || ptr.Deref(rec.ToolCalls, -1) != wantTools {
		t.Errorf("the in-cluster recording: %d model and %d tool calls, want %d and %d", ptr.Deref(rec.ModelCalls, -1), ptr.Deref(rec.ToolCalls, -1), recordedModels, wantTools)
	}
	// The timeline, as a user reads it from the store: the search went to the tracker's MCP server.
	cmd := exec.CommandContext(t.Context(), agentrewindBin, "rewind", "inspect", s.Name, "-n", ns, "--kubeconfig", kubeconfig,
		"--store", "s3://"+storeBucket, "--endpoint", storeEndpoint)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+storeAccessKey, "AWS_SECRET_ACCESS_KEY="+storeSecretKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agentrewind rewind inspect %s: %v\n%s", s.Name, err, out)
	}
	var mcpCalls []string
	for line := range strings.Lines(string(out)) {
		for _, f := range strings.Fields(line) { // STEP KIND LANE CALL SITE (mcp.tracker) WHAT ...
			if strings.HasPrefix(f, "tracker/") && strings.Contains(line, "mcp.tracker") {
				mcpCalls = append(mcpCalls, f)
			}
		}
	}
	if diff := cmp.Diff([]string{"tracker/initialize", "tracker/tools/call"}, mcpCalls); diff != "" {
		t.Errorf("the recording's calls to the tracker's MCP server (-want +got):\n%s\n%s", diff, out)
	}
}

// The garbage collector deletes a collectible session past its grace and never a reachable one, however
// old: of two pushed sessions with a grace period of one second, the one whose run declared no goal
// (UNRESUMABLE, no anchor) is deleted with its objects in the store, and the parked, resumable one is
// marked Reachable by the collector and is still there, with its meta.json, after several passes.
func TestGCCollectsOnlyWhatCannotBeResumed(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "gc")
	goallessID := recordedID + "-goalless"
	pushSession(t, recordedSession(), ns)
	pushSession(t, goallessSession(t, goallessID), ns)
	graceOneSecond := v1alpha1.RetentionSpec{Policy: v1alpha1.RetentionDelete, GracePeriodSeconds: ptr.To[int64](1)}
	kept := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "triage", Namespace: ns},
		Spec: v1alpha1.AgentSessionSpec{SessionID: recordedID, Retention: graceOneSecond}}
	collected := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "goalless", Namespace: ns},
		Spec: v1alpha1.AgentSessionSpec{SessionID: goallessID, Retention: graceOneSecond}}
	for _, s := range []*v1alpha1.AgentSession{kept, collected} {
		if err := k8s.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, kept, 3*time.Minute)

	eventually(t, 3*time.Minute, "the collectible session deleted", func(ctx context.Context) (bool, string, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(collected), collected)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("still there: reachability %+v", collected.Status.Reachability), err
	})
	// The collector's own verdict on the kept one (its message; the plan's mirrored one says
	// otherwise), once it saw the ResumePlan's verdict (before that it keeps it as VerdictPending).
	waitFor(t, kept, 2*time.Minute, "the collector's reachability", func(s *v1alpha1.AgentSession) (bool, string) {
		r := s.Status.Reachability
		return r.State == v1alpha1.Reachable && strings.HasPrefix(r.Message, "retained regardless of age") && r.Reason != "VerdictPending",
			fmt.Sprintf("%+v", r)
	})
	t.Logf("kept: reachability %s: %s", kept.Status.Reachability.Reason, kept.Status.Reachability.Message)
	time.Sleep(15 * time.Second) // three more passes at --gc-interval=5s, the 1 s grace long gone
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(kept), kept); err != nil || kept.DeletionTimestamp != nil {
		t.Fatalf("the reachable session after its grace: %v, deletionTimestamp %v; want it kept", err, kept.DeletionTimestamp)
	}
	if r := kept.Status.Reachability; r.State != v1alpha1.Reachable {
		t.Errorf("the kept session's reachability: %+v, want Reachable", r)
	}

	store, err := blobstore.Open(t.Context(), storeConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the store holds the kept session's meta.json and not the collected one's", func(ctx context.Context) (bool, string, error) {
		objs, err := store.List(ctx, ns+"/")
		if err != nil {
			return false, "", err
		}
		var metas []string
		for _, o := range objs {
			if strings.HasSuffix(o.Key, "/meta.json") {
				metas = append(metas, o.Key)
			}
		}
		ok := len(metas) == 1 && strings.HasSuffix(metas[0], "/"+recordedID+"/meta.json")
		return ok, fmt.Sprintf("meta.json objects under %s/: %v", ns, metas), nil
	})
}
