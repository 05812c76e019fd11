package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/proxy"
	"github.com/agentrewind/agentrewind/internal/proxyargs"
)

// proxyOptions are the flags of agentrewind proxy.
type proxyOptions struct {
	job                             jobFlags
	listen, healthListen            string
	mode, provider                  string
	sessionDir, childID             string
	driftPolicy, overridesFile      string
	onMiss                          string
	goalTool, goalArgs              string
	atStep                          int64
	anthropicUpstream, openaiUp     string
	anthropicKeyFile, openaiKeyFile string
	tools, learnFrom                []string
	mcpServers                      []string
	vaultKeyFile, workspace         string
	workspaceHead                   string
	resultFile                      string
	shutdownTimeout                 time.Duration
}

func newProxyCommand() *cobra.Command {
	var o proxyOptions
	cmd := &cobra.Command{
		Use:   "proxy --mode record|replay|fork (--session-dir DIR | --store s3://B/P) [--session-id ID]",
		Short: "Record, replay or fork an agent run through Anthropic- or OpenAI-compatible HTTP: point the SDK's base URL here",
		Long: `Serve the model API an agent's SDK already speaks, and record, replay or fork the run behind it.

Endpoints: POST /v1/messages (JSON and SSE; --provider anthropic, the default), POST
/v1/chat/completions (JSON and SSE; --provider openai, SDK base URL <proxy>/v1), POST /v1/responses
(JSON and SSE; --provider openai-responses, same base URL, same upstream and key; in a fork, a
previous_response_id naming a recorded response goes upstream as the recorded conversation's input
items) and /v1/messages/count_tokens (recorded as the tool call
count_tokens@anthropic); POST /v1/tools/{name} (forwarded to --tool backends); GET
/v1/entropy/{clock,random,uuid}; POST /v1/ledger (agent-authored records; a SUSPEND parks the run
and makes the proxy mint the anchor); POST /v1/checkpoint (mints an ANCHOR of the latest turn and
parks nothing); /healthz, /readyz, /metrics. Errors use the provider's error JSON; a request the recording does not hold is 409 with
X-Rewind-Drift-Step, X-Rewind-Drift-Call-Site and X-Rewind-Nearest-Step. Bodies over 10 MiB get 413.

Lanes and call sites: X-Rewind-Lane: <name> puts a call in lane "0/<name>" (absent or "0": the main
lane "0"); X-Rewind-Site: <label> names its call site (default: anthropic.messages,
openai.chat_completions, openai.responses, anthropic.count_tokens, tool.<name>).

Modes: record forwards to the provider's upstream and records into a new session; replay serves the
session and has no upstream at all (--drift-policy strict|warn); fork serves the steps before
--at-step and forwards the rest with --overrides (system, model, params, requestPatches), recording a
child session. Replay and fork speak the API the session records. The provider key comes from
--anthropic-api-key-file or $ANTHROPIC_API_KEY (--openai-api-key-file or $OPENAI_API_KEY) and
replaces whatever the agent sends; without one the agent's own key is passed through. Either way it
is redacted wherever it appears, with every value of --learn-secrets-from.

When the run is stopped the proxy records an END saying so (Stopped): it cannot see how the agent
ended. SIGTERM or SIGINT stops taking requests, waits for those in flight (half of --shutdown-timeout, then
cuts them and records them as errors) and commits the session; with
--store it is then pushed, and a replay or fork writes its result to results/<job-uid>.json and the
termination message. A record run writes no task result: the committed session is its output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.job.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.listen, proxyargs.FlagListen, "127.0.0.1:8787", "address to serve the model API on (keep it on loopback beside the agent: in fork mode it spends the proxy's key)")
	fl.StringVar(&o.healthListen, proxyargs.FlagHealthListen, "", "address to serve only /healthz, /readyz and /metrics on, for probes from outside the pod (default: none; --listen serves them too)")
	fl.StringVar(&o.mode, proxyargs.FlagMode, "", "record, replay or fork")
	fl.StringVar(&o.provider, proxyargs.FlagProvider, "", "the model API a recording speaks: anthropic (the default when recording), openai (Chat Completions) or openai-responses; replay and fork take the session's, and refuse a different one given here")
	fl.StringVar(&o.sessionDir, "session-dir", "", "local directory of sessions, one subdirectory per session id (instead of --store)")
	fl.StringVar(&o.childID, "child-session-id", "", "fork: the child session's id (default <session-id>-fork-<at-step>)")
	fl.StringVar(&o.driftPolicy, "drift-policy", "strict", "replay and a fork's prefix: strict or warn")
	fl.Int64Var(&o.atStep, "at-step", -1, "fork: the first step that goes live")
	fl.StringVar(&o.overridesFile, "overrides", "", "fork: JSON or YAML file with system, model, params and requestPatches for the live tail")
	fl.StringVar(&o.onMiss, "on-miss", "Error", "fork: a tool call the recording does not hold stops the fork (Error) or gets a stub (Stub)")
	fl.StringVar(&o.goalTool, "goal-tool", "", "fork: the tool whose call marks the goal; the result says whether it was reached")
	fl.StringVar(&o.goalArgs, "goal-args", "", "fork: with --goal-tool, a JSON object that must be a subset of the call's arguments")
	fl.StringVar(&o.anthropicUpstream, proxyargs.FlagAnthropicUpstream, proxy.Anthropic.DefaultUpstream, "base URL of the Anthropic-compatible upstream")
	fl.StringVar(&o.openaiUp, proxyargs.FlagOpenAIUpstream, "https://api.openai.com", "base URL of the OpenAI-compatible upstream (POST /v1/chat/completions and /v1/responses are forwarded to <base>/v1/...)")
	fl.StringVar(&o.anthropicKeyFile, "anthropic-api-key-file", "", "file holding the Anthropic key the proxy sends (default $ANTHROPIC_API_KEY)")
	fl.StringVar(&o.openaiKeyFile, "openai-api-key-file", "", "file holding the OpenAI key the proxy sends (default $OPENAI_API_KEY)")
	fl.StringArrayVar(&o.tools, proxyargs.FlagTool, nil, "tool backend name=URL for POST /v1/tools/{name} (repeatable)")
	fl.StringArrayVar(&o.mcpServers, proxyargs.FlagMCPServer, nil, "MCP server name=URL (streamable HTTP) mounted at /mcp/{name}; its calls are recorded as tool events name/<method> (repeatable; a replay never calls the URL, and a fork's tail calls it live: give a fork or a replay the name alone to answer only from the recording)")
	fl.StringArrayVar(&o.learnFrom, proxyargs.FlagLearnSecretsFrom, nil, "file of secrets, one per line, or a directory (a mounted Secret) whose files are secrets (repeatable)")
	fl.StringVar(&o.vaultKeyFile, "vault-key-file", "", "key file sealing (record, fork) and opening (replay, fork) the vault of redacted secrets")
	fl.StringVar(&o.workspace, "workspace", "", "git work tree of the run: its HEAD is stamped as START and in SUSPEND records (from the Job, never the agent)")
	fl.StringVar(&o.workspaceHead, "workspace-head", "", "record: the commit the run starts from (40 or 64 hex digits), stamped as START when the proxy has no work tree (from the Job, never the agent)")
	fl.StringVar(&o.resultFile, "result", "", "also write the task result JSON to this file")
	fl.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "after SIGTERM, how long the session's commit waits for requests in flight: half for them to finish, then they are cut (recorded as errors)")
	return cmd
}

func (o *proxyOptions) validate() error {
	switch proxy.Mode(o.mode) {
	case proxy.Record, proxy.Replay, proxy.Fork:
	default:
		return fmt.Errorf("--mode %q: use record, replay or fork", o.mode)
	}
	if (o.sessionDir == "") == (o.job.store == "" && os.Getenv(envStore) == "") {
		return errors.New("give exactly one of --session-dir and --store (or $" + envStore + ")")
	}
	if o.mode != string(proxy.Record) && o.job.sessionID == "" {
		return fmt.Errorf("--session-id names the session to %s", o.mode)
	}
	if o.job.sessionID != "" {
		if err := blobstore.ValidateID(o.job.sessionID); err != nil {
			return fmt.Errorf("--session-id: %w", err)
		}
	}
	if o.provider != "" && !knownProvider(o.provider) {
		return fmt.Errorf("--provider %q: use anthropic, openai or openai-responses", o.provider)
	}
	if o.mode == string(proxy.Fork) && o.atStep < 0 {
		return errors.New("--at-step is required in fork mode")
	}
	if o.mode != string(proxy.Fork) && (o.atStep >= 0 || o.overridesFile != "" || o.childID != "" || o.goalTool != "") {
		return errors.New("--at-step, --overrides, --child-session-id and --goal-tool are for fork mode")
	}
	if o.goalArgs != "" && o.goalTool == "" {
		return errors.New("--goal-args needs --goal-tool")
	}
	if o.goalArgs != "" {
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(o.goalArgs), &args); err != nil || args == nil {
			return fmt.Errorf("--goal-args must be a JSON object: %q", o.goalArgs)
		}
	}
	if o.workspaceHead != "" {
		if o.mode != string(proxy.Record) {
			return errors.New("--workspace-head is for record mode: a replay or a fork stamps the recording's START")
		}
		if o.workspace != "" {
			return errors.New("give one of --workspace and --workspace-head")
		}
		if !commitSHA.MatchString(o.workspaceHead) {
			return fmt.Errorf("--workspace-head %q is not a commit: use its full 40 (SHA-1) or 64 (SHA-256) hex digits", o.workspaceHead)
		}
	}
	return nil
}

// knownProvider reports whether name is a model API the proxy speaks.
func knownProvider(name string) bool {
	for _, p := range proxy.Providers {
		if p.Name == name {
			return true
		}
	}
	return false
}

// commitSHA is a full git object name, SHA-1 or SHA-256.
var commitSHA = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

func (o *proxyOptions) run(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.job.jobUID == "" {
		o.job.jobUID = os.Getenv("JOB_UID")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts, err := o.options()
	if err != nil {
		return err
	}
	var store *blobstore.SessionStore
	tmp, err := os.MkdirTemp("", "agentrewind-proxy-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root := o.sessionDir
	if root == "" {
		root = tmp
		sctx, cancel := o.job.context(ctx)
		store, _, err = o.job.open(sctx, nil)
		cancel()
		if err != nil {
			return err
		}
	}
	if opts.Mode != proxy.Record {
		dir := filepath.Join(root, o.job.sessionID)
		if store != nil {
			sctx, cancel := o.job.context(ctx)
			_, err = store.Pull(sctx, o.job.sessionID, dir)
			cancel()
			if err != nil {
				return classify(fmt.Errorf("pulling session %s: %w", o.job.sessionID, err))
			}
		}
		if opts.Session, err = openSession(dir); err != nil {
			return err
		}
		// The session says which API it speaks; a flag is only ever checked against it.
		if rec := opts.Session.Meta.Provider; rec != "" && o.provider != "" && o.provider != rec {
			return fmt.Errorf("--provider %s: session %s records %s; leave --provider out to %s it as recorded", o.provider, o.job.sessionID, rec, o.mode)
		}
	}
	switch opts.Mode {
	case proxy.Record:
		if opts.ID == "" {
			opts.ID = newSessionID()
		}
		opts.Dir = filepath.Join(root, opts.ID)
	case proxy.Fork:
		if opts.ID == "" {
			opts.ID = fmt.Sprintf("%s-fork-%d", o.job.sessionID, o.atStep)
		}
		opts.Dir = filepath.Join(root, opts.ID)
	}
	started := time.Now().UTC()
	srv, err := proxy.New(opts, proxy.Providers...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	if o.healthListen != "" {
		hln, err := net.Listen("tcp", o.healthListen)
		if err != nil {
			return fmt.Errorf("--health-listen: %w", err)
		}
		health := &http.Server{Handler: srv.HealthHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = health.Serve(hln) }()
		defer health.Close()
		fmt.Fprintf(cmd.ErrOrStderr(), "agentrewind proxy serving probes on %s\n", hln.Addr())
	}
	// The bound addresses, not the flags (a port given as 0 is the one the system chose), printed once
	// every listener is bound: whoever reads this line can connect.
	fmt.Fprintf(cmd.ErrOrStderr(), "agentrewind proxy (%s) listening on %s\n", opts.Mode, ln.Addr())
	out := srv.Run(ctx) // within --shutdown-timeout of the signal
	// Run waited for (or cut) the calls in flight; what is left is answers being written.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout/2)
	_ = hs.Shutdown(sctx)
	cancel()
	return o.finish(cmd, store, opts, out, started)
}

// finish pushes a committed session and writes the run's result where the Job contract says.
func (o *proxyOptions) finish(cmd *cobra.Command, store *blobstore.SessionStore, opts proxy.Options, out *proxy.Outcome, started time.Time) error {
	ctx := context.WithoutCancel(cmd.Context())
	committed := out.Record != nil || out.Fork != nil
	var pushErr error
	if committed {
		fmt.Fprintf(cmd.ErrOrStderr(), "committed session %s in %s\n", opts.ID, opts.Dir)
		if store != nil {
			sctx, cancel := o.job.context(ctx)
			_, pushErr = store.Push(sctx, opts.Dir)
			cancel()
		}
	}
	if opts.Mode == proxy.Record {
		if out.Err != nil {
			return errors.Join(out.Err, pushErr)
		}
		if pushErr != nil {
			return fmt.Errorf("session %s was committed in %s but not pushed: %w", opts.ID, opts.Dir, pushErr)
		}
		return nil
	}
	res := &task.Result{APIVersion: task.APIVersion, JobUID: o.job.jobUID, StartedAt: started}
	var taskErr error
	reason := task.ReasonInternal
	switch opts.Mode {
	case proxy.Replay:
		res.Task = task.Replay
		var ok bool
		if res.Replay, ok = proxy.ReplayResult(o.job.sessionID, out.Replay, out.Err); !ok {
			taskErr = out.Err
		}
	case proxy.Fork:
		res.Task = task.Fork
		res.Fork = proxy.ForkResult(o.job.sessionID, o.atStep, out.Fork)
		if out.Fork == nil {
			taskErr = out.Err
		} else if out.Fork.Overrides != nil {
			// The fork halted where its overrides did not apply: it did not run as asked.
			taskErr, reason = out.Fork.Overrides, task.ReasonInvalidInput
		}
		if pushErr != nil {
			taskErr, reason = fmt.Errorf("the child session %s was committed but not pushed: %w", opts.ID, pushErr), task.ReasonStorageUnavailable
		}
	}
	run := &jobRun{flags: &o.job, result: res}
	if store != nil && o.job.jobUID != "" {
		run.store = store
	}
	if o.resultFile != "" {
		if err := o.writeResult(res, reason, taskErr); err != nil {
			return err
		}
	}
	if taskErr != nil {
		res.Replay, res.Fork = nil, nil
	}
	return run.finish(cmd, reason, taskErr)
}

// writeResult writes the result as finish will complete it, for a run without a store.
func (o *proxyOptions) writeResult(res *task.Result, reason task.FailureReason, taskErr error) error {
	r := *res
	r.FinishedAt, r.Outcome = time.Now().UTC(), task.Succeeded
	if taskErr != nil {
		r.Outcome, r.Failure, r.Replay, r.Fork = task.Failed, &task.Failure{Reason: reason, Message: taskErr.Error()}, nil, nil
	}
	data, err := task.Encode(&r)
	if err != nil {
		return err
	}
	return os.WriteFile(o.resultFile, data, 0o644)
}

// options turns the flags into the proxy's options, reading keys, secrets and overrides.
func (o *proxyOptions) options() (proxy.Options, error) {
	opts := proxy.Options{Mode: proxy.Mode(o.mode), Provider: o.provider, ID: o.childID, AtStep: o.atStep, ShutdownTimeout: o.shutdownTimeout,
		OnMiss: replay.OnMiss(o.onMiss), Workspace: o.workspace, Tools: map[string]string{}, APIKeys: map[string]string{},
		Upstreams: map[string]string{"anthropic": o.anthropicUpstream, "openai": o.openaiUp, "openai-responses": o.openaiUp}}
	if opts.Mode == proxy.Record {
		opts.ID = o.job.sessionID
	}
	opts.Config.WorkspaceHead = o.workspaceHead
	if o.goalTool != "" {
		opts.Goal = &replay.Goal{Tool: o.goalTool, ArgsMatch: json.RawMessage(o.goalArgs)}
	}
	switch strings.ToLower(o.driftPolicy) {
	case "strict":
		opts.DriftPolicy = replay.Strict
	case "warn":
		opts.DriftPolicy = replay.Warn
	default:
		return opts, fmt.Errorf("--drift-policy %q: use strict or warn", o.driftPolicy)
	}
	if opts.Mode != proxy.Replay {
		for provider, spec := range map[string][2]string{"anthropic": {o.anthropicKeyFile, "ANTHROPIC_API_KEY"}, "openai": {o.openaiKeyFile, "OPENAI_API_KEY"}} {
			key, err := readKey(spec[0], spec[1])
			if err != nil {
				return opts, err
			}
			if key != "" {
				opts.APIKeys[provider] = key
				if provider == "openai" {
					opts.APIKeys[proxy.OpenAIResponses.Name] = key // the Responses API takes the same key
				}
			}
		}
	}
	for i, t := range o.tools {
		name, url, ok := strings.Cut(t, "=")
		if !ok || !proxyargs.ToolName.MatchString(name) {
			// Not shown: a URL given without its name= may carry a password, and land in a pod's log.
			return opts, fmt.Errorf("--tool number %d has no valid name: use name=http(s)://host/path, the name 1 to 64 of A-Z a-z 0-9 . _ -", i+1)
		}
		if err := proxyargs.CheckToolURL(url); err != nil {
			return opts, fmt.Errorf("--tool %s: %w", name, err)
		}
		opts.Tools[name] = url
	}
	mcpServers, err := parseMCPServers(o.mcpServers, opts.Mode)
	if err != nil {
		return opts, err
	}
	opts.MCPServers = mcpServers
	for _, f := range o.learnFrom {
		secrets, err := readSecrets(f)
		if err != nil {
			return opts, fmt.Errorf("--learn-secrets-from: %w", err)
		}
		opts.Secrets = append(opts.Secrets, secrets...)
	}
	if o.vaultKeyFile != "" {
		opts.Keys = redact.FileKeyProvider{Path: o.vaultKeyFile}
	}
	if o.overridesFile != "" {
		ov, err := readOverrides(o.overridesFile)
		if err != nil {
			return opts, err
		}
		opts.Overrides = ov
	}
	return opts, nil
}

// readKey reads a provider key from a file, else from the environment.
func readKey(file, env string) (string, error) {
	if file == "" {
		return os.Getenv(env), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(data))
	if len(key) < replay.MinDeclaredSecretLen {
		return "", fmt.Errorf("%s holds no key", file)
	}
	return key, nil
}

// readSecrets reads secret values: the files of a directory (a mounted Secret; dot files are its
// bookkeeping), or the non-empty lines of a file.
func readSecrets(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			fi, err := os.Stat(filepath.Join(path, e.Name()))
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(path, e.Name()))
			if err != nil {
				return nil, err
			}
			if v := strings.TrimSpace(string(data)); len(v) >= replay.MinDeclaredSecretLen {
				out = append(out, v)
			}
		}
		return out, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v := strings.TrimSpace(sc.Text()); v != "" {
			out = append(out, v)
		}
	}
	return out, sc.Err()
}

// readOverrides reads a fork's overrides (the ForkRun's spec.overrides shape), JSON or YAML, strictly.
func readOverrides(path string) (replay.Overrides, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return replay.Overrides{}, err
	}
	doc, err := yaml.YAMLToJSON(data)
	if err != nil {
		return replay.Overrides{}, fmt.Errorf("--overrides %s: %w", path, err)
	}
	var in struct {
		System         *string                    `json:"system"`
		Model          *string                    `json:"model"`
		Params         map[string]json.RawMessage `json:"params"`
		RequestPatches []replay.PatchOperation    `json:"requestPatches"`
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return replay.Overrides{}, fmt.Errorf("--overrides %s: %w (fields: system, model, params, requestPatches)", path, err)
	}
	return replay.Overrides{System: in.System, Model: in.Model, Params: in.Params, RequestPatches: in.RequestPatches}, nil
}

// newSessionID names a recording nobody named.
func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("run-%s-%x", time.Now().UTC().Format("20060102-150405"), b)
}
