package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// The names the binary answers to as a kubectl plugin. kubectl runs kubectl-rewind for `kubectl
// rewind ...`, and kubectl_complete-rewind for the shell completion of `kubectl rewind <Tab>`.
const (
	pluginBinary         = "kubectl-rewind"
	pluginCompleteBinary = "kubectl_complete-rewind"
)

// commandFor is the command the binary runs when invoked as argv0 with args: the kubectl plugin when
// its file is named kubectl-rewind (a symlink or a copy), the plugin's completion when it is named
// kubectl_complete-rewind, and agentrewind otherwise, where `agentrewind rewind` reaches the plugin's
// commands too.
func commandFor(argv0 string, args []string) *cobra.Command {
	var cmd *cobra.Command
	switch strings.TrimSuffix(filepath.Base(argv0), ".exe") {
	case pluginBinary:
		cmd = newKubectlRewindCommand(true)
		escapeAllErrors(cmd)
	case pluginCompleteBinary:
		cmd = newKubectlRewindCommand(true)
		escapeAllErrors(cmd)
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	default:
		cmd = newRootCommand() // its commands escape their errors already
		rewind := newKubectlRewindCommand(false)
		escapeAllErrors(rewind)
		cmd.AddCommand(rewind)
	}
	cmd.SetArgs(args)
	return cmd
}

// newKubectlRewindCommand is the kubectl plugin's command set: the root of kubectl-rewind (plugin) or
// the rewind command of agentrewind.
func newKubectlRewindCommand(plugin bool) *cobra.Command {
	name := "agentrewind rewind"
	cmd := &cobra.Command{
		Use:   "rewind",
		Short: "Fork, inspect and resume the agent sessions of a cluster, as the kubectl plugin does",
	}
	if plugin {
		name = "kubectl rewind"
		cmd.Use = pluginBinary
		cmd.Short = "Fork, inspect and resume recorded LLM-agent runs in the cluster"
		cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: name}
		cmd.SilenceUsage = true
	}
	cmd.Long = `Fork, inspect and resume the agent runs agentrewind recorded in the cluster.

The commands read and write the namespace's AgentSessions, ForkRuns and ResumePlans, found as kubectl
finds them: --kubeconfig, --context and -n/--namespace, else $KUBECONFIG and the current context.`
	cmd.Example = strings.ReplaceAll(`  # fork session triage-42 at step 6 with a new system prompt, and follow the run
  CMD fork triage-42 --at-step 6 --system-file prompt.txt --wait

  # the session's timeline, read from the store it lives in
  CMD inspect triage-42 --store s3://agentrewind/sessions

  # the pass/drift table of the replay suite "nightly"
  CMD suite status nightly

  # can the run be resumed, from where, and what to do next
  CMD resume triage-42`, "CMD", name)
	cmd.AddCommand(newKubectlForkCommand(), newKubectlInspectCommand(), newSuiteCommand(), newKubectlResumeCommand())
	if plugin {
		cmd.AddCommand(newVersionCommand())
	}
	interruptible(cmd)
	return cmd
}

// interruptible makes every command of the tree return once its context ends (main ends it on Ctrl-C
// and SIGTERM), even while a step that takes no context blocks: opening a FIFO no one writes, reading
// a terminal for --system-file -, the API discovery of a server that accepts a connection and never
// answers. Without it the signal is caught and nothing stops.
func interruptible(root *cobra.Command) {
	if run := root.RunE; run != nil {
		root.RunE = func(cmd *cobra.Command, args []string) error {
			return untilDone(cmd.Context(), func() error { return run(cmd, args) })
		}
	}
	for _, c := range root.Commands() {
		interruptible(c)
	}
}

// untilDone runs f and returns its error, or an error as soon as ctx ends, leaving f to the process's
// exit.
func untilDone(ctx context.Context, f func() error) error {
	if ctx == nil {
		return f()
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done: // finished at the same moment: its own error says more
			return err
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("gave up: %w", context.Cause(ctx))
		}
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
}
