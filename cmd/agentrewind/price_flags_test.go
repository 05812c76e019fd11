package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// twoModels answers every call with the usage of a cached Anthropic call: 1,000 input tokens of which
// 200 written to the cache and 300 read from it, 100 output.
type twoModels struct{}

func (twoModels) Create(context.Context, session.Request) (*session.Response, error) {
	return &session.Response{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`),
		Usage: &session.Usage{InputTokens: 1000, OutputTokens: 100, CacheCreationInputTokens: 200, CacheReadInputTokens: 300}}, nil
}

// pricedSession records a run that asks claude-sonnet-4-5 and then my-model, which no table prices:
// 0 start, 1 model(plan), 2 model(answer), 3 end.
func pricedSession(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "priced")
	_, err := replay.Record(context.Background(), replay.RecordOptions{Dir: dir, ID: "priced", Model: twoModels{}}, func(ctx context.Context, ac replay.AgentContext) error {
		for _, m := range []struct{ model, site string }{{"claude-sonnet-4-5", "plan"}, {"my-model", "answer"}} {
			if _, err := ac.Model(ctx, session.Request{Model: m.model, Messages: []session.Message{msg("user", "go")}}, replay.Site(m.site)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInspectShowsTheCostOfEveryCall: each model call's cost at the list price of its model (input,
// output, cache write and cache read), "unknown" for a model without a price and for the total it is
// part of, never $0; --price and --price-file price it.
func TestInspectShowsTheCostOfEveryCall(t *testing.T) {
	dir := pricedSession(t)
	out, err := runCLI(t, "inspect", dir)
	if err != nil {
		t.Fatal(err)
	}
	// 500 uncached x $3 + 100 out x $15 + 200 written x $3.75 + 300 read x $0.30, per million.
	for _, want := range []string{"COST", "$0.003840", "unknown", "cost unknown: my-model: no price in the table (add a price with --price or --price-file)"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "$0.0000") || strings.Contains(out, "$0.000000") {
		t.Errorf("inspect shows a $0 cost:\n%s", out)
	}

	// A price needs its provider.
	out, err = runCLI(t, "inspect", dir, "--price", "my-model=1,2,1,0.5")
	if err == nil || !strings.Contains(err.Error(), "want provider/model=") {
		t.Fatalf("--price without a provider: %v", err)
	}
	// A call recorded without a provider takes the price of the one provider listing its model:
	// 500 uncached x $1 + 100 x $2 + 200 written x $1 + 300 read x $0.5.
	out, err = runCLI(t, "inspect", dir, "--price", "acme/my-model=1,2,1,0.5", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Events []timelineRow
		Cost   costView
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("inspect -o json: %v\n%s", err, out)
	}
	if c := doc.Events[2].Cost; c == nil || c.MicroUSD == nil || *c.MicroUSD != 500+200+200+150 {
		t.Errorf("the priced my-model call costs %+v, want 1050 micro-dollars", c)
	}
	if doc.Cost.MicroUSD == nil || *doc.Cost.MicroUSD != 3840+1050 {
		t.Errorf("total %+v, want 4890 micro-dollars", doc.Cost)
	}
	if doc.Events[0].Cost != nil {
		t.Errorf("session_start has a cost %+v", doc.Events[0].Cost)
	}

	// A price file overrides the built-in price of a listed model, and a flag overrides the file.
	file := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(file, []byte("anthropic:\n  claude-sonnet-4-5: {input: 1, output: 1, cacheWrite: 1, cacheRead: 1}\nacme:\n  my-model: {input: 9, output: 9}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "inspect", dir, "--price-file", file, "--price", "acme/my-model=1,1,1,1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "cost $0.002200\n") {
		t.Errorf("with the file and the flag, want a total of 1100 + 1100 micro-dollars:\n%s", out)
	}
}

// TestPriceFlagsRefuseNamingTheField: a bad price file or flag stops the command before it reads
// anything, naming the flag, the file and the field.
func TestPriceFlagsRefuseNamingTheField(t *testing.T) {
	dir := pricedSession(t)
	bad := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(bad, []byte("openai:\n  gpt-4o: {input: 2.5}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, maxPriceFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--price-file", bad}, "--price-file " + bad + ": price openai.gpt-4o.output: required"},
		{[]string{"--price-file", filepath.Join(dir, "nope.yaml")}, "--price-file: open"},
		{[]string{"--price-file", big}, "is over 1048576 bytes"},
		{[]string{"--price", "openai/gpt-4o=1,x"}, `--price: price openai/gpt-4o.output: "x" is not a decimal`},
	} {
		if _, err := runCLI(t, append([]string{"inspect", dir}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("inspect %v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestManagerRefusesABadPriceFile: the manager reads its price file before it starts, and a file it
// cannot read stops it with the field named rather than costing every run as unknown.
func TestManagerRefusesABadPriceFile(t *testing.T) {
	t.Setenv(blobstore.EnvAccessKeyID, "id")
	t.Setenv(blobstore.EnvSecretAccessKey, "secret")
	bad := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(bad, []byte("openai: {gpt-4o: {input: 2.5, output: 10, cacheRead: 0.0000001}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	cmd.SetArgs([]string{"manager", "--kubeconfig", writeUnreachableKubeconfig(t), "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--engine-image", "i", "--store-endpoint", "http://127.0.0.1:1", "--store-bucket", "bucket", "--price-file", bad})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	if want := "price openai.gpt-4o.cacheRead: 1e-7 has more than six decimals"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("manager with a bad --price-file: %v, want an error saying %q", err, want)
	}
}

// TestVerifyResultSplitsUsageByModel: the verify result an AgentSession's status is written from
// carries the session's calls by model, so the operator prices them with its table.
func TestVerifyResultSplitsUsageByModel(t *testing.T) {
	dir := pricedSession(t)
	var v task.VerifyResult
	if err := describeSession(dir, &v); err != nil || !v.Intact {
		t.Fatalf("describeSession: %v, %+v", err, v)
	}
	cached := session.Usage{InputTokens: 1000, OutputTokens: 100, CacheCreationInputTokens: 200, CacheReadInputTokens: 300}
	want := []price.Line{{Provider: "generic", Model: "claude-sonnet-4-5", Calls: 1, Usage: cached}, {Provider: "generic", Model: "my-model", Calls: 1, Usage: cached}}
	if d := cmp.Diff(want, v.Usage.Models); d != "" || v.Usage.InputTokens != 2000 {
		t.Errorf("verify usage %+v, lines (-want +got):\n%s", v.Usage, d)
	}
}
