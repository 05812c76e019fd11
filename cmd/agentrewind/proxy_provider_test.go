package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// askOpenAI asks the proxy at url one question through the official OpenAI SDK, on the API the
// provider names, and returns the answer's text.
func askOpenAI(t *testing.T, url, provider, text string) (string, error) {
	t.Helper()
	c := openai.NewClient(openaioption.WithBaseURL(url+"/v1/"), openaioption.WithAPIKey("placeholder"), openaioption.WithMaxRetries(0))
	if provider == "openai-responses" {
		r, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-test",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}})
		if err != nil {
			return "", err
		}
		return r.OutputText(), nil
	}
	r, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}})
	if err != nil {
		return "", err
	}
	return r.Choices[0].Message.Content, nil
}

// TestReplayAndForkSpeakTheSessionsProvider records a session from the OpenAI SDK on each OpenAI API
// (Chat Completions and Responses), then runs `engine replay` and `engine fork` on it as a ForkRun's
// Job does, without --provider: both serve the API the session records, the replay with no live call
// and the fork with exactly its tail live. An explicit --provider that agrees is accepted; one that
// disagrees, or names no API, is refused with the flag and the session's provider in the message.
func TestReplayAndForkSpeakTheSessionsProvider(t *testing.T) {
	for _, provider := range []string{"openai", "openai-responses"} {
		t.Run(provider, func(t *testing.T) {
			t.Setenv(envStore, "")
			t.Setenv("OPENAI_API_KEY", "")
			dir := t.TempDir()
			fake, upstream := fakeLLM(t, hiThere)
			rec := startProxyCommand(t, "--mode", "record", "--provider", provider, "--session-dir", dir, "--session-id", "run-1",
				"--openai-upstream", upstream)
			for _, q := range []string{"hello", "again"} {
				if got, err := askOpenAI(t, rec.url, provider, q); err != nil || got != "Hi there" {
					t.Fatalf("record %q: %q, %v", q, got, err)
				}
			}
			if err := rec.stop(t); err != nil {
				t.Fatalf("record run: %v\n%s", err, rec.stderr)
			}
			recorded := fake.Requests()

			termLog := filepath.Join(t.TempDir(), "termination-log")
			if err := os.WriteFile(termLog, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			// jobArgs are a Job's flags, the result file first so that resultOf finds it.
			jobArgs := func(uid string) []string {
				return []string{"--result", filepath.Join(t.TempDir(), "result.json"),
					"--session-dir", dir, "--session-id", "run-1", "--job-uid", uid, "--termination-log", termLog}
			}
			resultOf := func(args []string) *task.Result { return readResult(t, args[1]) }

			for _, flags := range [][]string{nil, {"--provider", provider}} {
				args := append(jobArgs("replay-job"), flags...)
				rep := startProxyVerb(t, []string{"engine", "replay"}, args...)
				for _, q := range []string{"hello", "again"} {
					if got, err := askOpenAI(t, rep.url, provider, q); err != nil || got != "Hi there" {
						t.Fatalf("replay %v %q: %q, %v\n%s", flags, q, got, err, rep.stderr)
					}
				}
				if err := rep.stop(t); err != nil {
					t.Fatalf("replay run %v: %v\n%s", flags, err, rep.stderr)
				}
				if res := resultOf(args); res.Replay == nil || !res.Replay.Passed || res.Replay.Provenance.Live != 0 {
					t.Fatalf("replay %v: result %+v", flags, res)
				}
			}
			if n := fake.Requests() - recorded; n != 0 {
				t.Fatalf("the replays sent %d calls upstream, want none", n)
			}

			// Steps: 0 session_start, 1 and 2 the model calls, 3 session_end; the fork goes live at 2.
			args := append(jobArgs("fork-job"), "--at-step", "2", "--openai-upstream", upstream)
			fork := startProxyVerb(t, []string{"engine", "fork"}, args...)
			for _, q := range []string{"hello", "again"} {
				if got, err := askOpenAI(t, fork.url, provider, q); err != nil || got != "Hi there" {
					t.Fatalf("fork %q: %q, %v\n%s", q, got, err, fork.stderr)
				}
			}
			if err := fork.stop(t); err != nil {
				t.Fatalf("fork run: %v\n%s", err, fork.stderr)
			}
			if res := resultOf(args); res.Fork == nil || res.Fork.Provenance.Recorded != 1 || res.Fork.Provenance.Live != 1 {
				t.Fatalf("fork: result %+v", res)
			}
			if n := fake.Requests() - recorded; n != 1 {
				t.Fatalf("the fork sent %d calls upstream, want 1 (its tail)", n)
			}

			for bad, want := range map[string]string{
				"anthropic": "--provider anthropic: session run-1 records " + provider + "; leave --provider out",
				"gemini":    `--provider "gemini": use anthropic, openai or openai-responses`,
			} {
				for _, verb := range [][]string{{"engine", "replay"}, {"engine", "fork", "--at-step", "2"}} {
					args := append(append(verb, jobArgs("refused")...), "--provider", bad)
					if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("%v --provider %s: %v, want an error containing %q", verb, bad, err, want)
					}
				}
			}
		})
	}
}
