package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

const (
	// SweepServiceAccount is the ServiceAccount the manager creates for the sweep Jobs of a namespace
	// when --gc-sweep-service-account names none.
	SweepServiceAccount = "agentrewind-gc-sweep"
	// sweepLeasePrefix starts the name of the Lease that is the sweep lock of one store location.
	sweepLeasePrefix = "agentrewind-gc-sweep-"
	// annotationLastSweep on a sweep Lease is when the GC last started a sweep Job under it.
	annotationLastSweep = "agentrewind.io/last-sweep"
)

// sweepTarget is one store location to sweep and the namespace its sweep Job, Lease and credentials
// live in: the session's namespace for the default store (each namespace has its own prefix), the
// first namespace in name order among those using a tenant's location, so that one Lease guards it.
type sweepTarget struct {
	loc       Location
	namespace string
}

// sweepTargets lists the locations the sessions live in, in a stable order.
func (g *GarbageCollector) sweepTargets(sessions []v1alpha1.AgentSession) []sweepTarget {
	byLoc := map[string]sweepTarget{}
	for i := range sessions {
		s := &sessions[i]
		loc := g.Stores.LocationOf(s)
		k := loc.String()
		if t, ok := byLoc[k]; !ok || s.Namespace < t.namespace {
			byLoc[k] = sweepTarget{loc: loc, namespace: s.Namespace}
		}
	}
	keys := make([]string, 0, len(byLoc))
	for k := range byLoc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]sweepTarget, len(keys))
	for i, k := range keys {
		out[i] = byLoc[k]
	}
	return out
}

// sweepLeaseName is the Lease of a location: a hash of it, so a tenant's bucket name stays out of it.
func sweepLeaseName(loc Location) string {
	sum := sha256.Sum256([]byte(loc.String()))
	return sweepLeasePrefix + hex.EncodeToString(sum[:])[:nameHash]
}

// sweep reads the results of the finished sweep Jobs and, every SweepInterval and never while one
// runs, starts an engine gc-sweep Job for each location; it returns the Jobs it created.
func (g *GarbageCollector) sweep(ctx context.Context, sessions []v1alpha1.AgentSession) ([]string, error) {
	if g.Options.SweepInterval <= 0 {
		return nil, nil
	}
	var created []string
	var errs []error
	for _, t := range g.sweepTargets(sessions) {
		name, err := g.sweepLocation(ctx, t)
		if err != nil {
			errs = append(errs, fmt.Errorf("the blob sweep of %s: %w", t.loc, err))
		}
		if name != "" {
			created = append(created, name)
		}
	}
	return created, errors.Join(errs...)
}

func (g *GarbageCollector) sweepLocation(ctx context.Context, t sweepTarget) (string, error) {
	lease, err := g.ensureSweepLease(ctx, t)
	if err != nil {
		return "", err
	}
	var list batchv1.JobList
	if err := g.List(ctx, &list, client.InNamespace(t.namespace),
		client.MatchingLabels{jobs.LabelPurpose: string(task.GCSweep), jobs.LabelParent: lease.Name}); err != nil {
		return "", err
	}
	running := false
	for i := range list.Items {
		job := &list.Items[i]
		switch jobs.StateOf(job) {
		case jobs.Running:
			running = true
		default:
			g.readSweep(ctx, t, job)
		}
	}
	now := g.Clock.Now()
	if last, err := time.Parse(time.RFC3339, lease.Annotations[annotationLastSweep]); running || (err == nil && now.Before(last.Add(g.Options.SweepInterval))) {
		return "", nil
	}
	sa, err := g.sweepServiceAccount(ctx, t.namespace, lease)
	if err != nil || sa == "" {
		return "", err // no account to sweep with: --gc-sweep-service-account or --gc-sweep-create-rbac
	}
	desired, err := jobs.Build(g.sweepJob(t, lease, now), g.Scheme)
	if err != nil {
		return "", err
	}
	pod := &desired.Spec.Template.Spec
	pod.ServiceAccountName, pod.AutomountServiceAccountToken = sa, new(true) // the sweep renews its Lease
	step, err := g.ensureJob(ctx, lease, desired)
	if err != nil {
		return "", err
	}
	base := lease.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[annotationLastSweep] = now.UTC().Format(time.RFC3339)
	if err := g.Patch(ctx, lease, client.MergeFrom(base)); err != nil {
		return "", fmt.Errorf("recording the sweep on Lease %s/%s: %w", lease.Namespace, lease.Name, err)
	}
	if !step.started {
		return "", nil
	}
	return t.namespace + "/" + desired.Name, nil
}

// sweepJob is the engine gc-sweep Job of a location, named after the time it is started.
func (g *GarbageCollector) sweepJob(t sweepTarget, lease *coordinationv1.Lease, now time.Time) jobs.Spec {
	spec := g.Jobs.spec()
	spec.Owner = lease
	spec.Purpose = string(task.GCSweep)
	spec.Inputs = []string{t.loc.String(), strconv.FormatInt(now.Unix(), 10)}
	spec.Args = []string{"--store", t.loc.String()}
	if c := g.Stores.Config; c.Endpoint != "" {
		spec.Args = append(spec.Args, "--endpoint", c.Endpoint)
	}
	if c := g.Stores.Config; c.Region != "" {
		spec.Args = append(spec.Args, "--region", c.Region)
	}
	spec.Args = append(spec.Args, "--margin", g.Options.SweepMargin.String(),
		"--lease-name", lease.Name, "--lease-namespace", lease.Namespace, "--lease-duration", g.Options.SweepLeaseDuration.String())
	g.Stores.jobStore(&spec, t.loc)
	return spec
}

// ensureSweepLease gets the location's Lease, creating it free (no holder): it is the sweep lock
// and the owner of the location's sweep Jobs and RBAC.
func (g *GarbageCollector) ensureSweepLease(ctx context.Context, t sweepTarget) (*coordinationv1.Lease, error) {
	var lease coordinationv1.Lease
	key := client.ObjectKey{Namespace: t.namespace, Name: sweepLeaseName(t.loc)}
	err := g.APIReader.Get(ctx, key, &lease)
	if !apierrors.IsNotFound(err) {
		return &lease, err
	}
	lease = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{jobs.LabelManagedBy: jobs.ManagedBy, jobs.LabelPurpose: string(task.GCSweep)}}}
	if err := g.Create(ctx, &lease); err != nil {
		return nil, fmt.Errorf("creating Lease %s: %w", key, err)
	}
	return &lease, nil
}

// sweepServiceAccount is the ServiceAccount the sweep Job runs as: the one --gc-sweep-service-account
// names (its RBAC on Leases is the installer's), or SweepServiceAccount, created here with a Role that
// may only read and renew this Lease, both owned by the Lease.
func (g *GarbageCollector) sweepServiceAccount(ctx context.Context, namespace string, lease *coordinationv1.Lease) (string, error) {
	if g.Options.SweepServiceAccount != "" {
		return g.Options.SweepServiceAccount, nil
	}
	if !g.Options.SweepCreateRBAC {
		ctrl.LoggerFrom(ctx).V(1).Info("Skipped the blob sweep: no ServiceAccount for it (set --gc-sweep-service-account or --gc-sweep-create-rbac)", "namespace", namespace)
		return "", nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: SweepServiceAccount,
		Labels: map[string]string{jobs.LabelManagedBy: jobs.ManagedBy}}}
	if err := g.createIfAbsent(ctx, sa); err != nil {
		return "", err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: lease.Name, Labels: sa.Labels},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: []string{lease.Name}, Verbs: []string{"get", "update"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: lease.Name, Labels: sa.Labels},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: namespace}}}
	for _, o := range []client.Object{role, binding} {
		if err := controllerutil.SetControllerReference(lease, o, g.Scheme); err != nil {
			return "", err
		}
		if err := g.createIfAbsent(ctx, o); err != nil {
			return "", err
		}
	}
	return sa.Name, nil
}

// createIfAbsent creates o unless an object of its name exists (read uncached: the manager does not
// watch ServiceAccounts or RBAC).
func (g *GarbageCollector) createIfAbsent(ctx context.Context, o client.Object) error {
	existing := o.DeepCopyObject().(client.Object)
	err := g.APIReader.Get(ctx, client.ObjectKeyFromObject(o), existing)
	if !apierrors.IsNotFound(err) {
		return err
	}
	if err := g.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// readSweep reports a finished sweep Job once per process: an event on the Job, a log line, and
// the observer.
func (g *GarbageCollector) readSweep(ctx context.Context, t sweepTarget, job *batchv1.Job) {
	uid := string(job.UID)
	if g.reported[uid] {
		return
	}
	log := ctrl.LoggerFrom(ctx).WithValues("job", job.Name, "namespace", job.Namespace)
	store, err := g.Stores.Open(ctx, t.loc)
	var rep jobs.Report
	if err == nil {
		rep, err = jobs.Read(ctx, g.APIReader, store, job, task.GCSweep)
	}
	if err != nil {
		log.Error(err, "Reading the result of a blob sweep failed; the next pass tries again")
		return
	}
	if g.reported == nil {
		g.reported = map[string]bool{}
	}
	g.reported[uid] = true
	took := time.Duration(0)
	if s, c := job.Status.StartTime, job.Status.CompletionTime; s != nil && c != nil {
		took = c.Sub(s.Time)
	}
	failed := jobs.StateOf(job) == jobs.Failed || (rep.Result != nil && rep.Result.Outcome == task.Failed)
	var res *task.GCSweepResult
	if rep.Result != nil {
		res = rep.Result.GCSweep
	}
	if g.Observer != nil {
		g.Observer.GCSweepFinished(res, failed, took)
	}
	switch {
	case failed:
		f := failureOf(job, rep)
		log.Info("Blob sweep failed; the next one runs at its interval", "failure", f.String())
		g.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonGCSweepFinished, "Sweep", "Blob sweep of %s failed: %s", t.loc, f)
	case res != nil:
		log.Info("Blob sweep finished", "store", t.loc.String(), "deletedBlobs", res.DeletedBlobs, "freedBytes", res.FreedBytes,
			"candidates", res.Candidates, "young", res.Young, "markedBlobs", res.MarkedBlobs)
		g.Recorder.Eventf(job, nil, corev1.EventTypeNormal, ReasonGCSweepFinished, "Sweep",
			"Blob sweep of %s deleted %d unreferenced blob(s) (%d bytes); kept %d within the margin; %d referenced blob(s) marked",
			t.loc, res.DeletedBlobs, res.FreedBytes, res.Young, res.MarkedBlobs)
		if res.DamagedSessions > 0 || res.DamagedCheckpoints > 0 {
			g.Recorder.Eventf(job, nil, corev1.EventTypeWarning, ReasonGCSweepFinished, "Sweep",
				"Blob sweep of %s found %d committed session(s) without a log and %d checkpoint(s) with a manifest chunk missing or damaged: they cannot be restored; run agentrewind gc report on the store to name them",
				t.loc, res.DamagedSessions, res.DamagedCheckpoints)
		}
	default:
		log.Info("Blob sweep finished without a readable result", "problem", rep.Problem)
	}
}
