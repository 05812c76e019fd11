package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// pastedKey is an Anthropic key the agent pastes into its question: the built-in pattern redacts it.
const pastedKey = "sk-ant-api03-pasted-0123456789abcdefghijklmnopqrstuvwxyz"

// recordingSession is an AgentSession that asks for a recording: an agent reading a Secret, and the
// provider key for its proxy.
func recordingSession(name string) *v1alpha1.AgentSession {
	s := newSession(name, name)
	s.Spec.Agent = v1alpha1.AgentSpec{Image: agentImage, Args: []string{"--task", "triage"}, Env: []corev1.EnvVar{
		{Name: "AGENT_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-secrets"}, Key: "token"}}},
		{Name: EnvAnthropicAPIKey, Value: "sk-from-the-spec"}}}
	s.Spec.ProviderKeys = v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "anthropic"}}
	return s
}

// TestASessionThatAsksForARecordingRecordsItsAgent: an AgentSession with spec.agent whose session is
// not in the store runs one Job, the agent beside the real proxy in record mode; while it runs the
// session is Reconciling (Recording); once it completed the session is in the store without the
// agent's Secret or the key it pasted (the pod's vault key seals them), and verified, with the
// redactions by pattern and the vault in status; a manager restarted after the Job is gone never
// records it again.
func TestASessionThatAsksForARecordingRecordsItsAgent(t *testing.T) {
	e := newEnv(t)
	stop, job := e.startRecording("rec")
	checkRecordPod(t, job, e.session("rec"))
	e.waitSession("rec", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRecording)

	// A manager restarted while the agent runs, with the spec changed meanwhile, follows the same Job.
	stop()
	stop = e.startManager(nil)
	s := e.session("rec")
	s.Spec.Retention = v1alpha1.RetentionSpec{GracePeriodSeconds: new(int64(60))}
	if err := e.c.Update(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	e.waitSession("rec", v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRecording) // for generation 2
	if r, v := len(e.jobsOf("rec", recordPurpose)), len(e.jobsOf("rec", "verify")); r != 1 || v != 0 {
		t.Errorf("%d recording and %d verify Jobs while the session is being recorded, want 1 and 0", r, v)
	}

	fake, upstream := fakeLLM(t, hiThere)
	agent := func(env map[string]string) int {
		c := sdk.NewClient(option.WithBaseURL(env[EnvAnthropicBaseURL]), option.WithAPIKey(env[EnvAnthropicAPIKey]), option.WithMaxRetries(0))
		_, err := c.Messages.New(context.Background(), sdk.MessageNewParams{Model: "claude-test", MaxTokens: 16,
			Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hello, my token is " + env["AGENT_TOKEN"] + " and my key " + pastedKey))}})
		if err != nil {
			t.Errorf("the recorded call: %v", err)
			return 1
		}
		return 0
	}
	// What the pod's network and a mounted vault key would give the proxy.
	if code, out := e.runForkPod(job, agent, "--anthropic-upstream", upstream, "--vault-key-file", filepath.Join(t.TempDir(), "vault.key")); code != 0 {
		t.Fatalf("agent exit %d\n%s", code, out)
	}
	if fake.Requests() != 1 {
		t.Errorf("%d upstream calls, want the agent's one", fake.Requests())
	}

	// The proxy committed the session under spec.sessionID; the normal verify path takes over.
	stored, err := openStore(t, e.storeKey()).ReadMeta(e.ctx, "rec")
	if err != nil {
		t.Fatalf("the recording is not in the store: %v", err)
	}
	// The whole store: the log lives in content-addressed segments beside the blobs, not under sessions/.
	if leaked := e.secretsIn(e.storeKey()+"/", agentToken, providerKey, pastedKey); len(leaked) > 0 {
		t.Errorf("a secret is in the recording: %v", leaked)
	}
	e.runJob(e.waitJob("rec", "verify"))
	s = e.waitSession("rec", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonVerified)
	rec := s.Status.Recording
	size := e.storedSize(e.storeKey("sessions", "rec")+"/", "meta.json", "events.jsonl", "vault."+stored.VaultHash+".enc") + e.segmentBytes("rec")
	if rec.EventsHash != stored.EventsHash || *rec.Events != 4 || *rec.ModelCalls != 1 || *rec.Blobs != 0 || *rec.Bytes != size || rec.LogState != v1alpha1.LogClosed {
		t.Errorf("recording: hash %s, %d events, %d model calls, %d blobs, %d bytes, log %s; want the stored session's hash %s, 4 events (start, the call, the recorder's record of how the run ended, end), 1 model call, no blobs, %d bytes, closed",
			rec.EventsHash, *rec.Events, *rec.ModelCalls, *rec.Blobs, *rec.Bytes, rec.LogState, stored.EventsHash, size)
	}
	// The agent's token, learned from its Secret, and the key it pasted, by the built-in pattern.
	wantRedactions := []v1alpha1.RedactionCount{{Pattern: "anthropic-api-key", Count: new(int64(1))}, {Pattern: "declared-secret", Count: new(int64(1))}}
	if d := cmp.Diff(wantRedactions, rec.Redactions); d != "" {
		t.Errorf("redactions (-want +got):\n%s", d)
	}
	if rec.Vault != v1alpha1.VaultPresent || stored.VaultHash == "" || rec.SchemaVersion != session.CurrentSchemaVersion || *rec.RedactedSecrets != 2 || *rec.RedactedPatterns != 2 {
		t.Errorf("vault %s (stored hash %q), schemaVersion %d, %d secrets by %d patterns; want Present, %d, 2 by 2", rec.Vault, stored.VaultHash,
			rec.SchemaVersion, *rec.RedactedSecrets, *rec.RedactedPatterns, session.CurrentSchemaVersion)
	}
	if raw := fmt.Sprintf("%+v", s); strings.Contains(raw, agentToken) || strings.Contains(raw, pastedKey) {
		t.Errorf("a secret is in the AgentSession: %s", raw)
	}
	if got, want := e.eventReasons("rec"), []string{"JobStarted", "ResumePlanCreated", v1alpha1.ReasonVerified}; !cmp.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}

	// The Job is gone (its TTL ran out) and a new manager reconciles a new generation: the session is
	// in the store, so it is verified again and never recorded again.
	e.restartWithoutTheJob(stop, job, s)
	e.eventually("the verify Job of generation 2", func() (bool, string) {
		n := len(e.jobsOf("rec", "verify"))
		return n == 2, fmt.Sprintf("%d verify Jobs", n)
	})
	time.Sleep(500 * time.Millisecond)
	if n := len(e.jobsOf("rec", recordPurpose)); n != 0 {
		t.Errorf("%d recording Jobs after the recording was committed, want none", n)
	}
	if c := meta.FindStatusCondition(e.session("rec").Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Reason == v1alpha1.ReasonRecording {
		t.Errorf("Reconciling %+v after the recording: want the verify Job's", c)
	}
}

// TestAFailedRecordingStallsAndIsNeverRunAgain: the agent exits 1 with a termination message (the end
// of its log, holding a secret it printed); the session stalls with RecordingFailed, its exit code and
// where its log is, never the log itself, runs no verify Job, and records no second time, even once
// its Job is gone and a restarted manager sees a new generation.
func TestAFailedRecordingStallsAndIsNeverRunAgain(t *testing.T) {
	e := newEnv(t)
	stop, job := e.startRecording("broken")

	// The kubelet's part: the agent failed, saying why; the proxy stopped cleanly.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-pod", Namespace: e.ns, Labels: job.Spec.Template.Labels}, Spec: *job.Spec.Template.Spec.DeepCopy()}
	e.create(pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: ProxyContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: AgentContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", Message: "the triage tool is unreachable with token agent-secret-7c1f"}}}}}
	if err := e.c.Status().Update(e.ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.finishJob(job, false, "")

	s := e.waitSession("broken", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRecordingFailed)
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled)
	for _, want := range []string{job.Name, "BackoffLimitExceeded", "agent exited 1 (Error): its log says why (kubectl logs -n " + e.ns + " job/" + job.Name + " -c agent)"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Stalled message %q does not say %q", c.Message, want)
		}
	}
	if strings.Contains(c.Message, "agent-secret-7c1f") || slices.ContainsFunc(e.eventMessages("broken"), func(m string) bool { return strings.Contains(m, "agent-secret-7c1f") }) {
		t.Errorf("the agent's log tail, with the secret it printed, reached the status or an event: %q", c.Message)
	}
	if strings.Contains(c.Message, "proxy exited") {
		t.Errorf("Stalled message %q blames the proxy, which exited 0", c.Message)
	}
	if got := e.kstatusOf(s, "AgentSession"); got.String() != "Failed" {
		t.Errorf("kstatus %s, want Failed", got)
	}
	if !slices.Contains(e.eventReasons("broken"), v1alpha1.ReasonRecordingFailed) {
		t.Errorf("events %v: want %s", e.eventReasons("broken"), v1alpha1.ReasonRecordingFailed)
	}

	e.restartWithoutTheJob(stop, job, s)
	s = e.waitSession("broken", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRecordingFailed)
	time.Sleep(time.Second)
	if r, v := len(e.jobsOf("broken", recordPurpose)), len(e.jobsOf("broken", "verify")); r != 0 || v != 0 {
		t.Errorf("%d recording and %d verify Jobs after a failed recording, want none", r, v)
	}
	if c2 := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled); !c2.LastTransitionTime.Equal(&c.LastTransitionTime) || c2.Message != c.Message {
		t.Errorf("Stalled changed from %+v to %+v", c, c2)
	}
}

// startRecording starts a manager and creates recordingSession(name) with its Secrets; it returns
// the manager's stop and the recording Job.
func (e *env) startRecording(name string) (stop func(), job *batchv1.Job) {
	e.t.Helper()
	e.forkSecrets()
	stop = e.startManager(nil)
	e.create(recordingSession(name))
	return stop, e.waitJob(name, recordPurpose)
}

// restartWithoutTheJob stops the manager, deletes the recording Job as its TTL would, starts a new
// manager and changes the session's spec, so that a new generation is reconciled.
func (e *env) restartWithoutTheJob(stop func(), job *batchv1.Job, s *v1alpha1.AgentSession) {
	e.t.Helper()
	stop()
	if err := e.c.Delete(e.ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		e.t.Fatal(err)
	}
	e.startManager(nil)
	s.Spec.Retention = v1alpha1.RetentionSpec{Policy: v1alpha1.RetentionRetain}
	if err := e.c.Update(e.ctx, s); err != nil {
		e.t.Fatal(err)
	}
}

// TestASessionInTheStoreOrAForkIsNeverRecorded: spec.agent on a session already pushed, or on a fork's
// child, only verifies.
func TestASessionInTheStoreOrAForkIsNeverRecorded(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "pushed", strings.Repeat("pushed ", 40), false))
	push(t, e.storeKey(), recordSession(t, "child", strings.Repeat("child ", 40), false))
	e.startManager(nil)
	pushed := newSession("pushed", "pushed")
	pushed.Spec.Agent = v1alpha1.AgentSpec{Image: agentImage}
	e.create(pushed)
	child := newSession("child-of-pushed", "not-in-the-store")
	child.Spec.Agent = v1alpha1.AgentSpec{Image: agentImage}
	child.Spec.ParentRef, child.Spec.ForkedAtStep = v1alpha1.LocalObjectReference{Name: "pushed"}, new(int64(1))
	e.create(child)
	e.waitJob("pushed", "verify")
	e.waitJob("child-of-pushed", "verify")
	if a, b := len(e.jobsOf("pushed", recordPurpose)), len(e.jobsOf("child-of-pushed", recordPurpose)); a != 0 || b != 0 {
		t.Errorf("recording Jobs: %d for a session in the store, %d for a fork; want none", a, b)
	}
}

// checkRecordPod checks the recording Job: the engine Job contract, the proxy as a native sidecar in
// record mode holding the provider key, learning the agent's Secret, and an agent that gets only a
// placeholder key and the proxy's address.
func checkRecordPod(t *testing.T, job *batchv1.Job, s *v1alpha1.AgentSession) {
	t.Helper()
	pod := job.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("pod: %d init containers, %d containers; want the proxy sidecar and the agent", len(pod.InitContainers), len(pod.Containers))
	}
	proxy, agent := pod.InitContainers[0], pod.Containers[0]
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Kind != "AgentSession" || ref.UID != s.UID || job.Labels[jobs.LabelParent] != s.Name {
		t.Errorf("Job %s has controller %+v, labels %v", job.Name, ref, job.Labels)
	}
	if want := jobs.Name(s.Name, recordPurpose, string(s.UID), s.Spec.SessionID); job.Name != want {
		t.Errorf("Job name %s, want the deterministic %s", job.Name, want)
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 || job.Spec.TTLSecondsAfterFinished == nil || *job.Spec.TTLSecondsAfterFinished != 3600 {
		t.Errorf("backoffLimit %v, ttl %v", job.Spec.BackoffLimit, job.Spec.TTLSecondsAfterFinished)
	}
	// Restricted: non-root, read-only root, no privilege escalation, no capabilities, RuntimeDefault
	// seccomp, no service account token, never restarted.
	restricted := &corev1.SecurityContext{RunAsNonRoot: new(true), ReadOnlyRootFilesystem: new(true), AllowPrivilegeEscalation: new(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	want := map[string]any{"pod": &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(int64(65532)), RunAsGroup: new(int64(65532)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		ProxyContainer: restricted, AgentContainer: restricted, "automountServiceAccountToken": new(false), "restartPolicy": corev1.RestartPolicyNever}
	got := map[string]any{"pod": pod.SecurityContext, ProxyContainer: proxy.SecurityContext, AgentContainer: agent.SecurityContext,
		"automountServiceAccountToken": pod.AutomountServiceAccountToken, "restartPolicy": pod.RestartPolicy}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pod security (-want +got):\n%s", d)
	}
	if proxy.Name != ProxyContainer || proxy.RestartPolicy == nil || *proxy.RestartPolicy != corev1.ContainerRestartPolicyAlways ||
		!slices.Equal(proxy.Args[:3], []string{"proxy", "--mode", "record"}) {
		t.Errorf("proxy container %s: restart policy %v, args %v", proxy.Name, proxy.RestartPolicy, proxy.Args)
	}
	if proxy.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("proxy termination message policy %s: a recording writes no termination message, its log says why it failed", proxy.TerminationMessagePolicy)
	}
	for _, want := range [][]string{{"--session-id", s.Spec.SessionID}, {"--listen", "127.0.0.1:8787"}, {"--provider", "anthropic"}, {"--learn-secrets-from", learnDir + "/0"}} {
		if i := slices.Index(proxy.Args, want[0]); i < 0 || proxy.Args[i+1] != want[1] {
			t.Errorf("proxy args %v: want %s %s", proxy.Args, want[0], want[1])
		}
	}
	wantProbe := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(ProxyHealthPort), Scheme: corev1.URISchemeHTTP}}
	if p := proxy.StartupProbe; p == nil || !cmp.Equal(wantProbe, p.ProbeHandler) {
		t.Errorf("startup probe %+v, want /readyz on the health port", p)
	}
	// The provider key reaches the proxy only; the agent's Secret is read by the agent and learned by
	// the proxy from a volume of its own.
	refs := secretRefs(pod)
	if got := refs[ProxyContainer]; !slices.Contains(got, EnvAnthropicAPIKey+"=llm-keys/anthropic") {
		t.Errorf("proxy secret refs %v: want the provider key", got)
	}
	if got, want := refs[AgentContainer], []string{"AGENT_TOKEN=agent-secrets/token"}; !cmp.Equal(got, want) {
		t.Errorf("agent secret refs %v, want only its own %v", got, want)
	}
	if got := refs["volume:learn-0"]; !cmp.Equal(got, []string{"agent-secrets"}) {
		t.Errorf("learned secrets volume %v", got)
	}
	aenv := envOf(agent)
	for k, v := range map[string]string{EnvAnthropicBaseURL: "http://127.0.0.1:8787", EnvAnthropicAPIKey: placeholderKey, EnvOpenAIAPIKey: placeholderKey} {
		if got := aenv[k]; got.Value != v || got.ValueFrom != nil {
			t.Errorf("agent env %s = %+v, want %q", k, got, v)
		}
	}
	if agent.Image != agentImage || !slices.Equal(agent.Args, []string{"--task", "triage"}) {
		t.Errorf("agent image %s, args %v", agent.Image, agent.Args)
	}
	if raw := fmt.Sprintf("%+v", job); strings.Contains(raw, providerKey) || strings.Contains(raw, agentToken) || strings.Contains(raw, s3.SecretKey) {
		t.Errorf("Job %s holds a secret's value", job.Name)
	}
}

// segmentBytes is the size of the session's log as the store keeps it in segments (its index);
// 0 for a log stored as one events.jsonl.
func (e *env) segmentBytes(id string) int64 {
	_, n := segmentsOf(e.ctx, e.t, e.storeKey("sessions", id))
	return n
}

// segmentsOf reads the segment index of the session whose objects are under sessionKey: the hashes of
// the segments that hold its log and their total size; none for a log stored as one events.jsonl.
func segmentsOf(ctx context.Context, t testing.TB, sessionKey string) (hashes []string, bytes int64) {
	t.Helper()
	c, err := s3.Client()
	if err != nil {
		t.Fatal(err)
	}
	key := sessionKey + "/segments.json" // an older agentrewind's name, read when no index is named by hash
	for o := range c.ListObjects(ctx, testBucket, minio.ListObjectsOptions{Prefix: sessionKey + "/segments.", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		key = o.Key
	}
	obj, err := c.GetObject(ctx, testBucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	var index struct {
		Segments []struct {
			Hash  string `json:"sha256"`
			Bytes int64  `json:"bytes"`
		} `json:"segments"`
	}
	if err := json.NewDecoder(obj).Decode(&index); err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, 0
		}
		t.Fatal(err)
	}
	for _, seg := range index.Segments {
		hashes, bytes = append(hashes, seg.Hash), bytes+seg.Bytes
	}
	return hashes, bytes
}

// secretsIn lists the store's keys under prefix whose content holds one of secrets.
func (e *env) secretsIn(prefix string, secrets ...string) []string {
	e.t.Helper()
	c, err := s3.Client()
	if err != nil {
		e.t.Fatal(err)
	}
	var leaked []string
	for _, k := range keys(e.t, prefix) {
		obj, err := c.GetObject(e.ctx, testBucket, k, minio.GetObjectOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		var b strings.Builder
		if _, err := io.Copy(&b, obj); err != nil {
			e.t.Fatal(err)
		}
		if slices.ContainsFunc(secrets, func(v string) bool { return strings.Contains(b.String(), v) }) {
			leaked = append(leaked, k)
		}
	}
	if len(keys(e.t, prefix)) == 0 {
		e.t.Errorf("nothing under %s", prefix)
	}
	return leaked
}

// TestProviderKeysAreOnlyForARecording: the API server refuses providerKeys without an agent to record
// or on a fork's child, saying why.
func TestProviderKeysAreOnlyForARecording(t *testing.T) {
	e := newEnv(t)
	pk := v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "anthropic"}}
	noAgent := newSession("no-agent", "no-agent")
	noAgent.Spec.ProviderKeys = pk
	fork := recordingSession("fork")
	fork.Spec.ParentRef, fork.Spec.ForkedAtStep = v1alpha1.LocalObjectReference{Name: "parent"}, new(int64(1))
	for _, s := range []*v1alpha1.AgentSession{noAgent, fork} {
		s.Namespace = e.ns
		if err := e.c.Create(e.ctx, s); err == nil || !strings.Contains(err.Error(), "providerKeys are for recording a session with spec.agent") {
			t.Errorf("creating %s: %v; want the providerKeys rule", s.Name, err)
		}
	}
}

// storedSize is the size of the objects under prefix named names.
func (e *env) storedSize(prefix string, names ...string) int64 {
	e.t.Helper()
	c, err := s3.Client()
	if err != nil {
		e.t.Fatal(err)
	}
	var n int64
	for o := range c.ListObjects(e.ctx, testBucket, minioListOptions(prefix)) {
		if o.Err != nil {
			e.t.Fatal(o.Err)
		}
		if slices.Contains(names, strings.TrimPrefix(o.Key, prefix)) {
			n += o.Size
		}
	}
	return n
}

// TestARecordingSpeaksItsKeysProviderThroughTheOperatorsUpstreams: the recording Job's proxy sends
// live calls to the operator's upstreams and records the OpenAI API when only an OpenAI key is given.
func TestARecordingSpeaksItsKeysProviderThroughTheOperatorsUpstreams(t *testing.T) {
	r := &AgentSessionReconciler{Deps: Deps{Scheme: apiServer.Scheme,
		Stores: &Stores{Config: StoreConfig{Endpoint: "http://store:7070", Bucket: "b"}},
		Jobs:   JobSettings{Image: "engine:1", Upstreams: Upstreams{Anthropic: "http://llm-gateway.llm.svc:8080"}}}}
	for _, c := range []struct {
		keys     v1alpha1.ProviderKeys
		provider string
	}{
		{v1alpha1.ProviderKeys{}, "anthropic"},
		{v1alpha1.ProviderKeys{OpenAI: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "openai"}}, "openai"},
		{v1alpha1.ProviderKeys{Anthropic: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "anthropic"}, OpenAI: v1alpha1.SecretKeyReference{Name: "llm-keys", Key: "openai"}}, "anthropic"},
	} {
		s := recordingSession("rec")
		s.Namespace, s.UID, s.Spec.ProviderKeys = "ns", "uid-1", c.keys
		job, err := r.recordJob(s, r.Stores.LocationOf(s))
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(job.Spec.Template.Spec.InitContainers[0].Args, " ")
		for _, want := range []string{"--provider " + c.provider, "--anthropic-upstream http://llm-gateway.llm.svc:8080"} {
			if !strings.Contains(joined, want) {
				t.Errorf("keys %+v: proxy args %q lack %q", c.keys, joined, want)
			}
		}
	}
}
