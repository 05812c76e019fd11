package controller

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

// TestNoAgentReadsASecretKeyTheProxyHolds: an agent env var under any name that reads a provider key
// (the recording's, the fork's, or, for a replay or a fork, its session's), or the store credentials
// the proxy is given, is a spec error, for every Job that runs an agent: the key would reach the
// agent, which the proxy holds keys for. The same Secret's other keys, and other Secrets, still reach it.
func TestNoAgentReadsASecretKeyTheProxyHolds(t *testing.T) {
	deps := Deps{Scheme: apiServer.Scheme, Stores: &Stores{Config: StoreConfig{Endpoint: "http://store:7070", Bucket: "b",
		JobSecret: JobSecretKeys{Name: jobSecret, AccessKeyID: "accessKeyID", SecretAccessKey: "secretAccessKey"}}}, Jobs: JobSettings{Image: "engine:1"}}
	sessions := &AgentSessionReconciler{Deps: deps}
	runs := &ForkRunReconciler{Deps: deps}
	openAIOnly := v1alpha1.ProviderKeys{OpenAI: v1alpha1.SecretKeyReference{Name: "oa", Key: "k"}}

	type build func(env corev1.EnvVar) error
	record := func(keys v1alpha1.ProviderKeys) build {
		return func(env corev1.EnvVar) error {
			s := recordingSession("rec")
			s.Namespace, s.UID, s.Spec.ProviderKeys = "ns", "uid-1", keys
			s.Spec.Agent.Env = append(s.Spec.Agent.Env, env)
			_, err := sessions.recordJob(s, deps.Stores.LocationOf(s))
			return err
		}
	}
	forkRun := func(mode v1alpha1.ForkMode, parentKeys v1alpha1.ProviderKeys) build {
		return func(env corev1.EnvVar) error {
			parent := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "parent"},
				Spec: v1alpha1.AgentSessionSpec{SessionID: "parent", ProviderKeys: parentKeys}}
			fr := newFork("run", "parent", 2)
			fr.Namespace, fr.UID, fr.Spec.Mode = "ns", "uid-2", mode
			if mode == v1alpha1.ModeReplay {
				fr.Spec.Fork = v1alpha1.ForkSpec{}
			}
			fr.Spec.Agent.Env = []corev1.EnvVar{env}
			_, err := runs.forkRunJob(fr, parent, fr.Spec.Agent, forkStart{step: 2})
			return err
		}
	}
	for name, tc := range map[string]struct {
		build   build
		refused []corev1.EnvVar
	}{
		"recording": {record(recordingSession("x").Spec.ProviderKeys), []corev1.EnvVar{
			secretEnv("MY_KEY", "llm-keys", "anthropic"), secretEnv("S3", jobSecret, "secretAccessKey"), secretEnv("S3_ID", jobSecret, "accessKeyID")}},
		"recording, OpenAI": {record(openAIOnly), []corev1.EnvVar{secretEnv("LLM", "oa", "k")}},
		"fork": {forkRun(v1alpha1.ModeFork, openAIOnly), []corev1.EnvVar{
			secretEnv("K", "llm-keys", "anthropic"), secretEnv("P", "oa", "k"), secretEnv("S3", jobSecret, "secretAccessKey")}},
		"replay": {forkRun(v1alpha1.ModeReplay, openAIOnly), []corev1.EnvVar{
			secretEnv("P", "oa", "k"), secretEnv("S3", jobSecret, "secretAccessKey")}},
	} {
		for _, env := range tc.refused {
			err := tc.build(env)
			var se *specError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), env.Name) || !strings.Contains(err.Error(), env.ValueFrom.SecretKeyRef.Name) {
				t.Errorf("%s: agent env %s reading %s/%s: error %v, want a spec error naming both", name, env.Name,
					env.ValueFrom.SecretKeyRef.Name, env.ValueFrom.SecretKeyRef.Key, err)
			}
		}
		for _, env := range []corev1.EnvVar{secretEnv("OTHER", "llm-keys", "github"), secretEnv("T", "agent-secrets", "token")} {
			if err := tc.build(env); err != nil {
				t.Errorf("%s: agent env %s: %v", name, env.Name, err)
			}
		}
	}
}

// TestARecordingWhoseAgentReadsTheProviderKeyStalls: such a session runs no Job and stalls InvalidSpec,
// saying which variable to remove.
func TestARecordingWhoseAgentReadsTheProviderKeyStalls(t *testing.T) {
	e := newEnv(t)
	e.forkSecrets()
	e.startManager(nil)
	s := recordingSession("stolen")
	s.Spec.Agent.Env = append(s.Spec.Agent.Env, secretEnv("MY_LLM_KEY", "llm-keys", "anthropic"))
	e.create(s)
	got := e.waitSession("stolen", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
	if c := got.Status.Conditions; !strings.Contains(conditionMessage(c, v1alpha1.ConditionStalled), "MY_LLM_KEY") {
		t.Errorf("Stalled does not name the variable: %+v", c)
	}
	if n := len(e.jobsOf("stolen", recordPurpose)); n != 0 {
		t.Errorf("%d recording Jobs, want none", n)
	}
}

func conditionMessage(cs []metav1.Condition, typ string) string {
	for _, c := range cs {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}
