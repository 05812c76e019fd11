package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentrewindv1alpha1 "github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/controller"
	"github.com/agentrewind/agentrewind/internal/kubecreds"
	"github.com/agentrewind/agentrewind/internal/version"
)

// The manager's own RBAC: leader election, events, and the reviews that guard the secure metrics
// endpoint. Each controller declares what it needs next to its Reconcile.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// managerOptions are the manager subcommand's flags.
type managerOptions struct {
	kubeconfig              string
	metricsAddr             string
	secureMetrics           bool
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	watchNamespaces         []string
	zap                     zap.Options

	controllers controllerOptions
}

// controllerOptions are the flags of the controllers: the engine Jobs and the default store.
type controllerOptions struct {
	enabled                              bool
	engineImage, proxyImage              string
	jobSecretCA                          string
	jobTTL, jobDeadline, jobRetryAfter   time.Duration
	jobStuckCheck                        time.Duration
	storeEndpoint, storeRegion           string
	storeBucket, storePrefix             string
	jobSecret, jobSecretID, jobSecretKey string
	jobSecretToken                       string
	storeSyncNamespace                   string
	storeSyncInterval                    time.Duration
	upstreams                            controller.Upstreams
	gc                                   controller.GCOptions
	prices                               priceOptions
}

func (o *controllerOptions) register(f *pflag.FlagSet) {
	f.BoolVar(&o.enabled, "controllers", true, "run the AgentSession, ResumePlan, ForkRun and Checkpoint controllers (off: only the manager's endpoints and leader election)")
	f.StringVar(&o.engineImage, "engine-image", "", "the image engine Jobs run (this binary's image), also the rewind proxy beside a ForkRun's agent; required with --controllers")
	f.StringVar(&o.proxyImage, "proxy-image", "", "the image of the rewind proxy beside a recording's or a ForkRun's agent (the same binary); empty: --engine-image")
	f.DurationVar(&o.jobTTL, "job-ttl", 24*time.Hour, "how long a finished engine Job is kept for its logs before Kubernetes deletes it")
	f.DurationVar(&o.jobDeadline, "job-active-deadline", time.Hour, "how long one engine Job may run before Kubernetes stops it")
	f.DurationVar(&o.jobRetryAfter, "job-retry-after", time.Minute, "how long after a Job failed for a reason that may pass (store unavailable, session not pushed yet) it runs again")
	f.DurationVar(&o.jobStuckCheck, "job-stuck-check", time.Minute, "how often the pod of a running engine or fork Job is looked at for a container that cannot start (an image that cannot be pulled, a missing Secret key), which the owner's Reconciling condition then names; 0 never looks")
	f.StringVar(&o.storeEndpoint, "store-endpoint", "", "S3 endpoint of the default store (https://host[:port], or http:// in-cluster); the manager's own credentials come from "+
		blobstore.EnvAccessKeyID+" and "+blobstore.EnvSecretAccessKey+" in its environment")
	f.StringVar(&o.storeRegion, "store-region", "", "region of the default store's bucket (default us-east-1)")
	f.StringVar(&o.storeBucket, "store-bucket", "", "bucket of the default store; a session without spec.storage lives under <store-prefix>/<namespace>/ in it")
	f.StringVar(&o.storePrefix, "store-prefix", "", "key prefix of the default store in its bucket")
	f.StringVar(&o.jobSecret, "store-job-credentials-secret", "agentrewind-store",
		"Secret, in each session's namespace, holding the store credentials that namespace's engine Jobs use (best scoped to <store-prefix>/<namespace>/)")
	f.StringVar(&o.jobSecretID, "store-job-access-key-id-key", kubecreds.SecretKeyAccessKeyID, "key of the access key ID in that Secret")
	f.StringVar(&o.jobSecretKey, "store-job-secret-access-key-key", kubecreds.SecretKeySecretAccessKey, "key of the secret access key in that Secret")
	f.StringVar(&o.jobSecretToken, "store-job-session-token-key", "", "key of an optional session token in that Secret")
	f.StringVar(&o.jobSecretCA, "store-job-ca-key", "", "key of an optional PEM bundle in that Secret: the private CA that signed the store's certificate, which engine Jobs and proxies then trust beside the image's roots; empty: none")
	f.StringVar(&o.storeSyncNamespace, "store-sync-namespace", "",
		"namespace whose prefix of the default store (<store-prefix>/<namespace>/) the store sync lists, creating an AgentSession there for every committed session none records (sessions pushed from outside the cluster); empty disables the sync")
	f.DurationVar(&o.storeSyncInterval, "store-sync-interval", 5*time.Minute, "time between two passes of the store sync, the first at leader election; 0 disables the sync")
	f.StringVar(&o.upstreams.Anthropic, "anthropic-upstream", "", "base URL of the Anthropic-compatible provider or gateway the proxies of forks and recordings call live (default: the provider's own API)")
	f.StringVar(&o.upstreams.OpenAI, "openai-upstream", "", "base URL of the OpenAI-compatible provider or gateway the proxies of forks and recordings call live (default: the provider's own API)")
	o.gc.BindFlags(f)
	o.prices.register(f)
}

// skipControllerNameValidation lets one process start the manager more than once: controller-runtime
// refuses a second controller of a name for the process's lifetime, and the tests of this package run
// the manager command several times. The binary runs one manager and keeps the check.
var skipControllerNameValidation = false

// storeConfig checks the controllers' settings and returns the default store's: run before the manager
// is made, so that a missing or malformed flag is named before anything reaches the API server.
func (o *controllerOptions) storeConfig() (controller.StoreConfig, error) {
	if o.engineImage == "" || o.storeEndpoint == "" || o.storeBucket == "" {
		return controller.StoreConfig{}, errors.New("--engine-image, --store-endpoint and --store-bucket are required to run the controllers (or pass --controllers=false)")
	}
	creds, err := blobstore.CredentialsFromEnv(os.LookupEnv)
	if err != nil {
		return controller.StoreConfig{}, fmt.Errorf("the manager's store credentials: %w", err)
	}
	cfg := controller.StoreConfig{Endpoint: o.storeEndpoint, Region: o.storeRegion, Bucket: o.storeBucket, Prefix: o.storePrefix, Credentials: creds,
		JobSecret: controller.JobSecretKeys{Name: o.jobSecret, AccessKeyID: o.jobSecretID, SecretAccessKey: o.jobSecretKey, SessionToken: o.jobSecretToken, CA: o.jobSecretCA}}
	if err := (blobstore.Config{Endpoint: cfg.Endpoint, Bucket: cfg.Bucket, Prefix: cfg.Prefix, Credentials: creds}).Validate(); err != nil {
		return controller.StoreConfig{}, fmt.Errorf("the default store: %w", err)
	}
	if err := o.upstreams.Check(); err != nil {
		return controller.StoreConfig{}, err
	}
	if _, err := o.prices.table(); err != nil {
		return controller.StoreConfig{}, err
	}
	if o.storeSyncInterval < 0 {
		return controller.StoreConfig{}, errors.New("--store-sync-interval cannot be negative (0 disables the store sync)")
	}
	if o.jobStuckCheck < 0 {
		return controller.StoreConfig{}, errors.New("--job-stuck-check cannot be negative (0 never looks at a running Job's pod)")
	}
	if errs := validation.IsDNS1123Label(o.storeSyncNamespace); o.storeSyncNamespace != "" && len(errs) > 0 {
		return controller.StoreConfig{}, fmt.Errorf("--store-sync-namespace %q is not a namespace name: %s", o.storeSyncNamespace, strings.Join(errs, "; "))
	}
	return cfg, nil
}

// setup registers the controllers with mgr.
func (o *controllerOptions) setup(ctx context.Context, mgr ctrl.Manager) error {
	if !o.enabled {
		return nil
	}
	cfg, err := o.storeConfig()
	if err != nil {
		return err
	}
	prices, err := o.prices.table()
	if err != nil {
		return err
	}
	metrics := controller.NewMetrics(mgr.GetCache())
	if err := metrics.Register(crmetrics.Registry); err != nil {
		return fmt.Errorf("registering the operator's metrics: %w", err)
	}
	deps := controller.Deps{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    mgr.GetScheme(),
		Clock:     clock.RealClock{},
		Stores:    &controller.Stores{Config: cfg, Secrets: mgr.GetAPIReader()},
		Jobs:      controller.JobSettings{Image: o.engineImage, ProxyImage: o.proxyImage, TTLAfterFinished: o.jobTTL, ActiveDeadline: o.jobDeadline, RetryAfter: o.jobRetryAfter, StuckCheck: o.jobStuckCheck, Upstreams: o.upstreams},
		Metrics:   metrics,
		Prices:    prices,
	}
	sessions := &controller.AgentSessionReconciler{Deps: deps}
	sessions.Recorder = mgr.GetEventRecorder("agentsession-controller")
	if err := sessions.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the AgentSession controller: %w", err)
	}
	plans := &controller.ResumePlanReconciler{Deps: deps}
	plans.Recorder = mgr.GetEventRecorder("resumeplan-controller")
	if err := plans.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the ResumePlan controller: %w", err)
	}
	runs := &controller.ForkRunReconciler{Deps: deps}
	runs.Recorder = mgr.GetEventRecorder("forkrun-controller")
	if err := runs.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the ForkRun controller: %w", err)
	}
	checkpoints := &controller.CheckpointReconciler{Deps: deps}
	checkpoints.Recorder = mgr.GetEventRecorder("checkpoint-controller")
	if err := checkpoints.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the Checkpoint controller: %w", err)
	}
	// StorageBudget is newer than the other kinds: a manager started where its CRD is not installed yet,
	// or under a chart's RBAC that predates it (an upgrade under way), leaves budgets off rather than
	// never becoming ready on an informer it may not list.
	var budgetProbe agentrewindv1alpha1.StorageBudgetList
	if err := mgr.GetAPIReader().List(ctx, &budgetProbe, client.Limit(1)); meta.IsNoMatchError(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).Info("Left storage budgets off: the StorageBudget CRD is not installed or this manager may not list StorageBudgets; restart the manager once it may", "reason", err.Error())
	} else {
		budgets := &controller.StorageBudgetReconciler{Deps: deps}
		budgets.Recorder = mgr.GetEventRecorder("storagebudget-controller")
		if err := budgets.SetupWithManager(ctx, mgr); err != nil {
			return fmt.Errorf("setting up the StorageBudget controller: %w", err)
		}
		if err := controller.RegisterStorageCollector(crmetrics.Registry, mgr.GetCache()); err != nil {
			return fmt.Errorf("registering the storage budget metrics: %w", err)
		}
	}
	if o.storeSyncNamespace != "" && o.storeSyncInterval > 0 {
		sync := &controller.StoreSync{Client: mgr.GetClient(), Stores: deps.Stores, Recorder: mgr.GetEventRecorder("store-sync"), Metrics: metrics,
			Namespace: o.storeSyncNamespace, Interval: o.storeSyncInterval, Clock: clock.RealClock{}}
		if err := mgr.Add(sync); err != nil {
			return fmt.Errorf("adding the store sync: %w", err)
		}
	}
	collector, err := o.gc.Setup(ctx, mgr, deps)
	if err != nil {
		return fmt.Errorf("setting up the garbage collector: %w", err)
	}
	if collector != nil {
		collector.Observer = metrics
	}
	return nil
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(agentrewindv1alpha1.AddToScheme(scheme))
	return scheme
}

func newManagerCommand() *cobra.Command {
	opts := managerOptions{zap: zap.Options{Development: false}}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the operator: the controllers, metrics and health endpoints, with optional leader election",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runManager(cmd, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty uses $KUBECONFIG or the in-cluster config")
	f.StringVar(&opts.metricsAddr, "metrics-bind-address", ":8443", "address the Prometheus metrics endpoint binds to; 0 disables it")
	f.BoolVar(&opts.secureMetrics, "metrics-secure", true, "serve metrics over HTTPS, authenticated and authorized through the API server")
	f.StringVar(&opts.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz probes bind to")
	f.BoolVar(&opts.leaderElect, "leader-elect", false, "elect a leader so that only one of several manager replicas reconciles")
	f.StringVar(&opts.leaderElectionID, "leader-election-id", "agentrewind.agentrewind.io", "name of the Lease used for leader election")
	f.StringVar(&opts.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease; empty uses the pod's namespace")
	f.DurationVar(&opts.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a non-leader waits before it may take over an unrenewed lease")
	f.DurationVar(&opts.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps retrying to renew before it gives up leadership")
	f.DurationVar(&opts.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often leader election clients retry")
	f.StringSliceVar(&opts.watchNamespaces, "watch-namespaces", nil, "namespaces whose agentrewind objects, Jobs and Leases the manager watches and reconciles (comma-separated); empty is all. "+
		"--gc-namespaces and --store-sync-namespace must be among them")
	opts.controllers.register(f)
	zapFlags := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	opts.zap.BindFlags(zapFlags)
	f.AddGoFlagSet(zapFlags)
	return cmd
}

// watchCache limits the manager's cache, and so every controller, to the namespaces of
// --watch-namespaces (none: all namespaces). The garbage collector and the store sync read through the
// same cache, so the namespaces they are given must be watched.
func watchCache(watch, gcNamespaces []string, syncNamespace string) (cache.Options, error) {
	if len(watch) == 0 {
		return cache.Options{}, nil
	}
	namespaces := make(map[string]cache.Config, len(watch))
	for _, ns := range watch {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return cache.Options{}, fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		namespaces[ns] = cache.Config{}
	}
	for _, ns := range gcNamespaces {
		if _, ok := namespaces[ns]; !ok && ns != "" {
			return cache.Options{}, fmt.Errorf("--gc-namespaces names %q, which --watch-namespaces does not: the garbage collector only sees watched namespaces", ns)
		}
	}
	if _, ok := namespaces[syncNamespace]; !ok && syncNamespace != "" {
		return cache.Options{}, fmt.Errorf("--store-sync-namespace %q is not among --watch-namespaces: the store sync only sees watched namespaces", syncNamespace)
	}
	return cache.Options{DefaultNamespaces: namespaces}, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}

func runManager(cmd *cobra.Command, opts managerOptions) error {
	logger := zap.New(zap.UseFlagOptions(&opts.zap))
	ctrl.SetLogger(logger)
	log := logger.WithName("setup")

	cfg, err := restConfig(opts.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the cluster configuration: %w (set --kubeconfig or KUBECONFIG, or run in a pod)", err)
	}

	metricsOpts := metricsserver.Options{BindAddress: opts.metricsAddr, SecureServing: opts.secureMetrics}
	if opts.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if opts.controllers.enabled {
		if _, err := opts.controllers.storeConfig(); err != nil {
			return err
		}
	}
	cacheOpts, err := watchCache(opts.watchNamespaces, opts.controllers.gc.Namespaces, opts.controllers.storeSyncNamespace)
	if err != nil {
		return err
	}
	leaseDuration, renewDeadline, retryPeriod := opts.leaseDuration, opts.renewDeadline, opts.retryPeriod
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        newScheme(),
		Cache:                         controller.CacheOptions(cacheOpts),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        opts.probeAddr,
		LeaderElection:                opts.leaderElect,
		LeaderElectionID:              opts.leaderElectionID,
		LeaderElectionNamespace:       opts.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: &skipControllerNameValidation},
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := opts.controllers.setup(cmd.Context(), mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}

	log.Info("Starting manager", "version", version.Get().Version, "leaderElection", opts.leaderElect,
		"metricsAddress", opts.metricsAddr, "probeAddress", opts.probeAddr, "watchNamespaces", opts.watchNamespaces)
	if err := mgr.Start(cmd.Context()); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	log.Info("Manager stopped")
	return nil
}
