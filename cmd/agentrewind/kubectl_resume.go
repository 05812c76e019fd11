package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// resumeOptions are the flags and argument of kubectl rewind resume.
type resumeOptions struct {
	kubectlFlags
	session, plan, output string
}

func newKubectlResumeCommand() *cobra.Command {
	var o resumeOptions
	cmd := &cobra.Command{
		Use:   "resume SESSION [--plan NAME]",
		Short: "Say whether a session's run can be resumed, from where, and what to do next (its ResumePlan in words)",
		Long: `Show the ResumePlan of the AgentSession SESSION in words: the verdict and why, where to re-enter the
run, which declared steps are verified and which remain, whether to rewind the agent's transcript and
to which turn, whether the garbage collector keeps the session, and what to do next.

The operator makes a ResumePlan named like the session once the session is verified; a ResumePlan made
by hand (with git evidence) for the same session is picked with --plan. With -o json|yaml the command
prints the ResumePlan's status as it is.

Exit codes: 0 when the ResumePlan has a verdict; 1 when there is none yet (the plan is still being
computed, or stalled), or the session or its ResumePlan cannot be found.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(&o.kubectlFlags, sessionNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.session = args[0]
			if err := checkOutputYAML(o.output); err != nil {
				return err
			}
			if err := checkObjectName("SESSION", o.session); err != nil {
				return err
			}
			if o.plan != "" {
				if err := checkObjectName("--plan", o.plan); err != nil {
					return err
				}
			}
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), c, ns, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.plan, "plan", "", "the ResumePlan to show, when the session has several (default: the operator's, named like the session)")
	o.kubectlFlags.register(cmd)
	outputFlagYAML(cmd, &o.output)
	return cmd
}

// findPlan finds the ResumePlan of the session: --plan, else the one named like it (the operator's),
// else the only one whose sessionRef names it.
func (o *resumeOptions) findPlan(ctx context.Context, c client.Client, ns string) (*v1alpha1.ResumePlan, error) {
	var rp v1alpha1.ResumePlan
	name := o.plan
	if name == "" {
		name = o.session
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rp)
	switch {
	case err == nil && rp.Spec.SessionRef.Name == o.session:
		return &rp, nil
	case err == nil && o.plan != "":
		return nil, fmt.Errorf("ResumePlan %s judges session %s, not %s", o.plan, rp.Spec.SessionRef.Name, o.session)
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading ResumePlan %s in namespace %s: %w", name, ns, err)
	case o.plan != "":
		return nil, fmt.Errorf("ResumePlan %s not found in namespace %s: kubectl get resumeplans -n %s lists them", o.plan, ns, ns)
	}
	var list v1alpha1.ResumePlanList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the ResumePlans of namespace %s: %w", ns, err)
	}
	var mine []v1alpha1.ResumePlan
	for _, p := range list.Items {
		if p.Spec.SessionRef.Name == o.session {
			mine = append(mine, p)
		}
	}
	switch len(mine) {
	case 1:
		return &mine[0], nil
	case 0:
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.session}, &v1alpha1.AgentSession{}); err != nil {
			return nil, sessionGetError(err, o.session, ns)
		}
		return nil, fmt.Errorf("no ResumePlan judges session %s yet: the operator makes one named %s once the session is verified (kubectl get agentsession %s -n %s shows Ready)",
			o.session, o.session, o.session, ns)
	}
	names := make([]string, len(mine))
	for i, p := range mine {
		names[i] = p.Name
	}
	sort.Strings(names)
	return nil, fmt.Errorf("session %s has %d ResumePlans (%s): pick one with --plan", o.session, len(mine), strings.Join(names, ", "))
}

func (o *resumeOptions) run(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	rp, err := o.findPlan(ctx, c, ns)
	if err != nil {
		return err
	}
	if structured(o.output) {
		if err := writeDocument(out, o.output, rp.Status); err != nil {
			return err
		}
	} else if err := printResume(out, rp); err != nil {
		return err
	}
	if rp.Status.Verdict == "" {
		return errors.New(noVerdict(rp))
	}
	return nil
}

// noVerdict says why a ResumePlan has no verdict yet.
func noVerdict(rp *v1alpha1.ResumePlan) string {
	if c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return fmt.Sprintf("ResumePlan %s is stalled (%s): %s", rp.Name, c.Reason, c.Message)
	}
	if c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
		return fmt.Sprintf("ResumePlan %s has no verdict yet (%s): %s", rp.Name, c.Reason, c.Message)
	}
	return fmt.Sprintf("ResumePlan %s has no verdict yet: the operator has not judged session %s", rp.Name, rp.Spec.SessionRef.Name)
}

// printResume renders a ResumePlan's status in words. Every string from the status passes through
// printable: the messages quote step ids and files an agent wrote.
func printResume(out io.Writer, rp *v1alpha1.ResumePlan) error {
	p := &planPrinter{w: out}
	st := rp.Status
	if st.Verdict == "" {
		p.line("resumeplan/%s (session %s): no verdict yet", rp.Name, rp.Spec.SessionRef.Name)
		return p.err
	}
	p.line("resumeplan/%s (session %s): %s%s", rp.Name, rp.Spec.SessionRef.Name, st.Verdict, inParens(string(st.Reason)))
	if st.Message != "" {
		p.line("  %s", printable(st.Message))
	}
	p.line("")
	p.line("Where to re-enter:  %s", reEntry(st))
	p.line("How it stopped:     %s", stopText(st.Stop))
	p.line("Verified steps:     %s", stepList(st.Verified, "verified", st.Truncated))
	p.line("Residual steps:     %s", stepList(st.Residual, "residual", st.Truncated))
	p.line("Transcript:         %s", rewindText(st.Rewind))
	for _, l := range st.Rewind.NoGoodNote {
		p.line("                      | %s", printable(l))
	}
	if r := st.Reachability; r.State != "" {
		p.line("Garbage collection: %s%s%s", r.State, inParens(string(r.Reason)), dashMessage(r.Message))
	}
	if cv := st.Convergence; cv.Verdict != "" {
		p.line("Convergence:        %s%s%s", cv.Verdict, inParens(string(cv.Reason)), dashMessage(cv.Message))
	}
	if d := st.Drift; d.Verdict != "" {
		p.line("Plan drift:         %s%s", d.Verdict, dashMessage(d.Suggestion))
		if len(d.UnattributedFiles) > 0 {
			p.line("                    files no plan step names: %s", printable(strings.Join(d.UnattributedFiles, ", ")))
		}
	}
	if rc := st.Reconciliation; rc.Promised != nil {
		p.line("Plan vs evidence:   %d promised, %d marked done, %d evidenced", deref32(rc.Promised), deref32(rc.MarkedDone), deref32(rc.Evidenced))
		if len(rc.ClaimedWithoutEvidence) > 0 {
			p.line("                    claimed done without evidence: %s", printable(strings.Join(rc.ClaimedWithoutEvidence, ", ")))
		}
	}
	p.line("")
	p.line("Next: %s", nextStep(rp))
	return p.err
}

func reEntry(st v1alpha1.ResumePlanStatus) string {
	if st.ResumeSHA != "" {
		return "commit " + st.ResumeSHA
	}
	if st.ResumeAfterStep != nil {
		return fmt.Sprintf("after step %d of the recording (no repository: the recorded tool answers verified the steps before it)", *st.ResumeAfterStep)
	}
	if st.Evidence.ResolvedCommit == "" {
		return "no commit: the plan was judged without a repository, so nothing could be re-verified"
	}
	return "none"
}

func stopText(s v1alpha1.RunStop) string {
	switch s {
	case v1alpha1.RunSuspended:
		return "suspended on the agent's request (a SUSPEND the recorder minted)"
	case v1alpha1.RunFinished:
		return "finished: the agent ended on its own with success"
	case v1alpha1.RunFailed:
		return "failed: the agent exited with an error before finishing"
	case v1alpha1.RunKilled:
		return "killed before finishing"
	case v1alpha1.RunDeadlineExceeded:
		return "ran out of time before finishing"
	case v1alpha1.RunInterrupted:
		return "interrupted: nothing recorded says how the agent ended (its recorder died or was stopped first)"
	}
	return "unknown"
}

// stepList lists plan steps, with the commit verifying each when there is one, and says when the
// status cut the list.
func stepList(steps []v1alpha1.PlanStep, field string, cuts []v1alpha1.ListTruncation) string {
	if len(steps) == 0 {
		return "none"
	}
	items := make([]string, len(steps))
	for i, s := range steps {
		items[i] = printable(s.ID)
		if s.SHA != "" {
			items[i] += " @ " + short12(s.SHA)
		}
	}
	text := fmt.Sprintf("%d: %s", len(steps), strings.Join(items, ", "))
	for _, c := range cuts {
		if c.Field == field {
			text += fmt.Sprintf(" (the first %d of %d)", len(steps), c.Total)
		}
	}
	return text
}

func rewindText(rw v1alpha1.RewindPlan) string {
	switch rw.Decision {
	case v1alpha1.DecisionRewind:
		text := fmt.Sprintf("rewind to turn %d, dropping %d turn(s) after it", deref32(rw.RewindToTurn), deref32(rw.DroppedTurns))
		if rw.TranscriptDigest != "" {
			text += " (checkpoint digest " + short12(rw.TranscriptDigest) + ")"
		}
		return text + dashMessage(rw.Message)
	case v1alpha1.DecisionNoRewind:
		return "keep it as it is" + inParens(string(rw.Reason)) + dashMessage(rw.Message)
	case v1alpha1.DecisionUnanchored:
		return "a rewind is warranted, but no minted checkpoint matches the transcript" + inParens(string(rw.Reason)) + dashMessage(rw.Message)
	}
	return "not judged"
}

// nextStep says what to do next, by verdict.
func nextStep(rp *v1alpha1.ResumePlan) string {
	st := rp.Status
	switch st.Verdict {
	case v1alpha1.VerdictResumable:
		var parts []string
		if st.ResumeSHA != "" {
			parts = append(parts, "check out commit "+short12(st.ResumeSHA)+" in the agent's workspace")
		}
		switch st.Rewind.Decision {
		case v1alpha1.DecisionRewind:
			parts = append(parts, fmt.Sprintf("rewind the agent's transcript to turn %d and hand it the no-good note above", deref32(st.Rewind.RewindToTurn)))
		case v1alpha1.DecisionUnanchored:
			parts = append(parts, "start the agent on a fresh transcript (no checkpoint anchors a rewind)")
		}
		residual := make([]string, len(st.Residual))
		for i, s := range st.Residual {
			residual[i] = printable(s.ID)
		}
		if len(residual) > 0 {
			parts = append(parts, "restart the agent on the residual steps ("+strings.Join(residual, ", ")+")")
		} else {
			parts = append(parts, "restart the agent (the plan lists no residual steps)")
		}
		return strings.Join(parts, ", then ") + "."
	case v1alpha1.VerdictComplete:
		return "nothing to resume: every declared step is verified. The garbage collector may delete the session once its grace period passes; set spec.retention.policy: Retain on AgentSession " +
			rp.Spec.SessionRef.Name + " to keep it."
	case v1alpha1.VerdictDiverged:
		return "a human decides: the workspace moved away from the run's re-entry point. Compare the workspace with the verified steps above, then resume by hand or start a new run; the session is kept however old it is."
	case v1alpha1.VerdictUnresumable:
		return "start a new run: this recording cannot support a resume" + inParens(string(st.Reason)) + ". To judge it against a repository, create a ResumePlan with spec.git and run kubectl rewind resume " +
			rp.Spec.SessionRef.Name + " --plan NAME."
	}
	return "wait for the operator's verdict."
}

// inParens is " (s)", or nothing when s is empty: a status may leave any reason out.
func inParens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + printable(s) + ")"
}

func dashMessage(m string) string {
	if m == "" {
		return ""
	}
	return " — " + printable(m)
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
