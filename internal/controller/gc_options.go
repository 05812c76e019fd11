package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// GCOptions are the garbage collector's flags.
type GCOptions struct {
	// Enabled runs the GC (--gc).
	Enabled bool
	// Interval is the time between two passes (--gc-interval).
	Interval time.Duration
	// Grace is how long a session stays once collectible, unless its spec.retention says otherwise.
	Grace time.Duration
	// DryRun writes reachability and says what would be deleted, and deletes nothing.
	DryRun bool
	// Namespaces are the namespaces collected; empty is all.
	Namespaces []string
	// SweepInterval is the time between two blob sweeps of a location; 0 runs none.
	SweepInterval time.Duration
	// SweepMargin is the sweep's safety margin (engine gc-sweep --margin).
	SweepMargin time.Duration
	// SweepLeaseDuration is how long the sweep lock stays held without a renewal.
	SweepLeaseDuration time.Duration
	// SweepServiceAccount is the ServiceAccount of the sweep Jobs. Empty, with SweepCreateRBAC the
	// manager creates SweepServiceAccount with a Role on the sweep Lease in each namespace swept;
	// without it no sweep runs (the manager's generated role cannot create RBAC objects).
	SweepServiceAccount string
	SweepCreateRBAC     bool
	// CheckpointKeep and CheckpointMaxBytes are the prune policy of each session's Checkpoints (0
	// disables a rule).
	CheckpointKeep     int
	CheckpointMaxBytes int64
}

// BindFlags registers the GC's flags with their defaults.
func (o *GCOptions) BindFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.Enabled, "gc", true, "run the garbage collector on the leader: reachability on every AgentSession, deletion of collectible sessions past their grace, checkpoint pruning, blob sweeps")
	f.DurationVar(&o.Interval, "gc-interval", 5*time.Minute, "time between two garbage collection passes, the first at leader election")
	f.DurationVar(&o.Grace, "gc-grace", 7*24*time.Hour, "how long a collectible session is kept after its verdict became collectible (spec.retention.gracePeriodSeconds overrides it); a reachable session is never deleted")
	f.BoolVar(&o.DryRun, "gc-dry-run", false, "write reachability and report (status, events) what would be deleted, deleting nothing")
	f.StringSliceVar(&o.Namespaces, "gc-namespaces", nil, "namespaces the garbage collector looks at (comma-separated); empty is all")
	f.DurationVar(&o.SweepInterval, "gc-sweep-interval", 24*time.Hour, "time between two blob sweep Jobs of a store location (never while one runs); 0 runs none")
	f.DurationVar(&o.SweepMargin, "gc-sweep-margin", 24*time.Hour, "the blob sweep's safety margin: an unreferenced blob stored less than this before the sweep is kept")
	f.DurationVar(&o.SweepLeaseDuration, "gc-sweep-lease-duration", time.Minute, "how long the blob sweep's Lease stays held without a renewal; a sweep that died frees it after that long")
	f.StringVar(&o.SweepServiceAccount, "gc-sweep-service-account", "", "ServiceAccount the blob sweep Jobs run as, which must be allowed get and update on Leases named agentrewind-gc-sweep-*; empty: see --gc-sweep-create-rbac")
	f.BoolVar(&o.SweepCreateRBAC, "gc-sweep-create-rbac", false, "without --gc-sweep-service-account, have the manager create "+SweepServiceAccount+" and a Role on the sweep Lease in each namespace swept; needs config/rbac/gc_sweep_rbac.yaml bound to the manager (off: no blob sweep runs, since the generated role cannot create RBAC)")
	f.IntVar(&o.CheckpointKeep, "gc-checkpoint-keep", 0, "Checkpoints with a workspace snapshot kept per session, newest first; 0 keeps all")
	f.Int64Var(&o.CheckpointMaxBytes, "gc-checkpoint-max-bytes", 0, "bound on the incremental bytes of each session's Checkpoints, oldest pruned first (never the newest); 0 is none")
}

// Validate checks the flags.
func (o *GCOptions) Validate() error {
	var errs []error
	if o.Interval <= 0 {
		errs = append(errs, errors.New("--gc-interval must be positive"))
	}
	if o.Grace < 0 || o.SweepInterval < 0 || o.SweepMargin < 0 {
		errs = append(errs, errors.New("--gc-grace, --gc-sweep-interval and --gc-sweep-margin cannot be negative"))
	}
	if o.SweepLeaseDuration < 3*time.Second {
		errs = append(errs, errors.New("--gc-sweep-lease-duration must be at least 3s"))
	}
	if o.CheckpointKeep < 0 || o.CheckpointMaxBytes < 0 {
		errs = append(errs, errors.New("--gc-checkpoint-keep and --gc-checkpoint-max-bytes cannot be negative"))
	}
	for _, ns := range o.Namespaces {
		if es := validation.IsDNS1123Label(ns); len(es) > 0 {
			errs = append(errs, fmt.Errorf("--gc-namespaces: %q is not a namespace name: %s", ns, strings.Join(es, "; ")))
		}
	}
	if sa := o.SweepServiceAccount; sa != "" {
		if es := validation.IsDNS1123Subdomain(sa); len(es) > 0 {
			errs = append(errs, fmt.Errorf("--gc-sweep-service-account %q: %s", sa, strings.Join(es, "; ")))
		}
	}
	return errors.Join(errs...)
}

// Setup adds the garbage collector to mgr (when enabled), with the controllers' deps; it runs on the
// leader only. It returns the collector, nil when disabled.
func (o *GCOptions) Setup(_ context.Context, mgr ctrl.Manager, deps Deps) (*GarbageCollector, error) {
	if !o.Enabled {
		return nil, nil
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ticker, ok := deps.Clock.(clock.WithTicker)
	if !ok {
		ticker = clock.RealClock{}
	}
	deps.Recorder = mgr.GetEventRecorder("gc-controller")
	g := &GarbageCollector{Deps: deps, Options: *o, Ticker: ticker}
	if err := mgr.Add(g); err != nil {
		return nil, fmt.Errorf("adding the garbage collector: %w", err)
	}
	return g, nil
}
