package controller

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// openaiKey is the OpenAI key a fork's proxy holds.
const openaiKey = "sk-openai-provider-key-0123456789abcdef"

// askOpenAIAgent is an agent on the official OpenAI SDK, configured only by its environment
// (OPENAI_BASE_URL, OPENAI_API_KEY), that asks one question on the API provider names and exits 1
// when the answer is an error or not want.
func askOpenAIAgent(t *testing.T, provider, question, want string) agentFunc {
	return func(env map[string]string) int {
		c := openai.NewClient(openaioption.WithBaseURL(env[EnvOpenAIBaseURL]), openaioption.WithAPIKey(env[EnvOpenAIAPIKey]), openaioption.WithMaxRetries(0))
		var got string
		if provider == "openai-responses" {
			r, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-test",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question)}})
			if err != nil {
				t.Logf("the agent's %s call: %v", provider, err)
				return 1
			}
			got = r.OutputText()
		} else {
			r, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-test",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}})
			if err != nil {
				t.Logf("the agent's %s call: %v", provider, err)
				return 1
			}
			got = r.Choices[0].Message.Content
		}
		if got != want {
			t.Logf("the agent was answered %q, want %q", got, want)
			return 1
		}
		return 0
	}
}

// recordOpenAIThroughProxy records session id into the test namespace's store as a user would: the
// real proxy in record mode on the OpenAI API provider names, an OpenAI SDK agent asking question.
func (e *env) recordOpenAIThroughProxy(id, provider, script, question string) {
	e.t.Helper()
	_, upstream := fakeLLM(e.t, script)
	p := startProxy(e.t, []string{"proxy", "--mode", "record", "--provider", provider, "--listen", "", "--store", "s3://" + testBucket + "/" + e.storeKey(),
		"--endpoint", "http://" + s3.Endpoint, "--session-id", id, "--openai-upstream", upstream},
		[]string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey, "OPENAI_API_KEY="})
	if code := askOpenAIAgent(e.t, provider, question, "Hi there")(map[string]string{EnvOpenAIBaseURL: p.url + "/v1", EnvOpenAIAPIKey: "placeholder"}); code != 0 {
		e.t.Fatalf("recording %s: the agent failed\n%s", id, p.output)
	}
	if code := p.stop(e.t); code != 0 {
		e.t.Fatalf("recording %s: the proxy exited %d\n%s", id, code, p.output)
	}
}

// TestOpenAISessionsReplayAndForkThroughTheOperator records a session from the OpenAI SDK on each
// OpenAI API (Chat Completions and Responses) and runs a Replay and a Fork of it as the operator does:
// the Jobs name no provider, the real proxy in each takes the session's, the replay passes with no
// live call and the fork's tail goes to the OpenAI upstream with the fork's override.
func TestOpenAISessionsReplayAndForkThroughTheOperator(t *testing.T) {
	e := newEnv(t)
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "openai-keys"}, Data: map[string][]byte{"openai": []byte(openaiKey)}})
	e.startForkManager(nil)
	for _, provider := range []string{"openai", "openai-responses"} {
		e.recordOpenAIThroughProxy(provider, provider, hiThere, "hello")
		e.readySession(provider)

		replay := newReplay(provider+"-replay", provider)
		e.create(replay)
		job := e.waitJob(replay.Name, "replay")
		if code, out := e.runForkPod(job, askOpenAIAgent(t, provider, "hello", "Hi there")); code != 0 {
			t.Fatalf("%s: the agent failed against the replaying proxy:\n%s", provider, out)
		}
		got := e.waitForkRun(replay.Name, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonPassed)
		if *got.Status.Provenance.Recorded != 1 || *got.Status.Provenance.Live != 0 {
			t.Errorf("%s replay: provenance %+v, want the one model call recorded", provider, got.Status.Provenance)
		}

		fork := newFork(provider+"-fork", provider, 1)
		fork.Spec.Fork.ProviderKeys = v1alpha1.ProviderKeys{OpenAI: v1alpha1.SecretKeyReference{Name: "openai-keys", Key: "openai"}}
		fork.Spec.Fork.Overrides = v1alpha1.ForkOverrides{System: "Be brief"}
		e.create(fork)
		job = e.waitJob(fork.Name, "fork")
		fake, upstream := fakeLLM(t, briefOrHello)
		if code, out := e.runForkPod(job, askOpenAIAgent(t, provider, "hello", "Brief."), "--openai-upstream", upstream); code != 0 {
			t.Fatalf("%s: the agent failed against the forking proxy:\n%s", provider, out)
		}
		if fake.Requests() != 1 {
			t.Errorf("%s fork: %d upstream calls, want its one live call", provider, fake.Requests())
		}
		got = e.waitForkRun(fork.Name, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonCompleted)
		if *got.Status.Provenance.Live != 1 || got.Status.ChildSessionRef.Name != childSessionName(fork) {
			t.Errorf("%s fork: status %+v", provider, got.Status)
		}
	}
}
