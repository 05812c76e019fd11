//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// The OpenAI scenario: the proxy-agent example on OpenAI's Chat Completions and on its Responses API
// (AGENT_API), recorded on this machine, replayed and forked by the operator. The ForkRuns name no
// provider: the proxies in their Jobs speak the API each session records.

// openAIKeySecret holds the OpenAI key a fork's proxy spends (the fake model takes any).
const openAIKeySecret = "openai-provider-keys"

// recordOpenAISession records the agent on api through `agentrewind proxy --mode record --provider api`
// in front of the add-on fake model, and returns the committed session's directory and id.
func recordOpenAISession(t *testing.T, api string) (dir, id string) {
	t.Helper()
	ctx := t.Context()
	id = fmt.Sprintf("triage-%s-%04x", api, rand.IntN(1<<16))
	root := t.TempDir()
	var svc corev1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: fakeLLMService}, &svc); err != nil {
		t.Fatal(err)
	}
	upstream := fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, fakeLLMPort)
	trackerAddr, proxyAddr := freeAddr(), freeAddr()
	logs := &bytes.Buffer{}
	tracker := exec.Command(agentBin, "tracker", trackerAddr)
	tracker.Stdout, tracker.Stderr = logs, logs
	if err := tracker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tracker.Process.Kill(); _ = tracker.Wait() }()

	proxy := exec.Command(agentrewindBin, "proxy", "--mode", "record", "--provider", api, "--listen", proxyAddr,
		"--session-dir", root, "--session-id", id, "--openai-upstream", upstream, "--workspace-head", workspaceHead,
		"--tool", "search_issues=http://"+trackerAddr+"/search", "--tool", "add_label=http://"+trackerAddr+"/label")
	proxy.Env = append(os.Environ(), "OPENAI_API_KEY="+providerKeyValue)
	proxy.Stdout, proxy.Stderr = logs, logs
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = proxy.Process.Kill()
			_ = proxy.Wait()
		}
	}()
	if err := waitHTTP(ctx, "http://"+proxyAddr+"/readyz", 30*time.Second); err != nil {
		t.Fatalf("the recording proxy: %v\n%s", err, logs)
	}
	agent := exec.CommandContext(ctx, agentBin)
	agent.Env = append(os.Environ(), "AGENT_API="+api, "OPENAI_BASE_URL=http://"+proxyAddr+"/v1", "OPENAI_API_KEY=placeholder")
	out, err := agent.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "labelled bug") {
		t.Fatalf("the agent on %s under the recording proxy (%v) should label bug, it printed:\n%s\n%s", api, err, out, logs)
	}
	_ = proxy.Process.Signal(syscall.SIGTERM)
	stopped = true
	if err := proxy.Wait(); err != nil {
		t.Fatalf("committing the recording: %v\n%s", err, logs)
	}
	return filepath.Join(root, id), id
}

// decisionStepOf is the step of the session's second model call: the labelling decision.
func decisionStepOf(t *testing.T, dir string) int64 {
	t.Helper()
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var calls []int64
	for _, ev := range s.Events {
		if ev.Kind == session.KindModelCall {
			calls = append(calls, ev.Step)
		}
	}
	if len(calls) != recordedModels {
		t.Fatalf("the recording holds %d model calls, want %d", len(calls), recordedModels)
	}
	if s.Meta.Provider == "" {
		t.Fatal("the recording does not say which API it speaks")
	}
	return calls[1]
}

// TestOpenAISessionsAreReplayedAndForkedByTheOperator: for a session recorded on Chat Completions and
// one on the Responses API, a Replay of the unchanged agent passes with no live call, and a Fork at
// the labelling decision with the one-line fix reaches the goal with exactly the tail's two live calls,
// both with the fix, answered by the counted fake model (the operator's OpenAI upstream). The ForkRuns
// name no provider; the replay and fork Jobs used to start their proxies as Anthropic ones, which
// refused the sessions.
func TestOpenAISessionsAreReplayedAndForkedByTheOperator(t *testing.T) {
	for _, api := range []string{"openai", "openai-responses"} {
		t.Run(api, func(t *testing.T) {
			dir, id := recordOpenAISession(t, api)
			decision := decisionStepOf(t, dir)
			ns := sessionNamespace(t, "oai")
			if err := k8s.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: openAIKeySecret, Namespace: ns},
				StringData: map[string]string{"OPENAI_API_KEY": providerKeyValue}}); err != nil {
				t.Fatal(err)
			}
			pushSession(t, dir, ns)
			s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "triage", Namespace: ns}, Spec: v1alpha1.AgentSessionSpec{SessionID: id}}
			if err := k8s.Create(t.Context(), s); err != nil {
				t.Fatal(err)
			}
			waitReady(t, s, 3*time.Minute)
			agent := v1alpha1.AgentSpec{Image: agentImage, Env: []corev1.EnvVar{{Name: "AGENT_API", Value: api}}}

			before := countedLLM.Requests()
			rep := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: "replay", Namespace: ns},
				Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "triage"}, Mode: v1alpha1.ModeReplay, Agent: agent}}
			if err := k8s.Create(t.Context(), rep); err != nil {
				t.Fatal(err)
			}
			if outcome := finished(t, rep, 4*time.Minute); outcome != v1alpha1.OutcomePassed {
				t.Fatalf("replay of the %s session: outcome %s, want Passed; status %+v", api, outcome, rep.Status)
			}
			if got := ptr.Deref(rep.Status.Provenance.Recorded, 0); got < recordedModels {
				t.Errorf("replay: status.provenance.recorded = %d, want every model call served (%d or more)", got, recordedModels)
			}
			if n := countedSince(before); n != 0 {
				t.Fatalf("the replay sent %d requests upstream, want none: %v", n, describe(countedLLM.LastRequests(int(n))))
			}

			fork := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Name: "prompt-fix", Namespace: ns},
				Spec: v1alpha1.ForkRunSpec{
					SessionRef: v1alpha1.LocalObjectReference{Name: "triage"},
					Mode:       v1alpha1.ModeFork,
					Fork: v1alpha1.ForkSpec{
						AtStep:       ptr.To(decision),
						Overrides:    v1alpha1.ForkOverrides{System: fixedPrompt},
						Tools:        v1alpha1.ToolPolicy{OnMiss: v1alpha1.ToolMissStub},
						ProviderKeys: v1alpha1.ProviderKeys{OpenAI: v1alpha1.SecretKeyReference{Name: openAIKeySecret, Key: "OPENAI_API_KEY"}},
					},
					Goal:  v1alpha1.Goal{Tool: "add_label", ArgsMatch: &apiextensionsv1.JSON{Raw: []byte(`{"label":"needs-owner-review"}`)}},
					Agent: agent,
				}}
			if err := k8s.Create(t.Context(), fork); err != nil {
				t.Fatal(err)
			}
			if outcome := finished(t, fork, 4*time.Minute); outcome != v1alpha1.OutcomeGoalReached {
				t.Fatalf("fork of the %s session: outcome %s, want GoalReached; status %+v", api, outcome, fork.Status)
			}
			live := countedSince(before)
			reqs := countedLLM.LastRequests(int(live))
			if live != 2 || len(reqs) != 2 {
				t.Fatalf("the fake model got %d requests during the fork, want the tail's 2: %v", live, describe(reqs))
			}
			for i, r := range reqs {
				if !strings.Contains(string(r.Body), "Check CODEOWNERS") {
					t.Errorf("live request %d of the %s fork lacks the fixed prompt: %.200s", i, api, r.Body)
				}
			}
			if fork.Status.ChildSessionRef.Name == "" {
				t.Fatalf("no status.childSessionRef: %+v", fork.Status)
			}
			child := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: fork.Status.ChildSessionRef.Name, Namespace: ns}}
			waitReady(t, child, 3*time.Minute)
		})
	}
}
