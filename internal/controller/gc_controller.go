package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/engine/gc"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// Event reasons of the garbage collector.
const (
	// ReasonGCDeleted: the GC deleted a collectible session past its grace.
	ReasonGCDeleted = "GarbageCollected"
	// ReasonGCWouldDelete: a dry-run GC would have deleted the session.
	ReasonGCWouldDelete = "WouldGarbageCollect"
	// ReasonCheckpointPruned: the GC deleted a Checkpoint its prune plan dropped.
	ReasonCheckpointPruned = "CheckpointPruned"
	// ReasonCheckpointWouldPrune: a dry-run GC would have deleted the Checkpoint.
	ReasonCheckpointWouldPrune = "WouldPruneCheckpoint"
	// ReasonGCSweepFinished: a blob sweep Job finished and its result was read.
	ReasonGCSweepFinished = "BlobSweepFinished"
)

// GCObserver is told what each GC pass and blob sweep did; the operator's metrics implement it.
// Every method is called from the leader's GC loop only.
type GCObserver interface {
	// GCPass: a pass decided plan and deleted deleted sessions (0 in a dry run) in took.
	GCPass(plan gc.Plan, deleted int, dryRun bool, took time.Duration)
	// CheckpointsPruned: a pass deleted (or, dry, would delete) n Checkpoints.
	CheckpointsPruned(n int, dryRun bool)
	// GCSweepFinished: a blob sweep Job finished; res is nil when it left no result, took is how long
	// the Job ran.
	GCSweepFinished(res *task.GCSweepResult, failed bool, took time.Duration)
}

// GarbageCollector is the GC controller: every Interval, on the leader only, it gathers the facts of
// every AgentSession (gather), asks gc.Collect which are reachable and which are deleted now, writes
// status.reachability on each session whose verdict changed, deletes the collectible sessions past
// their grace (never a reachable one; nothing in a dry run), prunes each session's Checkpoints, and
// schedules the blob sweep Jobs.
type GarbageCollector struct {
	Deps
	Options GCOptions
	// Ticker drives the passes; Deps.Clock is the time decisions use. Both are the same clock in the
	// manager.
	Ticker   clock.WithTicker
	Observer GCObserver // nil observes nothing

	reported map[string]bool // sweep Jobs whose result this process has read (UIDs)
}

// NeedLeaderElection keeps the GC on the leader: one deleter.
func (g *GarbageCollector) NeedLeaderElection() bool { return true }

// GC: status.reachability on AgentSessions, what a collected session's hand-made ResumePlans and
// ForkRuns say of it (gc_dependents.go), deletions of collectible sessions and pruned Checkpoints,
// the blob sweep Jobs and their Leases. Creating the sweep's ServiceAccount and Role
// (--gc-sweep-create-rbac, on in the Helm chart) needs config/rbac/gc_sweep_rbac.yaml, whose admission
// policy lets the manager create only those: the generated role creates no RBAC.
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions/status,verbs=get;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=resumeplans;forkruns,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentrewind.io,resources=resumeplans/status;forkruns/status,verbs=get;patch
// +kubebuilder:rbac:groups=agentrewind.io,resources=checkpoints,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update

// Start runs a pass, then one every Interval, until ctx ends. A failed pass is logged; the next one
// tries again.
func (g *GarbageCollector) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("gc")
	ctx = ctrl.LoggerInto(ctx, log)
	ticker := g.Ticker.NewTicker(g.Options.Interval)
	defer ticker.Stop()
	for {
		if _, err := g.Pass(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Garbage collection pass failed; the next pass tries again", "interval", g.Options.Interval.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// PassReport is what one pass did.
type PassReport struct {
	Plan gc.Plan
	// Deleted are the sessions deleted (namespace/name); WouldDelete those a dry run kept.
	Deleted, WouldDelete []string
	// Pruned are the Checkpoints deleted (or, dry, that would be).
	Pruned []string
	// Sweeps are the sweep Jobs created.
	Sweeps []string
}

// Pass is one garbage collection pass.
func (g *GarbageCollector) Pass(ctx context.Context) (PassReport, error) {
	start := g.Clock.Now()
	var rep PassReport
	objs, err := listGC(ctx, g.Client, g.Options.Namespaces)
	if err != nil {
		return rep, err
	}
	now := g.Clock.Now()
	rep.Plan = gc.Collect(gather(objs), gc.Policy{Grace: g.Options.Grace}, now)
	var errs []error
	deleted := map[string]bool{}
	for i, d := range rep.Plan.Decisions {
		s := &objs.sessions[i]
		if !s.DeletionTimestamp.IsZero() {
			continue
		}
		gone, err := g.apply(ctx, s, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if d.Delete && g.Options.DryRun {
			rep.WouldDelete = append(rep.WouldDelete, d.Session)
		}
		if gone {
			rep.Deleted = append(rep.Deleted, d.Session)
			deleted[d.Session] = true
			g.tellDependents(ctx, objs, s)
		}
	}
	pruned, err := g.prune(ctx, objs, deleted)
	rep.Pruned = pruned
	errs = append(errs, err)
	sweeps, err := g.sweep(ctx, objs.sessions)
	rep.Sweeps = sweeps
	errs = append(errs, err)
	if g.Observer != nil {
		g.Observer.GCPass(rep.Plan, len(rep.Deleted), g.Options.DryRun, g.Clock.Since(start))
		g.Observer.CheckpointsPruned(len(rep.Pruned), g.Options.DryRun)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Finished garbage collection pass", "reachable", rep.Plan.Reachable, "collectible", rep.Plan.Collectible,
		"deleted", len(rep.Deleted), "wouldDelete", len(rep.WouldDelete), "prunedCheckpoints", len(rep.Pruned), "sweeps", len(rep.Sweeps))
	return rep, errors.Join(errs...)
}

// PlanSessions is what a GC pass with grace would decide at now over the AgentSessions of namespaces
// (all when empty), read through r: the same facts and the same decision as a pass, without writing
// anything. `agentrewind gc report --sessions` shows it; Decisions are in the order of sessions.
func PlanSessions(ctx context.Context, r client.Reader, namespaces []string, grace time.Duration, now time.Time) (gc.Plan, []v1alpha1.AgentSession, error) {
	objs, err := listGC(ctx, r, namespaces)
	if err != nil {
		return gc.Plan{}, nil, err
	}
	return gc.Collect(gather(objs), gc.Policy{Grace: grace}, now), objs.sessions, nil
}

// listGC reads every object a pass gathers facts from, in namespaces (all when empty).
func listGC(ctx context.Context, r client.Reader, namespaces []string) (gcObjects, error) {
	var objs gcObjects
	for _, ns := range listNamespaces(namespaces) {
		var (
			sessions v1alpha1.AgentSessionList
			plans    v1alpha1.ResumePlanList
			runs     v1alpha1.ForkRunList
			cks      v1alpha1.CheckpointList
		)
		for _, l := range []client.ObjectList{&sessions, &plans, &runs, &cks} {
			if err := r.List(ctx, l, client.InNamespace(ns)); err != nil {
				return objs, fmt.Errorf("listing %T: %w", l, err)
			}
		}
		objs.sessions = append(objs.sessions, sessions.Items...)
		objs.plans = append(objs.plans, plans.Items...)
		objs.forkRuns = append(objs.forkRuns, runs.Items...)
		objs.checkpoints = append(objs.checkpoints, cks.Items...)
	}
	slices.SortFunc(objs.sessions, func(a, b v1alpha1.AgentSession) int {
		return compareKeys(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	return objs, nil
}

// listNamespaces are the namespaces to list, each once: a namespace named twice (-n a,a, or
// --gc-namespaces a -gc-namespaces a) was listed twice, and each of its sessions decided and counted
// twice; "" (all), alone or among others, lists everything once.
func listNamespaces(namespaces []string) []string {
	if len(namespaces) == 0 || slices.Contains(namespaces, "") {
		return []string{""}
	}
	out := slices.Clone(namespaces)
	slices.Sort(out)
	return slices.Compact(out)
}

func compareKeys(ans, an, bns, bn string) int {
	if ans != bns {
		if ans < bns {
			return -1
		}
		return 1
	}
	switch {
	case an < bn:
		return -1
	case an > bn:
		return 1
	}
	return 0
}

// apply writes the decision into the session's status and, past its grace and not in a dry run,
// deletes it; it reports whether the session was deleted. The deletion is conditional on the
// session being exactly what the facts were gathered from (its resourceVersion), so a pin or a
// new recording that landed meanwhile is never overridden.
func (g *GarbageCollector) apply(ctx context.Context, s *v1alpha1.AgentSession, d gc.Decision) (bool, error) {
	want := reachabilityStatus(d, g.Options.DryRun)
	if !equality.Semantic.DeepEqual(s.Status.Reachability, want) {
		base := s.DeepCopy()
		s.Status.Reachability = want
		if err := g.Status().Patch(ctx, s, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return false, nil // deleted or changed since the listing: the next pass sees it as it is
			}
			return false, fmt.Errorf("writing the reachability of AgentSession %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	if !d.Delete {
		return false, nil
	}
	if g.Options.DryRun {
		g.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonGCWouldDelete, "GarbageCollect", "Would delete (dry run): %s: %s", d.Reason, apimap.Message(d.Message))
		return false, nil
	}
	uid, rv := s.UID, s.ResourceVersion
	err := g.Delete(ctx, s, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy("Background"))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deleting AgentSession %s/%s: %w", s.Namespace, s.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted collectible AgentSession past its grace", "agentSession", d.Session, "reason", d.Reason)
	g.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonGCDeleted, "GarbageCollect", "Deleted: %s: %s", d.Reason, apimap.Message(d.Message))
	return true, nil
}

// reachabilityStatus is a decision as the session's status.reachability.
func reachabilityStatus(d gc.Decision, dryRun bool) v1alpha1.ReachabilityStatus {
	st := v1alpha1.ReachabilityStatus{State: v1alpha1.Reachable, Reason: string(d.Reason), Message: d.Message}
	if d.Reachability == resume.Collectible {
		st.State = v1alpha1.Collectible
	}
	switch {
	case d.Delete && dryRun:
		st.Message = "would delete (dry run): " + st.Message
	case d.Delete:
		st.Message = "deleting: " + st.Message
	}
	if st.Reason == "" {
		st.Reason = string(resume.ReasonUnknownVerdictRetained)
	}
	st.Message = apimap.Message(st.Message)
	return st
}
