package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

const (
	agentImage   = "registry.example/agent:1"
	providerKey  = "sk-ant-provider-key-0123456789abcdef"
	agentToken   = "agent-token-0123456789abcdef"
	suiteLabel   = "agentrewind.io/suite"
	hiThere      = `turns: [{text: Hi there, usage: {inputTokens: 3, outputTokens: 2}}]`
	briefOrHello = `turns: [{when: {system: Be brief}, text: Brief., usage: {inputTokens: 5, outputTokens: 1}}, {text: Hi there, usage: {inputTokens: 3, outputTokens: 2}}]`
)

func newReplay(name, session string) *v1alpha1.ForkRun {
	return &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: session}, Mode: v1alpha1.ModeReplay,
			Agent: v1alpha1.AgentSpec{Image: agentImage, Args: []string{"--task", "triage"}}}}
}

func newFork(name, session string, atStep int64) *v1alpha1.ForkRun {
	fr := newReplay(name, session)
	fr.Spec.Mode = v1alpha1.ModeFork
	fr.Spec.Fork = v1alpha1.ForkSpec{AtStep: new(atStep),
		ProviderKeys: v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "anthropic"}}}
	return fr
}

// readySession makes AgentSession name for a session in the store and runs its verify Job.
func (e *env) readySession(name string) {
	e.t.Helper()
	e.create(newSession(name, name))
	e.runJob(e.waitJob(name, "verify"))
	e.waitSession(name, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
}

func (e *env) waitForkRun(name, typ string, st metav1.ConditionStatus, reason string) *v1alpha1.ForkRun {
	e.t.Helper()
	fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	e.waitCondition(fr, func() []metav1.Condition { return fr.Status.Conditions }, typ, st, reason)
	return fr
}

func (e *env) forkSecrets() {
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "llm-keys"}, Data: map[string][]byte{"anthropic": []byte(providerKey)}})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-secrets"}, Data: map[string][]byte{"token": []byte(agentToken)}})
}

// writeResult stores a result for job as its proxy would, at results/<uid>.json.
func (e *env) writeResult(job *batchv1.Job, r *task.Result) {
	e.t.Helper()
	r.APIVersion, r.JobUID = task.APIVersion, string(job.UID)
	r.StartedAt, r.FinishedAt = testNow, testNow.Add(time.Second)
	data, err := task.Encode(r)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := openStore(e.t, e.storeKey()).PutResult(e.ctx, string(job.UID), data); err != nil {
		e.t.Fatal(err)
	}
}

func usageOf(in, out int64) v1alpha1.Usage {
	return pricedUsage(in, out, 0)
}

func pricedUsage(in, out, micro int64) v1alpha1.Usage {
	return v1alpha1.Usage{InputTokens: new(in), OutputTokens: new(out), CacheCreationInputTokens: new(int64(0)),
		CacheReadInputTokens: new(int64(0)), TotalTokens: new(in + out), CostMicroUSD: new(micro)}
}

// unpricedUsage is a usage whose cost the operator could not price: no cost, the models named.
func unpricedUsage(in, out int64, models ...string) v1alpha1.Usage {
	u := usageOf(in, out)
	u.CostMicroUSD, u.UnpricedModels = nil, models
	return u
}

// statusOpts compare the fields a ForkRun's result decides; conditions, times and refs are checked apart.
var statusOpts = cmp.Options{cmpopts.IgnoreFields(v1alpha1.ForkRunStatus{}, "Conditions", "ObservedGeneration", "StartTime", "CompletionTime"),
	cmpopts.IgnoreFields(v1alpha1.Divergence{}, "Message", "ActualFingerprint", "ExpectedFingerprint")}

// secretRefs lists every Secret key a pod reads, by container ("volume:" for Secret volumes).
func secretRefs(pod corev1.PodSpec) map[string][]string {
	out := map[string][]string{}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, v := range c.Env {
			if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
				out[c.Name] = append(out[c.Name], v.Name+"="+v.ValueFrom.SecretKeyRef.Name+"/"+v.ValueFrom.SecretKeyRef.Key)
			}
		}
		for _, f := range c.EnvFrom {
			if f.SecretRef != nil {
				out[c.Name] = append(out[c.Name], "envFrom="+f.SecretRef.Name)
			}
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			out["volume:"+v.Name] = append(out["volume:"+v.Name], v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					out["volume:"+v.Name] = append(out["volume:"+v.Name], s.Secret.Name)
				}
			}
		}
	}
	return out
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, v := range c.Env {
		m[v.Name] = v
	}
	return m
}

// checkForkPod checks the layout every ForkRun Job promises: the engine Job contract on the Job and
// both containers, the proxy as a native sidecar with a startup probe on /readyz, and the agent's
// SDKs pointed at it with a placeholder key, whatever spec.agent.env said.
func checkForkPod(t *testing.T, job *batchv1.Job, purpose string) {
	t.Helper()
	pod := job.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("pod: %d init containers, %d containers; want the proxy sidecar and the agent", len(pod.InitContainers), len(pod.Containers))
	}
	proxy, agent := pod.InitContainers[0], pod.Containers[0]
	if len(job.Name) > 63 || !strings.HasPrefix(job.Name, job.Labels[jobs.LabelParent]+"-"+purpose+"-") {
		t.Errorf("Job name %q", job.Name)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Kind != "ForkRun" || ref.Name != job.Labels[jobs.LabelParent] {
		t.Errorf("Job %s has controller %+v", job.Name, ref)
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 || job.Spec.TTLSecondsAfterFinished == nil || *job.Spec.TTLSecondsAfterFinished != 3600 {
		t.Errorf("backoffLimit %v, ttl %v", job.Spec.BackoffLimit, job.Spec.TTLSecondsAfterFinished)
	}
	wantPodSC := &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(int64(65532)), RunAsGroup: new(int64(65532)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if d := cmp.Diff(wantPodSC, pod.SecurityContext); d != "" {
		t.Errorf("pod security context (-want +got):\n%s", d)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("automount %v, restart policy %s", pod.AutomountServiceAccountToken, pod.RestartPolicy)
	}
	wantSC := &corev1.SecurityContext{RunAsNonRoot: new(true), ReadOnlyRootFilesystem: new(true), AllowPrivilegeEscalation: new(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	for _, c := range []corev1.Container{proxy, agent} {
		if d := cmp.Diff(wantSC, c.SecurityContext); d != "" {
			t.Errorf("%s security context (-want +got):\n%s", c.Name, d)
		}
	}
	// The proxy: a native sidecar running the engine image, probed on /readyz before the agent starts.
	if proxy.Name != ProxyContainer || proxy.RestartPolicy == nil || *proxy.RestartPolicy != corev1.ContainerRestartPolicyAlways ||
		proxy.Image != "registry.example/agentrewind:test" || proxy.Args[0] != "engine" {
		t.Errorf("proxy container %s: restart policy %v, image %s, args %v", proxy.Name, proxy.RestartPolicy, proxy.Image, proxy.Args)
	}
	wantProbe := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(ProxyHealthPort), Scheme: corev1.URISchemeHTTP}}
	for name, p := range map[string]*corev1.Probe{"startup": proxy.StartupProbe, "readiness": proxy.ReadinessProbe} {
		if p == nil {
			t.Errorf("the proxy has no %s probe", name)
		} else if d := cmp.Diff(wantProbe, p.ProbeHandler); d != "" {
			t.Errorf("%s probe (-want +got):\n%s", name, d)
		}
	}
	penv := envOf(proxy)
	if f := penv[jobs.EnvJobUID].ValueFrom; f == nil || f.FieldRef == nil || !slices.Contains(proxy.Args, "$(JOB_UID)") {
		t.Errorf("JOB_UID %+v, args %v", penv[jobs.EnvJobUID], proxy.Args)
	}
	if proxy.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("proxy termination message policy %s: a proxy that fails before it writes its summary says why at the end of its log", proxy.TerminationMessagePolicy)
	}
	// The agent: the operator's base URLs and placeholder keys, over anything spec.agent.env set.
	if agent.Name != AgentContainer || agent.Image != agentImage || !slices.Equal(agent.Args, []string{"--task", "triage"}) {
		t.Errorf("agent container %s: image %s, args %v", agent.Name, agent.Image, agent.Args)
	}
	aenv := envOf(agent)
	want := map[string]string{EnvAnthropicBaseURL: "http://127.0.0.1:8787", EnvOpenAIBaseURL: "http://127.0.0.1:8787/v1", EnvProxy: "http://127.0.0.1:8787",
		EnvAnthropicAPIKey: placeholderKey, EnvOpenAIAPIKey: placeholderKey}
	for k, v := range want {
		if got := aenv[k]; got.Value != v || got.ValueFrom != nil {
			t.Errorf("agent env %s = %+v, want %q", k, got, v)
		}
	}
	for _, c := range pod.Containers {
		for _, v := range c.Env {
			n := 0
			for _, w := range c.Env {
				if w.Name == v.Name {
					n++
				}
			}
			if n != 1 {
				t.Errorf("agent env %s is set %d times", v.Name, n)
			}
		}
	}
	if raw := fmt.Sprintf("%+v", job); strings.Contains(raw, providerKey) || strings.Contains(raw, agentToken) || strings.Contains(raw, s3.SecretKey) {
		t.Errorf("Job %s holds a secret's value", job.Name)
	}
}

// TestAReplaySuitePassesAndDiverges records a session through the real proxy, then replays it twice
// with the real proxy as the pod's sidecar: an agent that asks what it asked passes (Ready, kstatus
// Current), one that asks something else diverges (Stalled, kstatus Failed) at the right step. The
// Replay Job holds no provider key: its only Secret references are the store's, on the proxy.
func TestAReplaySuitePassesAndDiverges(t *testing.T) {
	e := newEnv(t)
	e.recordThroughProxy("golden", hiThere, "hello")
	e.startForkManager(nil)
	e.readySession("golden")
	for _, name := range []string{"pass", "drift"} {
		fr := newReplay(name, "golden")
		fr.Labels = map[string]string{suiteLabel: "nightly"}
		// A key in spec.agent.env is replaced by the placeholder: a replay needs none.
		fr.Spec.Agent.Env = []corev1.EnvVar{{Name: EnvAnthropicAPIKey, Value: "sk-from-the-spec"}, {Name: EnvAnthropicBaseURL, Value: "https://api.anthropic.com"}}
		e.create(fr)
	}

	job := e.waitJob("pass", "replay")
	checkForkPod(t, job, "replay")
	wantArgs := []string{"engine", "replay", "--listen", "127.0.0.1:8787", "--health-listen", ":8788", "--store", "s3://" + testBucket + "/" + e.storeKey(),
		"--session-id", "golden", "--endpoint", "http://" + s3.Endpoint, "--job-uid", "$(JOB_UID)", "--drift-policy", "strict"}
	if d := cmp.Diff(wantArgs, job.Spec.Template.Spec.InitContainers[0].Args); d != "" {
		t.Errorf("proxy args (-want +got):\n%s", d)
	}
	// No provider key anywhere in a Replay Job: the store's credentials on the proxy are its only Secrets.
	wantRefs := map[string][]string{ProxyContainer: {"AWS_ACCESS_KEY_ID=" + jobSecret + "/accessKeyID", "AWS_SECRET_ACCESS_KEY=" + jobSecret + "/secretAccessKey"}}
	if d := cmp.Diff(wantRefs, secretRefs(job.Spec.Template.Spec)); d != "" {
		t.Errorf("Secret references of a Replay Job (-want +got):\n%s", d)
	}
	e.waitForkRun("pass", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)

	if code, out := e.runForkPod(job, askAgent("hello")); code != 0 {
		t.Fatalf("the agent failed against the replaying proxy:\n%s", out)
	}
	pass := e.waitForkRun("pass", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	want := v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomePassed, JobRef: v1alpha1.LocalObjectReference{Name: job.Name}, Divergences: new(int64(0)),
		LastRun: v1alpha1.JobRun{Name: job.Name, Generation: 1},
		// The recording's model, claude-test, has no price: the cost is unknown, not $0.
		Usage:      v1alpha1.ForkUsage{Live: usageOf(0, 0), Replayed: unpricedUsage(3, 2, "anthropic/claude-test")},
		Provenance: v1alpha1.Provenance{Recorded: new(int64(1)), Live: new(int64(0)), Stub: new(int64(0))}}
	if d := cmp.Diff(want, pass.Status, statusOpts); d != "" {
		t.Errorf("status of a passing replay (-want +got):\n%s", d)
	}
	wantConds := []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPassed},
		{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPassed},
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPassed},
	}
	condOpts := cmp.Options{cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime", "Message", "ObservedGeneration"),
		cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type })}
	if d := cmp.Diff(wantConds, pass.Status.Conditions, condOpts); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	if pass.Status.StartTime == nil || pass.Status.CompletionTime == nil || pass.Status.ObservedGeneration != pass.Generation {
		t.Errorf("times %v → %v, observedGeneration %d", pass.Status.StartTime, pass.Status.CompletionTime, pass.Status.ObservedGeneration)
	}
	if got := e.kstatusOf(pass, "ForkRun"); got != status.CurrentStatus {
		t.Errorf("kstatus of a passing replay = %s, want Current", got)
	}

	job = e.waitJob("drift", "replay")
	if code, out := e.runForkPod(job, askAgent("something else")); code == 0 {
		t.Fatalf("the agent was answered a question the recording does not hold:\n%s", out)
	}
	drift := e.waitForkRun("drift", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDiverged)
	want = v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomeDiverged, JobRef: v1alpha1.LocalObjectReference{Name: job.Name}, Divergences: new(int64(1)),
		LastRun: v1alpha1.JobRun{Name: job.Name, Generation: 1},
		FirstDivergence: v1alpha1.Divergence{Step: new(int64(1)), Kind: v1alpha1.CallModel, Lane: "0", Reason: "NoRecordedCall",
			ExpectedCallSite: "anthropic.messages", ActualCallSite: "anthropic.messages"},
		Usage:      v1alpha1.ForkUsage{Live: usageOf(0, 0), Replayed: usageOf(0, 0)},
		Provenance: v1alpha1.Provenance{Recorded: new(int64(0)), Live: new(int64(0)), Stub: new(int64(0))}}
	if d := cmp.Diff(want, drift.Status, statusOpts); d != "" {
		t.Errorf("status of a diverged replay (-want +got):\n%s", d)
	}
	if d := drift.Status.FirstDivergence; d.ActualFingerprint == "" || !strings.Contains(d.Message, "drift at step 1") {
		t.Errorf("first divergence %+v", d)
	}
	if c := meta.FindStatusCondition(drift.Status.Conditions, v1alpha1.ConditionStalled); !strings.Contains(c.Message, job.Name) || !strings.Contains(c.Message, "NoRecordedCall") {
		t.Errorf("Stalled message %q should name the Job and the drift", c.Message)
	}
	if got := e.kstatusOf(drift, "ForkRun"); got != status.FailedStatus {
		t.Errorf("kstatus of a diverged replay = %s, want Failed", got)
	}
	e.eventually("the events a user sees", func() (bool, string) {
		got := append(e.eventReasons("pass"), e.eventReasons("drift")...)
		return slices.Contains(got, "JobStarted") && slices.Contains(got, v1alpha1.ReasonPassed) && slices.Contains(got, v1alpha1.ReasonDiverged), fmt.Sprint(got)
	})
	var suite v1alpha1.ForkRunList
	if err := e.c.List(e.ctx, &suite, client.InNamespace(e.ns), client.MatchingLabels{suiteLabel: "nightly"}); err != nil || len(suite.Items) != 2 {
		t.Errorf("the suite's ForkRuns: %d, %v", len(suite.Items), err)
	}
	for _, name := range []string{"pass", "drift"} {
		if n := len(e.jobsOf(name, "replay")); n != 1 {
			t.Errorf("%s: %d Jobs after it settled, want 1", name, n)
		}
	}
}

// TestForksReachOrMissTheirGoal forks at step 1 with a goal, provider keys and overrides; the results
// are written to the store as the proxy writes them. The Fork Job gives the provider key to the proxy
// only, the agent's own Secrets to the proxy to redact, the overrides as a file and the goal as flags;
// a fork that reached its goal is Ready with its child AgentSession, one that missed it Stalled.
func TestForksReachOrMissTheirGoal(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "parent", strings.Repeat("parent ", 40), false))
	e.forkSecrets()
	e.startForkManager(nil)
	e.readySession("parent")
	reach := newFork("reach", "parent", 1)
	reach.Spec.Goal = v1alpha1.Goal{Tool: "submit", ArgsMatch: &apiextensionsv1.JSON{Raw: []byte(`{"ok":true}`)}}
	reach.Spec.Fork.Overrides = v1alpha1.ForkOverrides{System: "Be brief", Params: &apiextensionsv1.JSON{Raw: []byte(`{"temperature":0}`)}}
	reach.Spec.Agent.Env = []corev1.EnvVar{
		{Name: "AGENT_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-secrets"}, Key: "token"}}},
		// A provider key handed to the agent by mistake never reaches it.
		{Name: EnvAnthropicAPIKey, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "llm-keys"}, Key: "anthropic"}}},
	}
	e.create(reach)
	miss := newFork("miss", "parent", 1)
	miss.Spec.Goal = v1alpha1.Goal{Tool: "submit"}
	e.create(miss)

	job := e.waitJob("reach", "fork")
	checkForkPod(t, job, "fork")
	child := childSessionName(reach)
	pod := job.Spec.Template.Spec
	wantArgs := []string{"engine", "fork", "--listen", "127.0.0.1:8787", "--health-listen", ":8788", "--store", "s3://" + testBucket + "/" + e.storeKey(),
		"--session-id", "parent", "--endpoint", "http://" + s3.Endpoint, "--job-uid", "$(JOB_UID)", "--drift-policy", "strict",
		"--at-step", "1", "--child-session-id", child, "--on-miss", "Error", "--overrides", "/etc/agentrewind/overrides/overrides.json",
		"--goal-tool", "submit", "--goal-args", `{"ok":true}`, "--learn-secrets-from", "/var/run/agentrewind/learn/0"}
	if d := cmp.Diff(wantArgs, pod.InitContainers[0].Args); d != "" {
		t.Errorf("proxy args (-want +got):\n%s", d)
	}
	wantRefs := map[string][]string{
		ProxyContainer:   {"AWS_ACCESS_KEY_ID=" + jobSecret + "/accessKeyID", "AWS_SECRET_ACCESS_KEY=" + jobSecret + "/secretAccessKey", EnvAnthropicAPIKey + "=llm-keys/anthropic"},
		AgentContainer:   {"AGENT_TOKEN=agent-secrets/token"},
		"volume:learn-0": {"agent-secrets"},
	}
	if d := cmp.Diff(wantRefs, secretRefs(pod)); d != "" {
		t.Errorf("Secret references of a Fork Job (-want +got):\n%s", d)
	}
	if got := job.Spec.Template.Annotations[AnnotationOverrides]; got != `{"system":"Be brief","params":{"temperature":0}}` {
		t.Errorf("overrides annotation %q", got)
	}

	e.writeResult(job, &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ParentSessionID: "parent", ChildSessionID: child, AtStep: 1,
		ReachedGoal: new(true),
		TokensSpent: task.Usage{InputTokens: 100, OutputTokens: 52, Models: []price.Line{{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", Calls: 2,
			Usage: session.Usage{InputTokens: 100, OutputTokens: 52}}}},
		Replayed: task.Usage{InputTokens: 900, OutputTokens: 120, Models: []price.Line{{Provider: "openai", Model: "gpt-4o", Calls: 1,
			Usage: session.Usage{InputTokens: 900, OutputTokens: 120}}}},
		Provenance: task.Provenance{Recorded: 1, Live: 2}}})
	e.finishJob(job, true, "")
	got := e.waitForkRun("reach", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonGoalReached)
	want := v1alpha1.ForkRunStatus{Outcome: v1alpha1.OutcomeGoalReached, JobRef: v1alpha1.LocalObjectReference{Name: job.Name},
		LastRun:         v1alpha1.JobRun{Name: job.Name, Generation: 1},
		ChildSessionRef: v1alpha1.LocalObjectReference{Name: child}, Divergences: new(int64(0)),
		// Priced with the operator's table: 100 in at $3 and 52 out at $15 a million; 900 in at $2.50
		// and 120 out at $10.
		Usage:      v1alpha1.ForkUsage{Live: pricedUsage(100, 52, 300+780), Replayed: pricedUsage(900, 120, 2250+1200)},
		Provenance: v1alpha1.Provenance{Recorded: new(int64(1)), Live: new(int64(2)), Stub: new(int64(0))}}
	if d := cmp.Diff(want, got.Status, statusOpts); d != "" {
		t.Errorf("status of a fork that reached its goal (-want +got):\n%s", d)
	}
	if s := e.kstatusOf(got, "ForkRun"); s != status.CurrentStatus {
		t.Errorf("kstatus = %s, want Current", s)
	}
	cs := e.session(child)
	wantChild := v1alpha1.AgentSessionSpec{SessionID: child, ParentRef: v1alpha1.LocalObjectReference{Name: "parent"}, ForkedAtStep: new(int64(1)), Agent: reach.Spec.Agent}
	if d := cmp.Diff(wantChild, cs.Spec); d != "" {
		t.Errorf("child session (-want +got):\n%s", d)
	}
	if len(cs.OwnerReferences) != 0 || cs.Labels[LabelForkRun] != "reach" {
		t.Errorf("child session owners %+v, labels %v: it must outlive the ForkRun", cs.OwnerReferences, cs.Labels)
	}

	job = e.waitJob("miss", "fork")
	e.writeResult(job, &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ParentSessionID: "parent", ChildSessionID: childSessionName(miss), AtStep: 1,
		ReachedGoal: new(false), TokensSpent: task.Usage{InputTokens: 10, OutputTokens: 5}}})
	e.finishJob(job, true, "")
	got = e.waitForkRun("miss", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonGoalMissed)
	if got.Status.Outcome != v1alpha1.OutcomeGoalMissed || got.Status.ChildSessionRef.Name != childSessionName(miss) || *got.Status.Usage.Live.TotalTokens != 15 {
		t.Errorf("status of a fork that missed its goal: %+v", got.Status)
	}
	if s := e.kstatusOf(got, "ForkRun"); s != status.FailedStatus {
		t.Errorf("kstatus = %s, want Failed", s)
	}
}

// TestAForkThroughTheRealProxy runs a Fork Job's sidecar as the real proxy in front of a fake provider:
// the overrides reach it as the downward-API file (the fake answers "Brief." only to the overridden
// system prompt), the goal as flags (never reached, so GoalMissed), the child is committed into the store under the id the controller chose, the agent's
// Secret never enters the child recording, and the child AgentSession verifies.
func TestAForkThroughTheRealProxy(t *testing.T) {
	e := newEnv(t)
	e.recordThroughProxy("golden", hiThere, "hello")
	e.forkSecrets()
	e.startForkManager(nil)
	e.readySession("golden")
	fr := newFork("live", "golden", 1)
	fr.Spec.Fork.Overrides = v1alpha1.ForkOverrides{System: "Be brief"}
	fr.Spec.Goal = v1alpha1.Goal{Tool: "submit"} // the agent never calls it
	fr.Spec.Agent.Env = []corev1.EnvVar{{Name: "AGENT_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "agent-secrets"}, Key: "token"}}}}
	e.create(fr)
	job := e.waitJob("live", "fork")
	fake, upstream := fakeLLM(t, briefOrHello)
	var answer string
	agent := func(env map[string]string) int {
		c := sdk.NewClient(option.WithBaseURL(env[EnvAnthropicBaseURL]), option.WithAPIKey(env[EnvAnthropicAPIKey]), option.WithMaxRetries(0))
		msg, err := c.Messages.New(context.Background(), sdk.MessageNewParams{Model: "claude-test", MaxTokens: 16,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hello, my token is " + env["AGENT_TOKEN"]))}})
		if err != nil {
			t.Errorf("the fork's live call: %v", err)
			return 1
		}
		answer = msg.Content[0].Text
		return 0
	}
	if code, out := e.runForkPod(job, agent, "--anthropic-upstream", upstream); code != 0 {
		t.Fatalf("agent exit %d\n%s", code, out)
	}
	if answer != "Brief." || fake.Requests() != 1 {
		t.Errorf("answer %q after %d upstream calls: the overrides did not reach the proxy", answer, fake.Requests())
	}
	got := e.waitForkRun("live", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonGoalMissed)
	child := childSessionName(fr)
	if got.Status.ChildSessionRef.Name != child || *got.Status.Usage.Live.InputTokens != 5 || *got.Status.Provenance.Live != 1 {
		t.Errorf("status %+v", got.Status)
	}
	// The whole store: the child's log lives in content-addressed segments beside the blobs.
	leaked := e.secretsIn(e.storeKey()+"/", agentToken, providerKey)
	if len(leaked) > 0 {
		t.Errorf("a secret is in the child recording: %v", leaked)
	}
	e.runJob(e.waitJob(child, "verify"))
	e.waitSession(child, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
}

// TestRunsThatCannotStartOrFailed: a ForkRun waits for a session that does not exist yet (Reconciling,
// WaitingForSession, no Job) and starts once it is verified; one with no agent anywhere stalls with
// InvalidSpec naming the field; a Job that failed without a result stalls as Failed; and the spec
// cannot change, so no second generation can run.
func TestRunsThatCannotStartOrFailed(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "later", strings.Repeat("later ", 40), false))
	e.startForkManager(nil)
	e.create(newReplay("waits", "later"))
	e.waitForkRun("waits", v1alpha1.ConditionReconciling, metav1.ConditionTrue, conditions.ReasonWaitingForSession)
	time.Sleep(time.Second)
	if n := len(e.jobsOf("waits", "replay")); n != 0 {
		t.Fatalf("%d Jobs for a ForkRun without its session", n)
	}
	e.create(newSession("later", "later"))
	verify := e.waitJob("later", "verify")
	e.waitForkRun("waits", v1alpha1.ConditionReconciling, metav1.ConditionTrue, conditions.ReasonWaitingForSession) // not verified yet
	if n := len(e.jobsOf("waits", "replay")); n != 0 {
		t.Fatalf("%d Jobs for a ForkRun whose session is not verified", n)
	}
	e.runJob(verify)
	job := e.waitJob("waits", "replay")

	noAgent := newReplay("no-agent", "later")
	noAgent.Spec.Agent = v1alpha1.AgentSpec{}
	e.create(noAgent)
	got := e.waitForkRun("no-agent", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); !strings.Contains(c.Message, "spec.agent.image") || got.Status.Outcome != "" {
		t.Errorf("Stalled %q, outcome %q", c.Message, got.Status.Outcome)
	}
	if n := len(e.jobsOf("no-agent", "replay")); n != 0 {
		t.Errorf("%d Jobs for a ForkRun with no agent", n)
	}

	long := newReplay(strings.Repeat("a-long-name-", 6)+"x", "later")
	e.create(long)
	got = e.waitForkRun(long.Name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); !strings.Contains(c.Message, "at most 63 characters") {
		t.Errorf("Stalled %q for a name that cannot label the pods", c.Message)
	}

	e.finishJob(job, false, "") // the pod died: no result, no termination message
	got = e.waitForkRun("waits", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonJobFailed)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); got.Status.Outcome != v1alpha1.OutcomeFailed ||
		!strings.Contains(c.Message, "backoff limit") || !strings.Contains(c.Message, job.Name) {
		t.Errorf("outcome %q, Stalled %q", got.Status.Outcome, c.Message)
	}
	if s := e.kstatusOf(got, "ForkRun"); s != status.FailedStatus {
		t.Errorf("kstatus of a failed run = %s, want Failed", s)
	}
	e.eventually("a Failed event", func() (bool, string) {
		r := e.eventReasons("waits")
		return slices.Contains(r, string(v1alpha1.OutcomeFailed)), fmt.Sprint(r)
	})

	// A proxy that could not start its run (here: the session was gone from the store) leaves no
	// result in the store; its termination message, a native sidecar's, says why.
	e.create(newReplay("gone", "later"))
	job = e.waitJob("gone", "replay")
	summary := task.TerminationMessage(&task.Result{APIVersion: task.APIVersion, Task: task.Replay, JobUID: string(job.UID), Outcome: task.Failed,
		Failure: &task.Failure{Reason: task.ReasonSessionNotFound, Message: "pulling session later: not found"}})
	e.finishForkPod(job, 1, 1, string(summary))
	gone := e.waitForkRun("gone", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonJobFailed)
	if c := meta.FindStatusCondition(gone.Status.Conditions, v1alpha1.ConditionStalled); gone.Status.Outcome != v1alpha1.OutcomeFailed ||
		!strings.Contains(c.Message, "SessionNotFound: pulling session later: not found") {
		t.Errorf("outcome %q, Stalled %q: the proxy's termination message is not read", gone.Status.Outcome, c.Message)
	}

	if err := tryEdit(e, got, func(fr *v1alpha1.ForkRun) { fr.Spec.SessionRef.Name = "another-run" }); err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("pointing a ForkRun at another session: %v, want the CRD to refuse it", err)
	}
}

// TestTheTTLDeletesAFinishedForkRun: a ForkRun stays until ttlSecondsAfterFinished passed on the
// injected clock, then it is deleted.
func TestTheTTLDeletesAFinishedForkRun(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "ttl", strings.Repeat("ttl ", 40), false))
	e.startForkManager(nil)
	e.readySession("ttl")
	fr := newReplay("short-lived", "ttl")
	fr.Spec.TTLSecondsAfterFinished = new(int32(60))
	e.create(fr)
	job := e.waitJob("short-lived", "replay")
	e.writeResult(job, &task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{SessionID: "ttl", Passed: true}})
	e.finishJob(job, true, "")
	got := e.waitForkRun("short-lived", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	time.Sleep(time.Second)
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(got), got); err != nil {
		t.Fatalf("the ForkRun went before its TTL: %v", err)
	}
	e.clock.SetTime(got.Status.CompletionTime.Add(61 * time.Second))
	// Any event runs a pass; the requeue the controller asked for is 60s of real time away.
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{"test": "tick"}
	if err := e.c.Patch(e.ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	e.eventually("the ForkRun to be deleted", func() (bool, string) {
		err := e.c.Get(e.ctx, client.ObjectKeyFromObject(got), &v1alpha1.ForkRun{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestAManagerRestartedMidRunMakesOneJobAndOneChild stops the manager while the fork's Job runs; the
// Job finishes meanwhile; two managers in turn find the Job by its name and the child by its name.
func TestAManagerRestartedMidRunMakesOneJobAndOneChild(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "restart", strings.Repeat("restart ", 40), false))
	e.forkSecrets()
	stop := e.startForkManager(nil)
	e.readySession("restart")
	fr := newFork("restart-fork", "restart", 2)
	e.create(fr)
	job := e.waitJob("restart-fork", "fork")
	e.waitForkRun("restart-fork", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	stop()
	e.writeResult(job, &task.Result{Task: task.Fork, Outcome: task.Succeeded, Fork: &task.ForkResult{ParentSessionID: "restart",
		ChildSessionID: childSessionName(fr), AtStep: 2, TokensSpent: task.Usage{InputTokens: 7, OutputTokens: 3}}})
	e.finishJob(job, true, "")
	stop = e.startForkManager(nil)
	got := e.waitForkRun("restart-fork", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonCompleted)
	stop()
	e.startForkManager(nil)
	time.Sleep(2 * time.Second)
	if jobs := e.jobsOf("restart-fork", "fork"); len(jobs) != 1 || jobs[0].UID != job.UID {
		t.Errorf("fork Jobs after two restarts: %d (want the one created before them)", len(jobs))
	}
	var sessions v1alpha1.AgentSessionList
	if err := e.c.List(e.ctx, &sessions, client.InNamespace(e.ns), client.MatchingLabels{LabelForkRun: "restart-fork"}); err != nil || len(sessions.Items) != 1 {
		t.Errorf("child sessions after two restarts: %d, %v", len(sessions.Items), err)
	}
	if got.Status.ChildSessionRef.Name != childSessionName(fr) || *got.Status.Usage.Live.TotalTokens != 10 {
		t.Errorf("status %+v", got.Status)
	}
}

// TestAForkRunConflictIsRequeuedAndConverges refuses the first status writes with 409 Conflict.
func TestAForkRunConflictIsRequeuedAndConverges(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "c409", strings.Repeat("conflict ", 40), false))
	var conflicts atomic.Int64
	e.startForkManager(conflictingStatus[*v1alpha1.ForkRun](e.ns, "forkruns", &conflicts))
	e.readySession("c409")
	e.create(newReplay("conflicted", "c409"))
	job := e.waitJob("conflicted", "replay")
	e.writeResult(job, &task.Result{Task: task.Replay, Outcome: task.Succeeded, Replay: &task.ReplayResult{SessionID: "c409", Passed: true,
		Replayed: task.Usage{InputTokens: 900, OutputTokens: 120}}})
	e.finishJob(job, true, "")
	got := e.waitForkRun("conflicted", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	if conflicts.Load() < 4 || got.Status.Outcome != v1alpha1.OutcomePassed || *got.Status.Usage.Replayed.TotalTokens != 1020 {
		t.Errorf("after %d status writes (3 refused): %+v", conflicts.Load(), got.Status)
	}
	if n := len(e.jobsOf("conflicted", "replay")); n != 1 {
		t.Errorf("%d Jobs, want 1", n)
	}
}

// TestAChangedSpecRunsAgainAsANewGeneration: a replay in a suite diverged against the agent it ran; a
// GitOps commit bumps the agent image in place. The ForkRun runs again as generation 2 in a Job of its
// own, its status forgets the first run (no divergence, no stale outcome while it runs) and reports the
// second: Passed. The first Job is left as it was; nothing else runs.
func TestAChangedSpecRunsAgainAsANewGeneration(t *testing.T) {
	e := newEnv(t)
	e.recordThroughProxy("golden", hiThere, "hello")
	e.startForkManager(nil)
	e.readySession("golden")
	fr := newReplay("suite-run", "golden")
	fr.Labels = map[string]string{suiteLabel: "nightly"}
	e.create(fr)

	first := e.waitJob("suite-run", "replay")
	if code, _ := e.runForkPod(first, askAgent("something else")); code == 0 {
		t.Fatal("the agent was answered a question the recording does not hold")
	}
	e.waitForkRun("suite-run", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDiverged)

	editObject(e, fr.DeepCopy(), func(fr *v1alpha1.ForkRun) { fr.Spec.Agent.Image = agentImage + "-1.1" })
	rerun := e.waitForkRun("suite-run", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonJobRunning)
	if rerun.Status.Outcome != "" || rerun.Status.FirstDivergence.Step != nil || rerun.Status.Divergences != nil {
		t.Errorf("while generation 2 runs, status still reports generation 1: outcome %q, first divergence %+v", rerun.Status.Outcome, rerun.Status.FirstDivergence)
	}
	var second *batchv1.Job
	e.eventually("a Job for generation 2", func() (bool, string) {
		for _, j := range e.jobsOf("suite-run", "replay") {
			if j.Name != first.Name {
				second = &j
			}
		}
		return second != nil, fmt.Sprintf("%d Jobs", len(e.jobsOf("suite-run", "replay")))
	})
	if got := second.Spec.Template.Spec.Containers[0].Image; got != agentImage+"-1.1" {
		t.Errorf("generation 2's agent image %q, want the bumped one", got)
	}
	if code, out := e.runForkPod(second, askAgent("hello")); code != 0 {
		t.Fatalf("the agent failed against the replaying proxy:\n%s", out)
	}
	pass := e.waitForkRun("suite-run", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
	if pass.Status.Outcome != v1alpha1.OutcomePassed || pass.Status.JobRef.Name != second.Name || pass.Status.ObservedGeneration != 2 || pass.Status.FirstDivergence.Step != nil {
		t.Errorf("after generation 2: outcome %s, job %s (want %s), observedGeneration %d, first divergence %+v",
			pass.Status.Outcome, pass.Status.JobRef.Name, second.Name, pass.Status.ObservedGeneration, pass.Status.FirstDivergence)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(e.jobsOf("suite-run", "replay")); n != 2 {
		t.Errorf("%d replay Jobs, want one per generation", n)
	}
}
