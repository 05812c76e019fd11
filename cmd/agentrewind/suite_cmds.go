package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// LabelSuite groups the ForkRuns of a replay suite.
const LabelSuite = "agentrewind.io/suite"

// suiteStatusOptions are the flags and argument of agentrewind suite status.
type suiteStatusOptions struct {
	kubectlFlags
	output, suite string
}

func newSuiteCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "Replay suites: the ForkRuns labelled " + LabelSuite + "=<name>",
	}
	cmd.AddCommand(newSuiteStatusCommand())
	return cmd
}

func newSuiteStatusCommand() *cobra.Command {
	var o suiteStatusOptions
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "List a replay suite's ForkRuns with their outcome and first divergence; exit 3 unless every one Passed",
		Long: `List the ForkRuns labelled ` + LabelSuite + `=NAME in a namespace, with their outcome and where each
first left its recording.

Exit codes: 0 when every ForkRun of the suite Passed; 3 when any did not pass (diverged, failed, or has
not finished yet); 1 when the cluster cannot be read or the suite has no ForkRuns (a misspelt suite
name must not pass).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(&o.kubectlFlags, suiteNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.suite = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), c, ns, cmd.OutOrStdout())
		},
	}
	o.kubectlFlags.register(cmd)
	outputFlagYAML(cmd, &o.output)
	return cmd
}

func (o *suiteStatusOptions) validate() error {
	if o.suite == "" {
		return errors.New("name the suite")
	}
	return checkOutputYAML(o.output)
}

// suiteRun is one ForkRun of a suite as the command reports it.
type suiteRun struct {
	Name            string               `json:"name"`
	Mode            v1alpha1.ForkMode    `json:"mode"`
	Ready           string               `json:"ready"`
	Outcome         v1alpha1.ForkOutcome `json:"outcome,omitempty"`
	Reason          string               `json:"reason,omitempty"`
	FirstDivergence *v1alpha1.Divergence `json:"firstDivergence,omitempty"`
}

// suiteReport is the suite's table, and whether it passed.
type suiteReport struct {
	Suite     string     `json:"suite"`
	Namespace string     `json:"namespace"`
	Passed    bool       `json:"passed"`
	Runs      []suiteRun `json:"runs"`
}

// summarizeSuite reads a suite's ForkRuns: it passed when it has some and every one Passed.
func summarizeSuite(suite, ns string, items []v1alpha1.ForkRun) suiteReport {
	rep := suiteReport{Suite: suite, Namespace: ns, Passed: len(items) > 0, Runs: []suiteRun{}}
	for _, fr := range items {
		run := suiteRun{Name: fr.Name, Mode: fr.Spec.Mode, Ready: "Unknown", Outcome: fr.Status.Outcome}
		if c := meta.FindStatusCondition(fr.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			run.Ready, run.Reason = string(c.Status), c.Reason
		}
		if fr.Status.FirstDivergence.Step != nil {
			d := fr.Status.FirstDivergence
			run.FirstDivergence = &d
		}
		rep.Passed = rep.Passed && fr.Status.Outcome == v1alpha1.OutcomePassed
		rep.Runs = append(rep.Runs, run)
	}
	sort.Slice(rep.Runs, func(i, j int) bool { return rep.Runs[i].Name < rep.Runs[j].Name })
	return rep
}

func (o *suiteStatusOptions) run(ctx context.Context, c client.Reader, ns string, out io.Writer) error {
	var list v1alpha1.ForkRunList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{LabelSuite: o.suite}); err != nil {
		return fmt.Errorf("listing the ForkRuns of suite %s in namespace %s: %w", o.suite, ns, err)
	}
	if len(list.Items) == 0 {
		return fmt.Errorf("suite %s has no ForkRuns in namespace %s (none is labelled %s=%s)", o.suite, ns, LabelSuite, o.suite)
	}
	rep := summarizeSuite(o.suite, ns, list.Items)
	if structured(o.output) {
		if err := writeDocument(out, o.output, rep); err != nil {
			return err
		}
	} else if err := printSuite(out, rep); err != nil {
		return err
	}
	if !rep.Passed {
		failing := 0
		for _, r := range rep.Runs {
			if r.Outcome != v1alpha1.OutcomePassed {
				failing++
			}
		}
		return &codedError{exitDrift, fmt.Errorf("suite %s: %d of %d ForkRuns did not pass", o.suite, failing, len(rep.Runs))}
	}
	return nil
}

func printSuite(out io.Writer, rep suiteReport) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tMODE\tREADY\tOUTCOME\tDIVERGED\tFIRST DIVERGENCE")
	for _, r := range rep.Runs {
		outcome, step, first := string(r.Outcome), "-", "-"
		if outcome == "" {
			outcome = "Pending"
			if r.Reason != "" {
				outcome += " (" + r.Reason + ")"
			}
		}
		if d := r.FirstDivergence; d != nil {
			step = strconv.FormatInt(*d.Step, 10)
			first = fmt.Sprintf("%s %s at %s", d.Kind, d.Reason, orDash(d.ActualCallSite))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", printableCell(r.Name), r.Mode, r.Ready, printableCell(outcome), step, printableCell(first))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	verdict := "PASSED"
	if !rep.Passed {
		verdict = "FAILED"
	}
	_, err := fmt.Fprintf(out, "suite %s: %s (%d ForkRuns)\n", printable(rep.Suite), verdict, len(rep.Runs))
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
