package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/controller"
	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// defaultSweepMargin is how old an unreferenced blob must be before a sweep deletes it. It must
// exceed the longest push or capture (blobs are stored before what references them) and the clock
// skew between the sweeping host and the store; a day leaves room for both.
const defaultSweepMargin = 24 * time.Hour

// Flags of engine gc-sweep that locate the sweep lock, a coordination.k8s.io Lease.
const (
	flagLeaseName      = "lease-name"
	flagLeaseNamespace = "lease-namespace"
	flagLeaseDuration  = "lease-duration"
	// defaultLeaseDuration is how long the sweep lock stays held without a renewal; the sweep renews
	// it every third of that, and a sweep that died frees it after that long.
	defaultLeaseDuration = time.Minute
)

// gcSweepLock is the lock a sweep that deletes takes, so that two sweeps never run at once: the
// Lease named by --lease-name in --lease-namespace, through the cluster configuration ($KUBECONFIG,
// or the pod's service account token). Tests set an in-memory lock.
var gcSweepLock = func(cmd *cobra.Command) (blobsweep.Lock, error) {
	f := cmd.Flags()
	name, _ := f.GetString(flagLeaseName)
	namespace, _ := f.GetString(flagLeaseNamespace)
	duration, _ := f.GetDuration(flagLeaseDuration)
	if name == "" || namespace == "" {
		return nil, errors.New("--lease-name and --lease-namespace name the sweep lock (a Lease) a sweep that deletes takes; only --dry-run runs without one")
	}
	if duration < 3*time.Second {
		return nil, fmt.Errorf("--lease-duration %s is shorter than 3s", duration)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("the cluster configuration for the sweep lock: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, fmt.Errorf("a client for the sweep lock: %w", err)
	}
	return &controller.LeaseLock{Client: c, Namespace: namespace, Name: name, Duration: duration, Clock: clock.RealClock{}}, nil
}

// sweepClock is the time source of a sweep: its start, from which --margin counts back, is read from
// it. Tests fix it, so that a blob's age against the margin does not depend on how long the requests
// before the sweep took on a busy machine.
var sweepClock = time.Now

// sweepOptions are the flags of a sweep, shared by engine gc-sweep and gc report.
type sweepOptions struct {
	store  storeFlags
	margin time.Duration
	window time.Duration
}

func (o *sweepOptions) register(cmd *cobra.Command) {
	o.store.register(cmd, true)
	cmd.Flags().DurationVar(&o.margin, "margin", defaultSweepMargin,
		"safety margin: an unreferenced blob stored less than this before the sweep began is kept (it may belong to an upload in flight)")
	cmd.Flags().DurationVar(&o.window, "delete-window", blobsweep.DefaultWindow,
		"how long the store accepts each round of deletions; a push that overlaps a round waits for it to close, so keep it short, but longer than re-marking takes")
}

func (o *sweepOptions) validate() error {
	if o.margin < 0 {
		return fmt.Errorf("--margin %s is negative", o.margin)
	}
	if o.window < time.Second || o.window > 10*time.Minute {
		return fmt.Errorf("--delete-window %s is not between 1s and 10m (a push waits at most 15m for a window to close)", o.window)
	}
	return nil
}

// sweep opens the store and runs a sweep over it.
func (o *sweepOptions) sweep(ctx context.Context, store *blobstore.SessionStore, dryRun bool, lock blobsweep.Lock, holder string) (*blobsweep.Report, error) {
	objects, ok := store.Objects().(blobsweep.Objects)
	if !ok {
		return nil, fmt.Errorf("the store %T cannot list in pages or delete in batches", store.Objects())
	}
	return blobsweep.Run(ctx, objects, blobsweep.Options{Layout: store.Layout(), Margin: o.margin, DryRun: dryRun,
		Lock: lock, Holder: holder, Parallelism: o.store.parallel, Clock: sweepClock, Window: o.window})
}

// newGCSweepTaskCommand is `agentrewind engine gc-sweep`, the blob sweep the GC controller's Job runs.
func newGCSweepTaskCommand() *cobra.Command {
	var (
		o                      sweepOptions
		jobUID, terminationLog string
		dryRun                 bool
	)
	cmd := &cobra.Command{
		Use:   "gc-sweep --store S --job-uid UID [--margin D] [--dry-run]",
		Short: "Delete the blobs no session or checkpoint in the store references, older than a safety margin",
		Long: `Sweep the store's blobs: mark every blob referenced by a session (committed, or an upload still in
progress) or a checkpoint manifest, then delete the unreferenced blobs stored more than --margin before
the sweep began. Sessions the GC decided to delete must already be gone from the store: every session
there is kept. Marking completes before anything is deleted, so an interrupted sweep deletes nothing;
sessions and checkpoints stored while the sweep ran are marked again before deleting. A sweep that
deletes takes the sweep lock first (the Lease --lease-name in --lease-namespace; its pod needs get,
create and update on it); --dry-run takes none and deletes nothing.

The result goes to results/<job-uid>.json in the store and a summary to the termination message.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jobUID == "" {
				jobUID = os.Getenv("JOB_UID")
			}
			if jobUID == "" {
				return errors.New("--job-uid (or $JOB_UID) is required: the result is written to results/<job-uid>.json")
			}
			if err := blobstore.ValidateID(jobUID); err != nil {
				return fmt.Errorf("--job-uid: %w", err)
			}
			ctx, cancel := o.store.context(cmd.Context())
			defer cancel()
			run := &jobRun{flags: &jobFlags{storeFlags: o.store, jobUID: jobUID, terminationLog: terminationLog},
				result: &task.Result{APIVersion: task.APIVersion, Task: task.GCSweep, JobUID: jobUID, StartedAt: time.Now().UTC()}}
			if err := o.validate(); err != nil {
				return run.finish(cmd, task.ReasonInvalidInput, err)
			}
			store, _, err := o.store.open(ctx, nil)
			if err != nil {
				return run.finish(cmd, task.ReasonStorageUnavailable, err)
			}
			run.store = store
			var lock blobsweep.Lock
			if !dryRun {
				if lock, err = gcSweepLock(cmd); err != nil {
					return run.finish(cmd, task.ReasonInvalidInput, err)
				}
			}
			rep, err := o.sweep(ctx, store, dryRun, lock, jobUID)
			if rep != nil {
				run.result.GCSweep = rep.Result()
			}
			return run.finish(cmd, sweepFailureReason(err), err)
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&jobUID, "job-uid", "", "the Job's UID, naming its result object results/<uid>.json and holding the sweep lock (default $JOB_UID)")
	cmd.Flags().StringVar(&terminationLog, "termination-log", defaultTerminationLog,
		"where the summary for the controller goes; written only when the file exists, as the kubelet creates it")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be deleted and delete nothing")
	cmd.Flags().String(flagLeaseName, "", "name of the Lease that is the sweep lock (the GC controller passes it)")
	cmd.Flags().String(flagLeaseNamespace, os.Getenv("POD_NAMESPACE"), "namespace of that Lease (default $POD_NAMESPACE)")
	cmd.Flags().Duration(flagLeaseDuration, defaultLeaseDuration, "how long the sweep lock stays held without a renewal; a sweep that died frees it after that long")
	return cmd
}

// sweepFailureReason is the reason a failed sweep reports: the store could not be reached, or
// anything else (another sweep holds the lock, the lock was lost) is Internal, which is retried.
func sweepFailureReason(err error) task.FailureReason {
	var op *blobstore.OpError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &op), errors.Is(err, blobstore.ErrBucketNotFound):
		return task.ReasonStorageUnavailable
	}
	return task.ReasonInternal
}

// newGCCommand is `agentrewind gc`: what the garbage collector would do, for a human.
func newGCCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gc <command>",
		Short: "Inspect the garbage collection of the store",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newGCReportCommand())
	return cmd
}

// gcReport is what gc report -o json prints.
type gcReport struct {
	*blobsweep.Report
	Margin string `json:"margin"`
	// Blobs are the unreferenced blobs: those a sweep would delete, and those the margin keeps.
	Blobs []gc.BlobDecision `json:"blobs"`
}

func newGCReportCommand() *cobra.Command {
	var (
		o        sweepOptions
		sessions sessionsReportOptions
	)
	cmd := &cobra.Command{
		Use:   "report (--store S [--margin D] | --sessions [-n NS] [--grace D]) [-o json]",
		Short: "List what the garbage collector would delete now, and why: the store's blobs, or (--sessions) the cluster's AgentSessions",
		Long: `List what garbage collection would delete now, and why. Both are dry runs: nothing is deleted and
no lock is taken.

With --store: the blobs a sweep of the store would delete and the unreferenced blobs it would keep,
with the reason for each: Unreferenced (no session or checkpoint references it and it is older than
--margin: deleted), UnreferencedYoung (stored within the margin: kept, it may belong to an upload in
flight), AgeUnknown (kept). Referenced blobs are only counted.

With --sessions: every AgentSession of the cluster in KUBECONFIG (or of the namespaces given), decided
exactly as a GC pass decides: Reachable (kept however old, with the root that keeps it: Pinned,
Recording, ReadByUnfinishedForkRun, a resumable verdict, ...) or Collectible (why), and when a
collectible session is deleted: now, or when its grace ends. Pass the manager's --gc-grace as --grace;
a session's spec.retention.gracePeriodSeconds overrides it as in the controller.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sessions.enabled {
				return sessions.run(cmd)
			}
			if err := o.validate(); err != nil {
				return err
			}
			ctx, cancel := o.store.context(cmd.Context())
			defer cancel()
			store, _, err := o.store.open(ctx, nil)
			if err != nil {
				return classify(storeAdvice(err))
			}
			rep, err := o.sweep(ctx, store, true, nil, "")
			if err != nil {
				return classify(storeAdvice(err))
			}
			if o.store.output == "json" {
				blobs := rep.Plan.Unreferenced
				if blobs == nil {
					blobs = []gc.BlobDecision{}
				}
				return writeJSON(cmd.OutOrStdout(), gcReport{Report: rep, Margin: o.margin.String(), Blobs: blobs})
			}
			return printGCReport(cmd, rep, o.margin)
		},
	}
	o.register(cmd)
	sessions.register(cmd)
	return cmd
}

func printGCReport(cmd *cobra.Command, rep *blobsweep.Report, margin time.Duration) error {
	out := cmd.OutOrStdout()
	if len(rep.Plan.Unreferenced) > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "BLOB\tSIZE\tSTORED\tACTION\tREASON")
		for _, d := range rep.Plan.Unreferenced {
			action := "keep"
			if d.Delete {
				action = "delete"
			}
			stored := "unknown"
			if !d.LastModified.IsZero() {
				stored = d.LastModified.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printableCell(d.Hash), storeBytes(d.Size), stored, action, d.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%d blob(s) would be deleted (%s), %d unreferenced kept within the margin of %s (cutoff %s); %d referenced.\n",
		rep.Plan.Delete, storeBytes(rep.Plan.FreedBytes), rep.Plan.Young, margin, rep.Cutoff.UTC().Format(time.RFC3339), rep.Plan.Referenced)
	fmt.Fprintf(out, "Marked from %d session(s), %d upload(s) in progress and %d checkpoint(s) (%d known from the mark cache); %d S3 requests.\n",
		rep.Sessions, rep.Uncommitted, rep.Checkpoints, rep.Cached, rep.Requests.Total())
	if rep.CacheProblem != "" {
		fmt.Fprintf(out, "note: %s; every root was read instead.\n", printable(rep.CacheProblem))
	}
	if len(rep.Damaged) > 0 {
		fmt.Fprintf(out, "warning: %d committed session(s) have no events.jsonl, so none of their blobs is marked: %s\n",
			len(rep.Damaged), printable(strings.Join(rep.Damaged, ", ")))
	}
	if len(rep.DamagedCheckpoints) > 0 {
		fmt.Fprintf(out, "warning: %d checkpoint(s) have a manifest chunk missing or not matching its digest, so they cannot be restored: %s\n",
			len(rep.DamagedCheckpoints), printable(strings.Join(rep.DamagedCheckpoints, ", ")))
	}
	return nil
}
