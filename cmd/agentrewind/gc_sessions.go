package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller"
	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// defaultGCGrace is the manager's --gc-grace default, which gc report --sessions assumes unless told.
const defaultGCGrace = 7 * 24 * time.Hour

// sessionsReportOptions are the flags of gc report --sessions.
type sessionsReportOptions struct {
	enabled    bool
	kubeconfig string
	namespaces []string
	grace      time.Duration
	// now is the time decisions are made at; tests fix it.
	now func() time.Time
}

func (o *sessionsReportOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.enabled, "sessions", false, "report the AgentSessions of the cluster (KUBECONFIG) instead of the store's blobs")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --sessions: path to a kubeconfig; empty uses $KUBECONFIG or the in-cluster config")
	f.StringSliceVarP(&o.namespaces, "namespace", "n", nil, "with --sessions: namespaces to report (comma-separated); empty is all, as the GC with no --gc-namespaces")
	f.DurationVar(&o.grace, "grace", defaultGCGrace, "with --sessions: the GC's grace (the manager's --gc-grace)")
}

// gcSessionsReport is what gc report --sessions -o json prints: the plan with the reachability spelt
// as in the AgentSession's status.reachability.state.
type gcSessionsReport struct {
	Grace       string            `json:"grace"`
	At          time.Time         `json:"at"`
	Decisions   []sessionDecision `json:"decisions"`
	Reachable   int               `json:"reachable"`
	Collectible int               `json:"collectible"`
	Deleted     int               `json:"deleted"`
}

type sessionDecision struct {
	gc.Decision
	Reachability v1alpha1.Reachability `json:"reachability"` // shadows the engine's spelling
}

// apiReachability is the engine's reachability as the API spells it.
func apiReachability(r resume.Reachability) v1alpha1.Reachability {
	if r == resume.Collectible {
		return v1alpha1.Collectible
	}
	return v1alpha1.Reachable
}

func (o *sessionsReportOptions) run(cmd *cobra.Command) error {
	f := cmd.Flags()
	for _, name := range []string{"store", "margin", "parallel"} {
		if f.Changed(name) {
			return fmt.Errorf("--%s is for the blob report; --sessions reads the cluster, not the store", name)
		}
	}
	if o.grace < 0 {
		return fmt.Errorf("--grace %s is negative", o.grace)
	}
	output, _ := f.GetString("output")
	if err := checkOutput(output); err != nil {
		return err
	}
	c, _, err := kubectlFlags{kubeconfig: o.kubeconfig}.client()
	if err != nil {
		return err
	}
	now := time.Now()
	if o.now != nil {
		now = o.now()
	}
	plan, _, err := controller.PlanSessions(cmd.Context(), c, o.namespaces, o.grace, now)
	switch {
	case apierrors.IsForbidden(err) && len(o.namespaces) == 0:
		return fmt.Errorf("reading the cluster's AgentSessions: %w: the report lists AgentSessions, ResumePlans, ForkRuns and Checkpoints "+
			"in every namespace; if you may list them only in some, name those with -n", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("reading the cluster's AgentSessions: %w: the report needs list on AgentSessions, ResumePlans, ForkRuns and "+
			"Checkpoints in each namespace -n names", err)
	case err != nil:
		return fmt.Errorf("reading the cluster's AgentSessions: %w", err)
	}
	if output == "json" {
		rep := gcSessionsReport{Grace: o.grace.String(), At: now.UTC(), Decisions: []sessionDecision{},
			Reachable: plan.Reachable, Collectible: plan.Collectible, Deleted: plan.Deleted}
		for _, d := range plan.Decisions {
			rep.Decisions = append(rep.Decisions, sessionDecision{Decision: d, Reachability: apiReachability(d.Reachability)})
		}
		return writeJSON(cmd.OutOrStdout(), rep)
	}
	return printSessionsReport(cmd, plan, o.grace)
}

func printSessionsReport(cmd *cobra.Command, plan gc.Plan, grace time.Duration) error {
	out := cmd.OutOrStdout()
	if len(plan.Decisions) == 0 {
		fmt.Fprintln(out, "No AgentSessions.")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tREACHABILITY\tREASON\tACTION\tWHEN\tWHY")
	for _, d := range plan.Decisions {
		action, when := sessionAction(d)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printableCell(d.Session), apiReachability(d.Reachability), printableCell(string(d.Reason)), action, when, printableCell(d.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d session(s): %d reachable (kept however old), %d collectible, %d would be deleted now (grace %s).\n",
		len(plan.Decisions), plan.Reachable, plan.Collectible, plan.Deleted, grace)
	return nil
}

// sessionAction is what the GC does with a session and when, for a table cell.
func sessionAction(d gc.Decision) (action, when string) {
	switch {
	case d.Delete:
		return "delete", "now"
	case d.Reachability != resume.Collectible:
		return "keep", "never"
	case d.DeleteAt.IsZero():
		return "keep", "unknown" // when it became collectible is unknown, and an unknown age never elapses
	}
	return "keep", "after " + d.DeleteAt.UTC().Format(time.RFC3339)
}
