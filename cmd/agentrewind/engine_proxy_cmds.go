package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newEngineProxyTaskCommand is `engine replay` or `engine fork`: the rewind proxy in that mode, beside
// the agent in a ForkRun's Job. The proxy is the task (it serves the agent and writes the replay or
// fork result to results/<job-uid>.json and the termination message); these names put it with the other
// engine tasks a controller runs.
func newEngineProxyTaskCommand(mode string) *cobra.Command {
	cmd := newProxyCommand()
	cmd.Use = mode + " --store s3://B/P --session-id ID --job-uid UID [proxy flags]"
	cmd.Short = fmt.Sprintf("The rewind proxy in %s mode, as a ForkRun's Job runs it beside the agent", mode)
	cmd.Long = fmt.Sprintf("Run `agentrewind proxy --mode %s` (see its help for the endpoints and flags) as an engine task.", mode)
	if err := cmd.Flags().Set("mode", mode); err != nil {
		panic(err) // the flag is the proxy command's own
	}
	_ = cmd.Flags().MarkHidden("mode")
	return cmd
}
