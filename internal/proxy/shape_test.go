package proxy

import (
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestAnAnswerServedInAnotherShapeIsAToleratedDifference: a call recorded as JSON and replayed to a
// streaming request, and one recorded streamed and replayed as JSON, are served rebuilt — the SDK
// assembles the same text — and the replay passes, but its result counts each as a tolerated
// difference (AnswerShape) naming the Strict policy that let it through; a replay in the recorded
// shapes notes nothing.
func TestAnAnswerServedInAnotherShapeIsAToleratedDifference(t *testing.T) {
	up := newUpstream(t, weatherScript)
	dir := filepath.Join(t.TempDir(), "run")
	ask := func(base string, streamFirst bool) []string {
		c := sdk.NewClient(option.WithBaseURL(base), option.WithAPIKey("placeholder-key"), option.WithMaxRetries(0))
		var texts []string
		for i, q := range []string{"alpha", "beta"} {
			params := sdk.MessageNewParams{Model: "claude-test", MaxTokens: 64, Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(q))}}
			if (i == 0) == streamFirst {
				s := c.Messages.NewStreaming(t.Context(), params)
				var msg sdk.Message
				for s.Next() {
					if err := msg.Accumulate(s.Current()); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				texts = append(texts, msg.Content[0].Text)
				continue
			}
			msg, err := c.Messages.New(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			texts = append(texts, msg.Content[0].Text)
		}
		return texts
	}
	rec := start(t, Options{Mode: Record, Dir: dir, ID: "run", Upstreams: map[string]string{"anthropic": up.url}})
	recorded := ask(rec.url, false) // alpha as JSON, beta streamed
	if out := rec.stop(t); out.Err != nil {
		t.Fatal(out.Err)
	}
	for _, tc := range []struct {
		name        string
		streamFirst bool
		tolerated   int64
	}{{"recorded shapes", false, 0}, {"other shapes", true, 2}} {
		rep := start(t, Options{Mode: Replay, Session: openSession(t, dir)})
		replayed := ask(rep.url, tc.streamFirst)
		out := rep.stop(t)
		res, ok := ReplayResult("run", out.Replay, out.Err)
		if !ok || !res.Passed || res.ToleratedDrifts != tc.tolerated || len(res.FirstDrifts) != int(tc.tolerated) {
			t.Fatalf("%s: result %+v, want passed with %d tolerated differences", tc.name, res, tc.tolerated)
		}
		if strings.Join(replayed, "|") != strings.Join(recorded, "|") {
			t.Fatalf("%s: the SDK assembled %q, recorded %q", tc.name, replayed, recorded)
		}
		for _, d := range res.FirstDrifts {
			if d.Reason != string(DriftAnswerShape) || !strings.Contains(d.Message, "Strict drift policy") || d.Step < 0 {
				t.Errorf("%s: difference %+v, want AnswerShape naming the Strict policy", tc.name, d)
			}
		}
		if tc.tolerated == 2 && (!strings.Contains(res.FirstDrifts[0].Message, "as JSON and the request asked for a stream") ||
			!strings.Contains(res.FirstDrifts[1].Message, "as a stream and the request asked for JSON")) {
			t.Errorf("differences %+v do not say which shape was served for which", res.FirstDrifts)
		}
	}
}
