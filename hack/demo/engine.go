package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentrewind/agentrewind/examples/triage"
	"github.com/agentrewind/agentrewind/internal/devenv"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// engineDemo records the sample agent, forks it with a prompt fix, compares the runs and pushes both
// to S3, driving the agentrewind CLI the way a user would.
func engineDemo(ctx context.Context, dir, bin string) error {
	recorded, forked := filepath.Join(dir, "triage-1"), filepath.Join(dir, "triage-1-fix")
	cli := func(env []string, args ...string) error {
		fmt.Printf("$ agentrewind %s\n", strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
		cmd.Env = append(os.Environ(), env...)
		return cmd.Run()
	}

	step("Recording the sample triage agent (examples/triage, a deterministic model) into " + recorded)
	var applied []string
	if _, err := replay.Record(ctx, replay.RecordOptions{Dir: recorded, ID: "triage-1", Model: &triage.Model{}, Tools: triage.Tools(&applied)},
		triage.Agent(triage.SystemPrompt)); err != nil {
		return err
	}
	if err := cli(nil, "inspect", recorded); err != nil {
		return err
	}
	s, err := session.Open(recorded)
	if err != nil {
		return err
	}
	at, _ := triage.DecisionStep(s.Events)
	fmt.Printf("The agent labelled the crash %q; the team wanted an owner review first.\n", strings.Join(applied, ","))

	step(fmt.Sprintf("Forking at step %d (the decision) with a one-line prompt fix; steps before it replay from the log", at))
	fix := triage.PromptFix
	res, err := replay.Fork(ctx, replay.ForkOptions{Parent: s, Dir: forked, ID: "triage-1-fix", AtStep: at, Model: &triage.Model{},
		Overrides: replay.Overrides{System: &fix}, OnMiss: replay.OnMissStub, Goal: &triage.Goal}, triage.Agent(triage.SystemPrompt))
	if err != nil {
		return err
	}
	fmt.Printf("reachedGoal=%v tokensSpent=%d (the live tail only) provenance recorded=%d live=%d stub=%d\n",
		*res.ReachedGoal, res.TokensSpent.Total(), res.Provenance.Recorded, res.Provenance.Live, res.Provenance.Stub)

	step("Comparing the fork with the recording (exit 3 marks the first divergent step)")
	if err := cli(nil, "compare", recorded, forked); err == nil {
		return fmt.Errorf("compare found no divergence between the recording and its fork")
	}

	step("Pushing both runs to S3 (versitygw on loopback) and listing the store")
	s3, err := devenv.LaunchS3Server(filepath.Join(dir, "s3"), func(f string, a ...any) { fmt.Printf(f+"\n", a...) })
	if err != nil {
		return fmt.Errorf("%w (run 'make s3-server' first)", err)
	}
	defer s3.Stop()
	env := []string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey,
		"AGENTREWIND_STORE=s3://agent-sessions/demo", "AGENTREWIND_S3_ENDPOINT=http://" + s3.Endpoint}
	if err := cli(env, "push", recorded, "--create-bucket"); err != nil {
		return err
	}
	if err := cli(env, "push", forked); err != nil {
		return err
	}
	return cli(env, "ls")
}
