package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/version"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentrewind",
		Short: "Record, replay, fork and resume LLM-agent runs on Kubernetes",
		Long: `agentrewind makes LLM-agent runs recordable, replayable, forkable and resumable.

One binary plays every role: the Kubernetes operator (manager), the tasks its Jobs run,
the recording proxy, and the command-line tools over recorded sessions.`,
		SilenceUsage: true,
	}
	root.AddCommand(newVersionCommand(), newManagerCommand(),
		newFakeLLMCommand(),
		newInspectCommand(), newContextCommand(), newDiffCommand(), newVerifyCommand(), newPackCommand(), newUnpackCommand(), newCompareCommand(),
		newPlanCommand(), newEngineCommand(), newPushCommand(), newPullCommand(), newLsCommand(), newCheckpointCommand())
	root.AddCommand(newProxyCommand())
	root.AddCommand(newMCPCommand())
	root.AddCommand(newSuiteCommand())
	root.AddCommand(newUICommand())
	root.AddCommand(newGCCommand())
	escapeAllErrors(root)
	return root
}

// newVersionCommand prints the version of this build, as text, json or yaml (agentrewind version and
// kubectl rewind version alike).
func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputYAML(output); err != nil {
				return err
			}
			info := version.Get()
			if structured(output) {
				return writeDocument(cmd.OutOrStdout(), output, info)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), info)
			return err
		},
	}
	outputFlagYAML(cmd, &output)
	return cmd
}
