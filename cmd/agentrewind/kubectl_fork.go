package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
)

// Exit codes of fork --wait beyond exitError (1) and exitDrift (3), so a script tells the ways a run
// ends apart.
const (
	exitGoalMissed = 4
	exitRunFailed  = 5
)

// maxSystemPrompt is the CRD's bound on spec.fork.overrides.system, in characters.
const maxSystemPrompt = 65536

// maxSystemPromptBytes is the most --system-file is read of: a character is at most 4 bytes of UTF-8,
// so a file longer than this holds more characters than a prompt may, and /dev/zero or a pipe that
// never ends is refused after it instead of read into memory without end.
const maxSystemPromptBytes = 4 * maxSystemPrompt

// watchRetryDelay is the least time between two watches of fork --wait: a watch the server (or a
// proxy) closes at once is opened again after it, not in a busy loop of reads and watches.
var watchRetryDelay = time.Second

// maxForkRunName keeps a ForkRun's name a valid label value: its Job's pods are labelled with it.
const maxForkRunName = validation.LabelValueMaxLength

// forkOptions are the flags and argument of kubectl rewind fork.
type forkOptions struct {
	kubectlFlags
	session, name, mode, suite                  string
	atStep                                      int64
	atStepSet                                   bool
	checkpoint, systemFile, model, onMiss       string
	goalTool, goalArgs                          string
	agentImage, anthropicKey, openAIKey, output string
	wait                                        bool
	timeout                                     time.Duration
}

func newKubectlForkCommand() *cobra.Command {
	var o forkOptions
	cmd := &cobra.Command{
		Use:   "fork SESSION (--at-step N | --checkpoint NAME) [--system-file F] [--wait]",
		Short: "Fork a recorded session at a step with a new system prompt (or replay it), and follow the run",
		Long: `Create a ForkRun of the AgentSession SESSION: the steps before --at-step are served from the
recording, the rest go live with the overrides (--system-file, --model). With --mode Replay the whole
session is replayed with zero live calls instead, as a regression test. It prints the ForkRun's name.

The ForkRun runs the agent the session recorded with (its spec.agent), with the image --agent-image
names if given, and the session's provider keys unless --anthropic-key or --openai-key name others.
The system prompt file is sent byte for byte ("-" reads it from stdin).

With --wait it follows the run: each change of its state goes to stderr, and once it finished, a
summary (outcome, whether it reached its goal, where it diverged, tokens and cost) to stdout, or
with -o json|yaml the summary as a document. Without --wait, -o json|yaml prints the created ForkRun.

Exit codes: 0 when the ForkRun was created (and with --wait, passed, completed or reached its goal);
1 on bad input, when the cluster cannot be read or written, or when --timeout passed before the run
finished (it goes on running); with --wait, 3 when the run diverged from the recording, 4 when it
finished without reaching its goal, 5 when it failed or cannot run (Stalled: its message says why).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(&o.kubectlFlags, sessionNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.session = args[0]
			o.atStepSet = cmd.Flags().Changed("at-step")
			if err := o.validate(); err != nil {
				return err
			}
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), c, ns, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.atStep, "at-step", -1, "the first step that goes live: the steps before it are served from the recording (kubectl rewind inspect lists them)")
	f.StringVar(&o.checkpoint, "checkpoint", "", "fork from this Checkpoint of the session instead of --at-step: its workspace is restored, then the run goes live at its step")
	f.StringVar(&o.systemFile, "system-file", "", "a file holding the system prompt of every live model request (\"-\" reads stdin)")
	f.StringVar(&o.model, "model", "", "the model of every live model request")
	f.StringVar(&o.mode, "mode", string(v1alpha1.ModeFork), "Fork (go live at --at-step) or Replay (the whole session, zero live calls)")
	f.StringVar(&o.name, "name", "", "the ForkRun's name (default: SESSION-fork- or SESSION-replay- and a random suffix)")
	f.StringVar(&o.suite, "suite", "", "label the ForkRun into this replay suite ("+LabelSuite+"), which suite status reports")
	f.StringVar(&o.agentImage, "agent-image", "", "run this agent image instead of the one the session recorded with")
	f.StringVar(&o.onMiss, "on-miss", "", "how a tool call the recording does not hold is answered: Error (the default) or Stub")
	f.StringVar(&o.goalTool, "goal-tool", "", "the tool call that marks the fork a success")
	f.StringVar(&o.goalArgs, "goal-args", "", "a JSON object the goal tool call's arguments must contain, such as '{\"label\":\"bug\"}'")
	f.StringVar(&o.anthropicKey, "anthropic-key", "", "SECRET/KEY: the Secret key holding the Anthropic API key for the live tail (default: the session's)")
	f.StringVar(&o.openAIKey, "openai-key", "", "SECRET/KEY: the Secret key holding the OpenAI API key for the live tail (default: the session's)")
	f.BoolVar(&o.wait, "wait", false, "follow the run until it finished, and exit with its outcome")
	f.DurationVar(&o.timeout, "timeout", time.Hour, "with --wait, how long to wait for the run to finish")
	o.kubectlFlags.register(cmd)
	outputFlagYAML(cmd, &o.output)
	_ = cmd.RegisterFlagCompletionFunc("mode", fixedCompletion(string(v1alpha1.ModeFork), string(v1alpha1.ModeReplay)))
	_ = cmd.RegisterFlagCompletionFunc("on-miss", fixedCompletion(string(v1alpha1.ToolMissError), string(v1alpha1.ToolMissStub)))
	cmd.MarkFlagsMutuallyExclusive("at-step", "checkpoint")
	return cmd
}

// validate checks the flags that need no cluster, naming the flag at fault.
func (o *forkOptions) validate() error {
	if err := checkOutputYAML(o.output); err != nil {
		return err
	}
	if err := checkObjectName("SESSION", o.session); err != nil {
		return err
	}
	if o.checkpoint != "" {
		if err := checkObjectName("--checkpoint", o.checkpoint); err != nil {
			return err
		}
	}
	switch {
	case strings.EqualFold(o.mode, string(v1alpha1.ModeFork)):
		o.mode = string(v1alpha1.ModeFork)
	case strings.EqualFold(o.mode, string(v1alpha1.ModeReplay)):
		o.mode = string(v1alpha1.ModeReplay)
	default:
		return fmt.Errorf("--mode %q: use Fork or Replay", o.mode)
	}
	if o.mode == string(v1alpha1.ModeReplay) {
		forkOnly := []struct {
			flag string
			set  bool
		}{{"--at-step", o.atStepSet}, {"--checkpoint", o.checkpoint != ""}, {"--system-file", o.systemFile != ""}, {"--model", o.model != ""},
			{"--on-miss", o.onMiss != ""}, {"--goal-tool", o.goalTool != ""}, {"--goal-args", o.goalArgs != ""},
			{"--anthropic-key", o.anthropicKey != ""}, {"--openai-key", o.openAIKey != ""}}
		for _, f := range forkOnly {
			if f.set {
				return fmt.Errorf("%s is for --mode Fork: a replay serves the whole session from the recording and never goes live", f.flag)
			}
		}
	} else if !o.atStepSet && o.checkpoint == "" {
		return errors.New("a fork needs --at-step N (the first step that goes live; kubectl rewind inspect lists the steps) or --checkpoint NAME")
	}
	if o.atStepSet && o.atStep < 0 {
		return fmt.Errorf("--at-step %d: a step is 0 or more", o.atStep)
	}
	if o.onMiss != "" && o.onMiss != string(v1alpha1.ToolMissError) && o.onMiss != string(v1alpha1.ToolMissStub) {
		return fmt.Errorf("--on-miss %q: use Error or Stub", o.onMiss)
	}
	if o.goalArgs != "" {
		if o.goalTool == "" {
			return errors.New("--goal-args needs --goal-tool: the arguments are those of the goal tool's call")
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(o.goalArgs), &obj); err != nil || obj == nil {
			return fmt.Errorf("--goal-args must be a JSON object, such as '{\"label\":\"bug\"}'")
		}
	}
	if o.name != "" {
		if msgs := validation.IsDNS1123Subdomain(o.name); len(msgs) > 0 {
			return fmt.Errorf("--name %q is not a valid object name: %s", o.name, strings.Join(msgs, "; "))
		}
		if len(o.name) > maxForkRunName {
			return fmt.Errorf("--name %q is %d characters: a ForkRun's name labels its Job's pods, so at most %d", o.name, len(o.name), maxForkRunName)
		}
	}
	if o.wait && o.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	return nil
}

// secretKeyFlag reads a SECRET/KEY flag.
func secretKeyFlag(flag, value string) (v1alpha1.SecretKeyReference, error) {
	name, key, ok := strings.Cut(value, "/")
	if !ok || name == "" || key == "" || strings.Contains(key, "/") {
		return v1alpha1.SecretKeyReference{}, fmt.Errorf("%s %q: write it SECRET/KEY, the Secret's name and the key holding the API key", flag, value)
	}
	return v1alpha1.SecretKeyReference{Name: name, Key: key}, nil
}

// readSystemPrompt reads --system-file, or stdin for "-".
func (o *forkOptions) readSystemPrompt(stdin io.Reader) (string, error) {
	src := stdin
	if o.systemFile != "-" {
		f, err := os.Open(o.systemFile)
		if err != nil {
			return "", fmt.Errorf("--system-file: reading the system prompt: %w", err)
		}
		defer func() { _ = f.Close() }()
		src = f
	}
	data, err := io.ReadAll(io.LimitReader(src, maxSystemPromptBytes+1))
	if err != nil {
		return "", fmt.Errorf("--system-file: reading the system prompt: %w", err)
	}
	switch n := utf8.RuneCount(data); {
	case len(data) > maxSystemPromptBytes:
		return "", fmt.Errorf("--system-file %s holds more than %d characters; a system prompt override holds at most %d", o.systemFile, maxSystemPrompt, maxSystemPrompt)
	case !utf8.Valid(data):
		return "", fmt.Errorf("--system-file %s is not UTF-8 text", o.systemFile)
	case n == 0:
		return "", fmt.Errorf("--system-file %s is empty: write the new system prompt into it", o.systemFile)
	case n > maxSystemPrompt:
		return "", fmt.Errorf("--system-file %s holds %d characters; a system prompt override holds at most %d", o.systemFile, n, maxSystemPrompt)
	}
	return string(data), nil
}

// forkRunFor builds the ForkRun the flags ask for, of session s. Whatever the session decides (its
// agent, its provider keys, its length) is taken from it, and a step past its end is refused here.
func (o *forkOptions) forkRunFor(s *v1alpha1.AgentSession, system string, warn io.Writer) (*v1alpha1.ForkRun, error) {
	fr := &v1alpha1.ForkRun{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: o.name},
		Spec: v1alpha1.ForkRunSpec{SessionRef: v1alpha1.LocalObjectReference{Name: s.Name}, Mode: v1alpha1.ForkMode(o.mode)}}
	if o.name == "" {
		fr.GenerateName = generatedPrefix(s.Name, strings.ToLower(o.mode))
	}
	if o.suite != "" {
		if msgs := validation.IsValidLabelValue(o.suite); len(msgs) > 0 {
			return nil, fmt.Errorf("--suite %q cannot be a label value: %s", o.suite, strings.Join(msgs, "; "))
		}
		fr.Labels = map[string]string{LabelSuite: o.suite}
	}
	switch {
	case o.agentImage != "":
		agent := s.Spec.Agent.DeepCopy()
		agent.Image = o.agentImage
		fr.Spec.Agent = *agent
	case s.Spec.Agent.Image == "":
		return nil, fmt.Errorf("AgentSession %s has no spec.agent to run again: pass --agent-image IMAGE", s.Name)
	}
	if fr.Spec.Mode == v1alpha1.ModeReplay {
		return fr, nil
	}

	f := &fr.Spec.Fork
	if o.checkpoint != "" {
		f.CheckpointRef = v1alpha1.LocalObjectReference{Name: o.checkpoint}
	} else {
		steps := s.Status.Recording.Steps
		if steps == nil {
			fmt.Fprintf(warn, "warning: AgentSession %s is not verified yet, so --at-step %d cannot be checked against its length; the ForkRun waits for it\n", s.Name, o.atStep)
		} else if o.atStep >= *steps {
			return nil, fmt.Errorf("--at-step %d is past the end of session %s: it has %d steps (0 to %d); kubectl rewind inspect %s lists them",
				o.atStep, s.Name, *steps, *steps-1, s.Name)
		}
		f.AtStep = &o.atStep
	}
	f.Overrides = v1alpha1.ForkOverrides{System: system, Model: o.model}
	f.Tools.OnMiss = v1alpha1.ToolOnMiss(o.onMiss)
	f.ProviderKeys = s.Spec.ProviderKeys
	if o.anthropicKey != "" || o.openAIKey != "" {
		f.ProviderKeys = v1alpha1.ProviderKeys{}
		var err error
		if o.anthropicKey != "" {
			if f.ProviderKeys.Anthropic, err = secretKeyFlag("--anthropic-key", o.anthropicKey); err != nil {
				return nil, err
			}
		}
		if o.openAIKey != "" {
			if f.ProviderKeys.OpenAI, err = secretKeyFlag("--openai-key", o.openAIKey); err != nil {
				return nil, err
			}
		}
	}
	if f.ProviderKeys == (v1alpha1.ProviderKeys{}) {
		fmt.Fprintf(warn, "warning: AgentSession %s names no provider keys, so the live tail calls the provider without one; pass --anthropic-key or --openai-key SECRET/KEY\n", s.Name)
	}
	if o.goalTool != "" {
		fr.Spec.Goal.Tool = o.goalTool
		if o.goalArgs != "" {
			fr.Spec.Goal.ArgsMatch = &apiextensionsv1.JSON{Raw: []byte(o.goalArgs)}
		}
	}
	return fr, nil
}

// generatedPrefix is a generateName for a ForkRun of session: the API server adds 5 characters, and
// the whole must stay a label value.
func generatedPrefix(session, mode string) string {
	prefix := session + "-" + mode + "-"
	if limit := maxForkRunName - 5; len(prefix) > limit {
		prefix = strings.TrimRight(prefix[:limit-1], "-.") + "-"
	}
	return prefix
}

func (o *forkOptions) run(ctx context.Context, c client.WithWatch, ns string, stdin io.Reader, out, errOut io.Writer) error {
	var system string
	if o.systemFile != "" {
		var err error
		if system, err = o.readSystemPrompt(stdin); err != nil {
			return err
		}
	}
	var s v1alpha1.AgentSession
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.session}, &s); err != nil {
		return sessionGetError(err, o.session, ns)
	}
	fr, err := o.forkRunFor(&s, system, errOut)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, fr); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("ForkRun %s already exists in namespace %s: pick another --name, or delete it with kubectl delete forkrun %s -n %s", fr.Name, ns, fr.Name, ns)
		}
		return fmt.Errorf("creating the ForkRun of session %s in namespace %s: %w", o.session, ns, err)
	}
	created := "forkrun.agentrewind.io/" + fr.Name + " created"
	if !o.wait {
		if structured(o.output) {
			fmt.Fprintln(errOut, created)
			return writeDocument(out, o.output, withForkRunKind(fr))
		}
		_, err := fmt.Fprintln(out, created)
		return err
	}
	if structured(o.output) {
		fmt.Fprintln(errOut, created)
	} else {
		fmt.Fprintln(out, created)
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	final, err := waitForkRun(wctx, c, client.ObjectKeyFromObject(fr), errOut)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("ForkRun %s has not finished within --timeout %s; it goes on running: follow it with kubectl get forkrun %s -n %s -w", fr.Name, o.timeout, fr.Name, ns)
		}
		return err
	}
	sum := summarizeForkRun(final)
	if structured(o.output) {
		err = writeDocument(out, o.output, sum)
	} else {
		err = printForkSummary(out, sum)
	}
	if err != nil {
		return err
	}
	return sum.exitError()
}

// sessionGetError says what a failed read of AgentSession name means.
func sessionGetError(err error, name, ns string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("AgentSession %s not found in namespace %s: kubectl get agentsessions -n %s lists them (or pass -n)", name, ns, ns)
	}
	return fmt.Errorf("reading AgentSession %s in namespace %s: %w", name, ns, err)
}

// withForkRunKind sets the kind a typed client leaves out, so a printed ForkRun can be applied again.
func withForkRunKind(fr *v1alpha1.ForkRun) *v1alpha1.ForkRun {
	fr.APIVersion, fr.Kind = v1alpha1.GroupVersion.String(), "ForkRun"
	return fr
}

// forkRunFinished says whether the ForkRun's latest generation finished: it has an outcome, or it is
// Stalled (a spec that cannot run stalls it without one).
func forkRunFinished(fr *v1alpha1.ForkRun) bool {
	if fr.Status.Outcome != "" && fr.Status.ObservedGeneration == fr.Generation {
		return true
	}
	c := meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == fr.Generation
}

// forkRunState is the one line of where a ForkRun stands: its outcome once it finished, else the
// reason and message of the condition that says what is going on.
func forkRunState(fr *v1alpha1.ForkRun) string {
	for _, typ := range []string{v1alpha1.ConditionStalled, v1alpha1.ConditionReconciling, v1alpha1.ConditionReady} {
		c := meta.FindStatusCondition(fr.Status.Conditions, typ)
		if c == nil || (c.Status != metav1.ConditionTrue && typ != v1alpha1.ConditionReady) {
			continue
		}
		state := c.Reason
		if typ == v1alpha1.ConditionStalled {
			state = "Stalled " + c.Reason
		}
		if c.Message != "" {
			state += ": " + c.Message
		}
		return state
	}
	return "Pending: the operator has not picked the ForkRun up yet"
}

// waitForkRun follows the ForkRun at key with a watch until it finished, writing each change of its
// state to progress. A watch the server closes (a timeout, a compaction) is opened again from a fresh
// read, so no change is missed.
func waitForkRun(ctx context.Context, c client.WithWatch, key client.ObjectKey, progress io.Writer) (*v1alpha1.ForkRun, error) {
	last := ""
	seen := func(fr *v1alpha1.ForkRun) bool {
		if state := forkRunState(fr); state != last {
			last = state
			fmt.Fprintf(progress, "forkrun/%s: %s\n", fr.Name, printable(state))
		}
		return forkRunFinished(fr)
	}
	for {
		var fr v1alpha1.ForkRun
		if err := c.Get(ctx, key, &fr); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("ForkRun %s was deleted before it finished", key.Name)
			}
			return nil, fmt.Errorf("reading ForkRun %s: %w", key.Name, err)
		}
		if seen(&fr) {
			return &fr, nil
		}
		w, err := c.Watch(ctx, &v1alpha1.ForkRunList{}, &client.ListOptions{Namespace: key.Namespace,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name), Raw: &metav1.ListOptions{ResourceVersion: fr.ResourceVersion}})
		if err != nil {
			return nil, fmt.Errorf("watching ForkRun %s: %w", key.Name, err)
		}
		opened := time.Now()
		done, err := followWatch(w, seen)
		w.Stop()
		if done != nil || err != nil {
			return done, err
		}
		if wait := watchRetryDelay - time.Since(opened); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// followWatch reads a watch of one ForkRun until it finished (returned), was deleted (an error) or
// the watch ended (nil, nil: read again and watch anew).
func followWatch(w watch.Interface, seen func(*v1alpha1.ForkRun) bool) (*v1alpha1.ForkRun, error) {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			if fr, ok := ev.Object.(*v1alpha1.ForkRun); ok && seen(fr) {
				return fr, nil
			}
		case watch.Deleted:
			if fr, ok := ev.Object.(*v1alpha1.ForkRun); ok {
				return nil, fmt.Errorf("ForkRun %s was deleted before it finished", fr.Name)
			}
		case watch.Error:
			return nil, nil // such as a resource version too old: start over from a fresh read
		}
	}
	return nil, nil
}

// forkSummary is how a finished ForkRun ended, as fork --wait reports it.
type forkSummary struct {
	ForkRun         string               `json:"forkRun"`
	Namespace       string               `json:"namespace"`
	Session         string               `json:"session"`
	Mode            v1alpha1.ForkMode    `json:"mode"`
	AtStep          *int64               `json:"atStep,omitempty"`
	Outcome         v1alpha1.ForkOutcome `json:"outcome,omitempty"`
	Ready           string               `json:"ready"`
	Reason          string               `json:"reason,omitempty"`
	Message         string               `json:"message,omitempty"`
	ReachedGoal     *bool                `json:"reachedGoal,omitempty"`
	DivergedAtStep  *int64               `json:"divergedAtStep,omitempty"`
	FirstDivergence *v1alpha1.Divergence `json:"firstDivergence,omitempty"`
	Divergences     *int64               `json:"divergences,omitempty"`
	Usage           v1alpha1.ForkUsage   `json:"usage,omitzero"`
	Provenance      v1alpha1.Provenance  `json:"provenance,omitzero"`
	ChildSession    string               `json:"childSession,omitempty"`
	goal            string               // the goal tool, if the spec set one
}

func summarizeForkRun(fr *v1alpha1.ForkRun) forkSummary {
	st := fr.Status
	sum := forkSummary{ForkRun: fr.Name, Namespace: fr.Namespace, Session: fr.Spec.SessionRef.Name, Mode: fr.Spec.Mode,
		AtStep: fr.Spec.Fork.AtStep, Outcome: st.Outcome, Ready: "Unknown", Divergences: st.Divergences, Usage: st.Usage,
		Provenance: st.Provenance, ChildSession: st.ChildSessionRef.Name, goal: fr.Spec.Goal.Tool}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
		sum.Ready, sum.Reason, sum.Message = string(c.Status), c.Reason, c.Message
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		sum.Reason, sum.Message = c.Reason, c.Message
	}
	switch st.Outcome {
	case v1alpha1.OutcomeGoalReached:
		sum.ReachedGoal = new(true)
	case v1alpha1.OutcomeGoalMissed:
		sum.ReachedGoal = new(false)
	}
	if d := st.FirstDivergence; d.Step != nil {
		sum.FirstDivergence = &d
		if st.Outcome == v1alpha1.OutcomeDiverged {
			sum.DivergedAtStep = d.Step
		}
	}
	return sum
}

// exitError is the error, with its exit code, that a finished run's outcome gives; nil when healthy.
func (s forkSummary) exitError() error {
	switch {
	case apimap.Healthy(s.Outcome):
		return nil
	case s.Outcome == v1alpha1.OutcomeDiverged:
		return &codedError{exitDrift, fmt.Errorf("ForkRun %s diverged from the recording", s.ForkRun)}
	case s.Outcome == v1alpha1.OutcomeGoalMissed:
		return &codedError{exitGoalMissed, fmt.Errorf("ForkRun %s finished without reaching its goal", s.ForkRun)}
	}
	return &codedError{exitRunFailed, fmt.Errorf("ForkRun %s failed: %s", s.ForkRun, orDash(s.Message))}
}

func printForkSummary(out io.Writer, s forkSummary) error {
	outcome := string(s.Outcome)
	if outcome == "" {
		outcome = "Stalled"
	}
	if _, err := fmt.Fprintf(out, "forkrun/%s: %s (%s)\n", s.ForkRun, outcome, orDash(s.Reason)); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	from := "whole session, replayed"
	if s.AtStep != nil {
		from = fmt.Sprintf("forked at step %d", *s.AtStep)
	} else if s.Mode == v1alpha1.ModeFork {
		from = "forked from a Checkpoint"
	}
	fmt.Fprintf(w, "session:\t%s, %s\n", s.Session, from)
	goal := "no goal set"
	switch {
	case s.ReachedGoal != nil && *s.ReachedGoal:
		goal = "yes (tool " + printableCell(s.goal) + ")"
	case s.ReachedGoal != nil:
		goal = "no (tool " + printableCell(s.goal) + " was not called as the goal asks)"
	case s.goal != "":
		goal = "not evaluated"
	}
	fmt.Fprintf(w, "reached goal:\t%s\n", goal)
	diverged := "no"
	if d := s.FirstDivergence; d != nil {
		diverged = fmt.Sprintf("step %d: %s %s at %s", *d.Step, d.Kind, d.Reason, printableCell(orDash(d.ActualCallSite)))
		if s.DivergedAtStep == nil {
			diverged += fmt.Sprintf(" (tolerated; %d in all)", deref(s.Divergences))
		}
	}
	fmt.Fprintf(w, "diverged:\t%s\n", diverged)
	p := s.Provenance
	fmt.Fprintf(w, "answers:\t%d recorded, %d live, %d stubbed\n", deref(p.Recorded), deref(p.Live), deref(p.Stub))
	fmt.Fprintf(w, "tokens live:\t%s\n", usageText(s.Usage.Live))
	fmt.Fprintf(w, "tokens replayed:\t%s (recorded, not spent again)\n", usageText(s.Usage.Replayed))
	if s.ChildSession != "" {
		fmt.Fprintf(w, "child session:\t%s\n", s.ChildSession)
	}
	if s.Message != "" {
		fmt.Fprintf(w, "message:\t%s\n", printableCell(s.Message))
	}
	return w.Flush()
}

// usageText is a usage's tokens and cost; a cost the operator could not price is "unknown" with the
// models it lacks, never $0.
func usageText(u v1alpha1.Usage) string {
	cost := "cost unknown"
	switch {
	case u.CostMicroUSD != nil:
		cost = fmt.Sprintf("$%d.%04d", *u.CostMicroUSD/1_000_000, (*u.CostMicroUSD%1_000_000+50)/100)
	case len(u.UnpricedModels) > 0:
		cost = "cost unknown: no price for " + printableCell(strings.Join(u.UnpricedModels, ", ")) + " (the chart's prices value adds one)"
	}
	return fmt.Sprintf("%d (%d in, %d out), %s", deref(u.TotalTokens), deref(u.InputTokens), deref(u.OutputTokens), cost)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
