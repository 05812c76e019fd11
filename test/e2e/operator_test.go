//go:build e2e

package e2e

import (
	"context"
	"fmt"
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

	// The child is judged like any session, in a ResumePlan of its name. Its search is the recorded
	// one; its add_label, new in the tail, got a stub answer (onMiss: Stub) and labelled nothing, which
	// the recorder's rung does not take for the step done: Resumable, the label left.
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: child.Name, Namespace: ns}}
	waitReady(t, rp, 3*time.Minute)
	st := rp.Status
	got := planSummary{Verdict: st.Verdict, Residual: ptr.Deref(st.ResidualSteps, -1), ResidualIDs: stepIDs(st.Residual),
		Verified: stepIDs(st.Verified), Reachability: st.Reachability.State}
	want := planSummary{Verdict: v1alpha1.VerdictResumable, Residual: 1, ResidualIDs: []string{"label"}, Verified: []string{"search"}, Reachability: v1alpha1.Reachable}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the child's ResumePlan %s (reason %s: %s) (-want +got):\n%s", rp.Name, st.Reason, st.Message, diff)
	}
	t.Logf("the child's ResumePlan %s: %s (%s): %s; reachability %s (%s)", rp.Name, st.Verdict, st.Reason, st.Message,
		st.Reachability.State, st.Reachability.Reason)
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

// A Fork from the Checkpoint the operator minted at the ANCHOR a run stands at (its recorder never
// closed the log) gets the workspace as it was at that step, restored into its own claim before the
// agent starts, even after the recorded run's workspace moved on.
func TestForkFromCheckpointRestoresTheWorkspace(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "ckpt")
	files := map[string]string{
		"NOTES.md":           "triage of #42: searched, labelled bug, checkpointed\n",
		"src/editor/save.go": "package editor\n\n// Save writes the buffer.\nfunc Save() error { return nil }\n",
	}
	ws := hostPathClaim(t, ns, "workspace", files)
	forkWS := hostPathClaim(t, ns, "fork-workspace", nil)
	verifiedSession(t, ns, "triage", parkedSession(t), v1alpha1.AgentSpec{Image: agentImage,
		Workspace: v1alpha1.WorkspaceVolume{ClaimName: "workspace"}})

	ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("triage-step-%d", anchorStep), Namespace: ns}}
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

// The finished recording's ResumePlan is Complete: both declared steps are witnessed by the recorded
// tool answers (search_issues, add_label), nothing is left to resume, and the run is collectible.
// kubectl get resumeplans shows the same in its columns.
func TestResumePlanVerdictsInKubectl(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "plan")
	verifiedSession(t, ns, "triage", recordedSession(), v1alpha1.AgentSpec{})
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: "triage", Namespace: ns}}
	waitReady(t, rp, 3*time.Minute)

	st := rp.Status
	got := planSummary{Verdict: st.Verdict, Residual: ptr.Deref(st.ResidualSteps, -1), ResidualIDs: stepIDs(st.Residual),
		Verified: stepIDs(st.Verified), Reachability: st.Reachability.State}
	want := planSummary{Verdict: v1alpha1.VerdictComplete, Residual: 0, Verified: []string{"search", "label"}, Reachability: v1alpha1.Collectible}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ResumePlan %s (reason %s: %s) (-want +got):\n%s", rp.Name, st.Reason, st.Message, diff)
	}

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
	if row["VERDICT"] != "Complete" || row["RESIDUAL"] != "0" || row["REACHABILITY"] != "Collectible" {
		t.Errorf("kubectl get resumeplans shows verdict %q residual %q reachability %q, want Complete, 0, Collectible:\n%s",
			row["VERDICT"], row["RESIDUAL"], row["REACHABILITY"], out)
	}
	wide, err := kubectl("get", "resumeplans", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get resumeplans -o wide:\n%s", wide)
}

// planSummary is what a test compares of a ResumePlan's status.
type planSummary struct {
	Verdict      v1alpha1.ResumeVerdict
	Residual     int32
	ResidualIDs  []string
	Verified     []string
	Reachability v1alpha1.Reachability
}

// stepIDs are the ids of a ResumePlan's steps, in order.
func stepIDs(steps []v1alpha1.PlanStep) []string {
	var ids []string
	for _, s := range steps {
		ids = append(ids, s.ID)
	}
	return ids
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

// With a grace of one second the garbage collector deletes what cannot be resumed and nothing else,
// and `agentrewind gc report --sessions` says why it keeps each of the rest. Four copies of the
// recording, each its own AgentSession:
//
//   - finished: the recording as it is, COMPLETE: deleted, its meta.json gone from the store.
//   - forked: the same finished run under another id, read by a ForkRun that forks from the Checkpoint
//     the operator minted at its ANCHOR: kept, Reachable (ReadByUnfinishedForkRun, and the anchor of
//     the retained Checkpoint). Only an unfinished ForkRun keeps what it reads, so this one waits for
//     its provider key Secret, which is never created: its Job's pod cannot start.
//   - crashed: cut after the search step's STEP_CLAIMED, RESUMABLE with the residual [label]: kept,
//     Reachable (ResumableRetained) however old, after several passes.
//   - goalless: without its INTENT, UNRESUMABLE (NoIntent): deleted.
//
// The blobs stay: the four share them (the store keeps one copy per namespace), and the manager's
// blob sweep keeps any blob younger than its margin (a day).
func TestGCCollectsOnlyWhatCannotBeResumed(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "gc")
	graceOneSecond := v1alpha1.RetentionSpec{Policy: v1alpha1.RetentionDelete, GracePeriodSeconds: ptr.To[int64](1)}
	session := func(name, id, dir string) *v1alpha1.AgentSession {
		pushSession(t, dir, ns)
		return &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.AgentSessionSpec{SessionID: id, Retention: graceOneSecond}}
	}
	forkedID, crashedID, goallessID := recordedID+"-forked", recordedID+"-crashed", recordedID+"-goalless"
	finished := session("finished", recordedID, recordedSession())
	forked := session("forked", forkedID, copiedSession(t, forkedID))
	crashed := session("crashed", crashedID, crashedSession(t, crashedID))
	goalless := session("goalless", goallessID, goallessSession(t, goallessID))

	// The ForkRun first: a session with no reader yet could be collected before it is read.
	anchor := fmt.Sprintf("%s-step-%d", forked.Name, anchorStep) // the Checkpoint of its ANCHOR
	fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: "from-anchor", Namespace: ns},
		Spec: v1alpha1.ForkRunSpec{
			SessionRef: v1alpha1.LocalObjectReference{Name: forked.Name},
			Mode:       v1alpha1.ModeFork,
			Fork: v1alpha1.ForkSpec{
				CheckpointRef: v1alpha1.LocalObjectReference{Name: anchor},
				Tools:         v1alpha1.ToolPolicy{OnMiss: v1alpha1.ToolMissStub},
				ProviderKeys:  v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "provider-keys-not-yet", Key: "ANTHROPIC_API_KEY"}},
			},
			Agent: v1alpha1.AgentSpec{Image: agentImage},
		}}
	for _, o := range []client.Object{fr, finished, forked, crashed, goalless} {
		if err := k8s.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}

	// The collectible ones go, and the collector says why in an event on each.
	for _, c := range []struct {
		s      *v1alpha1.AgentSession
		reason string
	}{{finished, "CompleteCollectible"}, {goalless, "UnresumableCollectible"}} {
		eventually(t, 3*time.Minute, "AgentSession "+c.s.Name+" deleted", func(ctx context.Context) (bool, string, error) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(c.s), c.s)
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			return false, fmt.Sprintf("still there: reachability %+v", c.s.Status.Reachability), err
		})
		events, err := kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name="+c.s.Name+",reason=GarbageCollected",
			"-o", "jsonpath={.items[*].message}")
		if err != nil || !strings.Contains(events, "Deleted: "+c.reason) {
			t.Errorf("the collector's event on deleting %s: %q (%v), want Deleted: %s", c.s.Name, events, err, c.reason)
		}
	}

	// The collector's own word on the kept ones (its message; the plan's mirrored one says otherwise),
	// once it saw their ResumePlans' verdicts (before that it also keeps them as VerdictPending).
	kept := []struct {
		s      *v1alpha1.AgentSession
		reason string
	}{{forked, "ReadByUnfinishedForkRun"}, {crashed, "ResumableRetained"}}
	for _, k := range kept {
		waitFor(t, k.s, 2*time.Minute, "the collector's reachability", func(s *v1alpha1.AgentSession) (bool, string) {
			r := s.Status.Reachability
			return r.State == v1alpha1.Reachable && strings.HasPrefix(r.Message, "retained regardless of age") && r.Reason == k.reason &&
				!strings.Contains(r.Message, "no resume verdict yet"), fmt.Sprintf("%+v", r)
		})
		t.Logf("kept %s: reachability %s: %s", k.s.Name, k.s.Status.Reachability.Reason, k.s.Status.Reachability.Message)
	}
	// The forked run is as finished as the collected one: only its reader keeps it.
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: forked.Name, Namespace: ns}}
	waitReady(t, rp, time.Minute)
	if v, r := rp.Status.Verdict, rp.Status.Reachability.State; v != v1alpha1.VerdictComplete || r != v1alpha1.Collectible {
		t.Errorf("the forked run's ResumePlan: %s, %s; want Complete, Collectible by its verdict alone", v, r)
	}
	rp = &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: crashed.Name, Namespace: ns}}
	waitReady(t, rp, time.Minute)
	got := planSummary{Verdict: rp.Status.Verdict, Residual: ptr.Deref(rp.Status.ResidualSteps, -1), ResidualIDs: stepIDs(rp.Status.Residual),
		Verified: stepIDs(rp.Status.Verified), Reachability: rp.Status.Reachability.State}
	want := planSummary{Verdict: v1alpha1.VerdictResumable, Residual: 1, ResidualIDs: []string{"label"}, Verified: []string{"search"}, Reachability: v1alpha1.Reachable}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the crashed run's ResumePlan (reason %s: %s) (-want +got):\n%s", rp.Status.Reason, rp.Status.Message, diff)
	}

	time.Sleep(15 * time.Second) // three more passes at --gc-interval=5s, the 1 s grace long gone
	for _, k := range kept {
		if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(k.s), k.s); err != nil || k.s.DeletionTimestamp != nil {
			t.Fatalf("the reachable session %s after its grace: %v, deletionTimestamp %v; want it kept", k.s.Name, err, k.s.DeletionTimestamp)
		}
		if r := k.s.Status.Reachability; r.State != v1alpha1.Reachable || r.Reason != k.reason {
			t.Errorf("the kept session %s's reachability: %+v, want Reachable (%s)", k.s.Name, r, k.reason)
		}
	}
	// The scenario held: the ForkRun still waits, from the Checkpoint the operator minted (an anchor
	// only: the session has no workspace).
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(fr), fr); err != nil || fr.Status.Outcome != "" {
		t.Fatalf("ForkRun %s: %v, outcome %q; want it unfinished, waiting for its provider key", fr.Name, err, fr.Status.Outcome)
	}
	ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Name: anchor, Namespace: ns}}
	waitReady(t, ck, time.Minute)
	if c := meta.FindStatusCondition(ck.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonAnchorOnly || ptr.Deref(ck.Spec.Step, -1) != anchorStep {
		t.Errorf("Checkpoint %s: Ready %s at step %v, want %s at step %d", ck.Name, c.Reason, ck.Spec.Step, v1alpha1.ReasonAnchorOnly, anchorStep)
	}

	store, err := blobstore.Open(t.Context(), storeConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the store holds the kept sessions' meta.json and not the collected ones'", func(ctx context.Context) (bool, string, error) {
		objs, err := store.List(ctx, ns+"/")
		if err != nil {
			return false, "", err
		}
		var metas []string
		for _, o := range objs {
			if id, ok := strings.CutSuffix(o.Key, "/meta.json"); ok {
				metas = append(metas, filepath.Base(id))
			}
		}
		slices.Sort(metas)
		want := []string{crashedID, forkedID}
		slices.Sort(want)
		return slices.Equal(metas, want), fmt.Sprintf("sessions with a meta.json under %s/: %v, want %v", ns, metas, want), nil
	})

	// What a user asks: why is each session still there?
	cmd := exec.CommandContext(t.Context(), agentrewindBin, "gc", "report", "--sessions", "-n", ns, "--kubeconfig", kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agentrewind gc report --sessions: %v\n%s", err, out)
	}
	t.Logf("agentrewind gc report --sessions -n %s:\n%s", ns, out)
	rows := map[string][]string{} // SESSION REACHABILITY REASON ACTION WHEN WHY...
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 5 && strings.HasPrefix(f[0], ns+"/") {
			rows[strings.TrimPrefix(f[0], ns+"/")] = f[1:5]
		}
	}
	wantRows := map[string][]string{
		forked.Name:  {"Reachable", "ReadByUnfinishedForkRun", "keep", "never"},
		crashed.Name: {"Reachable", "ResumableRetained", "keep", "never"},
	}
	if diff := cmp.Diff(wantRows, rows); diff != "" {
		t.Errorf("agentrewind gc report --sessions: the sessions (-want +got):\n%s\n%s", diff, out)
	}
	if !strings.Contains(string(out), "the anchor of a retained Checkpoint") {
		t.Errorf("agentrewind gc report --sessions does not say that %s holds the anchor of a retained Checkpoint:\n%s", forked.Name, out)
	}
}
