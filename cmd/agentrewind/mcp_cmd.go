package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/mcpproxy"
	"github.com/agentrewind/agentrewind/internal/proxy"
)

// mcpOptions are the flags of agentrewind mcp. The session, store, secret and fork flags are the
// proxy's, spelled the same way.
type mcpOptions struct {
	proxy      proxyOptions
	serverName string
}

func newMCPCommand() *cobra.Command {
	var o mcpOptions
	cmd := &cobra.Command{
		Use:   "mcp --mode record|replay|fork (--session-dir DIR | --store s3://B/P) [--server-name NAME] -- SERVER-COMMAND [ARGS...]",
		Short: "Stand in for a stdio MCP server: record its calls, replay them with no server, or fork them",
		Long: `Configure the agent to start this command instead of its MCP server: it speaks MCP (JSON-RPC over
stdin and stdout) to the agent.

record starts SERVER-COMMAND, relays every message both ways and records each request (initialize,
tools/list, tools/call, resources/read, prompts/get, ...) as a tool event named <server>/<method>
(e.g. weather/tools/call) with call site mcp.<server>; notifications and progress pass through, and a
request the server sends the agent (sampling, elicitation, roots) is recorded as a note. replay starts
nothing: SERVER-COMMAND may be absent from the machine; every request is answered from the session,
and one the session does not hold is a drift, answered with a JSON-RPC error (code -32050) naming the
step and the nearest recorded call. fork serves the steps before --at-step as replay does and relays
the tail to SERVER-COMMAND, started at the tail's first call (initialized as the agent initialized
this run), recording a child session (--goal-tool); without SERVER-COMMAND the tail is answered from
the session, and by --on-miss where it holds nothing.

A server that dies mid-call is recorded as that call's error (code -32051 to the agent), in replay
too. A frame that is not JSON-RPC gets a -32700/-32600 error naming the byte, and the run goes on.
When the agent closes stdin (or on SIGTERM) the server's stdin is closed and the session committed;
with --store it is then pushed, and replay and fork write their result as the proxy does.
Nothing but MCP is written to stdout; diagnostics go to stderr.`,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	p := &o.proxy
	p.job.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.serverName, "server-name", "", "the server's name in tool names and call sites (default: the command's base name)")
	fl.StringVar(&p.mode, "mode", "", "record, replay or fork")
	fl.StringVar(&p.sessionDir, "session-dir", "", "local directory of sessions, one subdirectory per session id (instead of --store)")
	fl.StringVar(&p.childID, "child-session-id", "", "fork: the child session's id (default <session-id>-fork-<at-step>)")
	fl.StringVar(&p.driftPolicy, "drift-policy", "strict", "replay and a fork's prefix: strict or warn")
	fl.Int64Var(&p.atStep, "at-step", -1, "fork: the first step of the tail")
	fl.StringVar(&p.onMiss, "on-miss", "Error", "fork: a call the recording does not hold stops the fork (Error) or gets a stub (Stub)")
	fl.StringVar(&p.goalTool, "goal-tool", "", "fork: the tool event name whose call marks the goal (e.g. weather/tools/call)")
	fl.StringVar(&p.goalArgs, "goal-args", "", "fork: with --goal-tool, a JSON object that must be a subset of the call's arguments")
	fl.StringArrayVar(&p.learnFrom, "learn-secrets-from", nil, "file of secrets, one per line, or a directory (a mounted Secret) whose files are secrets (repeatable)")
	fl.StringVar(&p.vaultKeyFile, "vault-key-file", "", "key file sealing (record, fork) and opening (replay, fork) the vault of redacted secrets")
	fl.StringVar(&p.resultFile, "result", "", "also write the task result JSON to this file (replay, fork)")
	fl.DurationVar(&p.shutdownTimeout, "shutdown-timeout", 10*time.Second, "once the agent has gone: half for calls in flight, half for the server to exit after its stdin closed")
	return cmd
}

// validate checks the flags and the server command, and settles the server's name.
func (o *mcpOptions) validate(args []string) error {
	if err := o.proxy.validate(); err != nil {
		return err
	}
	if o.proxy.mode == string(proxy.Record) && len(args) == 0 {
		return errors.New("record mode needs the server command after --")
	}
	if o.serverName == "" && len(args) > 0 {
		o.serverName = filepath.Base(args[0])
	}
	if o.serverName == "" {
		return errors.New("--server-name is required when no server command is given")
	}
	if !mcp.ServerName.MatchString(o.serverName) {
		return fmt.Errorf("--server-name %q: use 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit", o.serverName)
	}
	return nil
}

func (o *mcpOptions) run(cmd *cobra.Command, args []string) error {
	if err := o.validate(args); err != nil {
		return err
	}
	p := &o.proxy
	if p.job.jobUID == "" {
		p.job.jobUID = os.Getenv("JOB_UID")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	popts, err := p.options() // the proxy's reading of secrets, vault key, drift policy, goal
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "agentrewind-mcp-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root := p.sessionDir
	var store *blobstore.SessionStore
	if root == "" {
		root = tmp
		sctx, cancel := p.job.context(ctx)
		store, _, err = p.job.open(sctx, nil)
		cancel()
		if err != nil {
			return err
		}
	}
	opts := mcpproxy.StdioOptions{RunOptions: mcpproxy.RunOptions{Mode: mcpproxy.Mode(p.mode), Server: o.serverName, ID: popts.ID,
		DriftPolicy: popts.DriftPolicy, AtStep: p.atStep, OnMiss: popts.OnMiss, Goal: popts.Goal},
		Command: args, ServerStderr: cmd.ErrOrStderr(), ShutdownTimeout: p.shutdownTimeout}
	opts.Config.Secrets = popts.Secrets
	if p.vaultKeyFile != "" {
		opts.Config.Keys = redact.FileKeyProvider{Path: p.vaultKeyFile}
	}
	stderr := cmd.ErrOrStderr()
	opts.Config.Logf = func(format string, a ...any) { fmt.Fprintf(stderr, "agentrewind mcp: "+format+"\n", a...) }
	if opts.Mode != mcpproxy.Record {
		dir := filepath.Join(root, p.job.sessionID)
		if store != nil {
			sctx, cancel := p.job.context(ctx)
			_, err = store.Pull(sctx, p.job.sessionID, dir)
			cancel()
			if err != nil {
				return classify(fmt.Errorf("pulling session %s: %w", p.job.sessionID, err))
			}
		}
		if opts.Session, err = openSession(dir); err != nil {
			return err
		}
	}
	switch opts.Mode {
	case mcpproxy.Record:
		if opts.ID == "" {
			opts.ID = newSessionID()
		}
	case mcpproxy.Fork:
		if opts.ID == "" {
			opts.ID = fmt.Sprintf("%s-fork-%d", p.job.sessionID, p.atStep)
		}
	}
	opts.Dir = filepath.Join(root, opts.ID)
	started := time.Now().UTC()
	out := mcpproxy.ServeStdio(ctx, opts, cmd.InOrStdin(), cmd.OutOrStdout())
	popts.Mode, popts.ID, popts.Dir = proxy.Mode(p.mode), opts.ID, opts.Dir
	return p.finish(cmd, store, popts, &proxy.Outcome{Mode: popts.Mode, Record: out.Record, Replay: out.Replay, Fork: out.Fork, Err: out.Err}, started)
}
