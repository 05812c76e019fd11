package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"
	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/devenv"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/testenv"
)

// The suite shares one API server (the real generated CRDs), one versitygw and one build of the
// agentrewind binary, whose `engine` commands the tests run in place of the kubelet.
var (
	apiServer *testenv.APIServer
	s3        *devenv.S3Server
	engineBin string
	// testNow is the injected clock's time: evaluatedAt must be exactly it.
	testNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
)

const (
	testBucket = "operator-store"
	testPrefix = "cluster-a"
	jobSecret  = "agentrewind-store"
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	dir, err := os.MkdirTemp("", "controller-suite-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	built := make(chan error, 1)
	engineBin = filepath.Join(dir, "agentrewind")
	go func() { built <- buildEngine(engineBin) }()
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = apiServer.Stop() }()
	if s3, err = devenv.LaunchS3Server(filepath.Join(dir, "s3"), func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s3.Stop()
	c, err := s3.Client()
	if err == nil {
		err = c.MakeBucket(context.Background(), testBucket, minioBucketOptions)
	}
	if err == nil {
		err = <-built
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// buildEngine builds the binary the engine image holds, from this repository.
func buildEngine(out string) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/agentrewind")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the engine: %v\n%s", err, b)
	}
	return nil
}

// zapLevel logs errors only, unless CONTROLLER_TEST_VERBOSE is set: a test reads failures from
// cluster state, not from logs.
func zapLevel() zapcore.Level {
	if os.Getenv("CONTROLLER_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

// env is one test's namespace, store credentials and running manager.
type env struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	c     client.Client
	clock *clocktesting.FakeClock
	stop  func()
}

// newEnv makes a namespace with the Jobs' store credentials Secret in it.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctl-"}}
	if err := apiServer.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, ns: ns.Name, c: apiServer.Client, clock: clocktesting.NewFakeClock(testNow)}
	e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: e.ns}})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: jobSecret, Namespace: e.ns},
		Data: map[string][]byte{"accessKeyID": []byte(s3.AccessKey), "secretAccessKey": []byte(s3.SecretKey)}})
	return e
}

func (e *env) create(o client.Object) {
	e.t.Helper()
	if o.GetNamespace() == "" {
		o.SetNamespace(e.ns)
	}
	if err := e.c.Create(e.ctx, o); err != nil {
		e.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

var managerSeq atomic.Int64

// setupper is a reconciler a test manager runs.
type setupper interface {
	SetupWithManager(ctx context.Context, mgr ctrl.Manager) error
}

// runManager starts a manager of the test's own, with the Deps every reconciler under test shares;
// setup makes those reconcilers (n tells their event recorders apart from other managers'), funcs,
// when given, intercept the manager's client, and cacheOpts limit its cache. The manager stops when
// the test ends or stop is called.
func (e *env) runManager(funcs *interceptor.Funcs, cacheOpts cache.Options, setup func(mgr ctrl.Manager, deps *Deps, n int64) []setupper) (stop func()) {
	e.t.Helper()
	opts := ctrl.Options{
		Scheme:                 apiServer.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: new(true)},
		Cache:                  CacheOptions(cacheOpts), // the operator's, as cmd/agentrewind's manager sets them
	}
	if funcs != nil {
		opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, *funcs), nil
		}
	}
	mgr, err := ctrl.NewManager(apiServer.Config, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	deps := Deps{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Clock: e.clock,
		Stores: &Stores{Secrets: mgr.GetAPIReader(), Config: StoreConfig{Endpoint: "http://" + s3.Endpoint, Bucket: testBucket, Prefix: testPrefix,
			Credentials: blobstore.Credentials{AccessKeyID: s3.AccessKey, SecretAccessKey: blobstore.Secret(s3.SecretKey)},
			JobSecret:   JobSecretKeys{Name: jobSecret, AccessKeyID: "accessKeyID", SecretAccessKey: "secretAccessKey"}}},
		Jobs:   JobSettings{Image: "registry.example/agentrewind:test", TTLAfterFinished: time.Hour, ActiveDeadline: 10 * time.Minute, RetryAfter: time.Minute},
		Prices: price.Default(),
	}
	for _, r := range setup(mgr, &deps, managerSeq.Add(1)) {
		if err := r.SetupWithManager(e.ctx, mgr); err != nil {
			e.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("manager: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return stop
}

// startManager runs the AgentSession and ResumePlan reconcilers in a manager of their own; funcs,
// when given, intercept the manager's client. The manager stops when the test ends or stop is called.
func (e *env) startManager(funcs *interceptor.Funcs) (stop func()) {
	e.t.Helper()
	return e.runManager(funcs, cache.Options{}, func(mgr ctrl.Manager, deps *Deps, n int64) []setupper {
		sessions := &AgentSessionReconciler{Deps: *deps}
		sessions.Recorder = mgr.GetEventRecorder(fmt.Sprintf("agentsession-test-%d", n))
		plans := &ResumePlanReconciler{Deps: *deps}
		plans.Recorder = mgr.GetEventRecorder(fmt.Sprintf("resumeplan-test-%d", n))
		return []setupper{sessions, plans}
	})
}

// eventually polls cond until it holds, failing with its last word after 30s.
func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; last: %s", what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jobsOf lists the engine Jobs of a parent object for a purpose.
func (e *env) jobsOf(parent, purpose string) []batchv1.Job {
	e.t.Helper()
	var list batchv1.JobList
	if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns), client.MatchingLabels{jobs.LabelParent: parent, jobs.LabelPurpose: purpose}); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// waitJob waits for the one Job of parent and purpose.
func (e *env) waitJob(parent, purpose string) *batchv1.Job {
	e.t.Helper()
	var job *batchv1.Job
	e.eventually(purpose+" Job of "+parent, func() (bool, string) {
		l := e.jobsOf(parent, purpose)
		if len(l) == 1 {
			job = &l[0]
		}
		return len(l) == 1, fmt.Sprintf("%d Jobs", len(l))
	})
	return job
}

// storeKey is a key of the default store under the test's namespace prefix.
func (e *env) storeKey(parts ...string) string {
	return strings.Join(append([]string{testPrefix, e.ns}, parts...), "/")
}

// recordSession writes a committed session: a start, a model call with usage (cache split), a tool
// call whose result is big enough to become a blob, and an end unless open. Two sessions recorded with
// the same toolResult share that blob.
func recordSession(t *testing.T, id, toolResult string, open bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), id)
	w, err := session.Create(dir, session.Meta{ID: id, CreatedAt: 1700000000000, FingerprintMode: "strict"}, session.WriterOptions{BlobThreshold: 64})
	if err != nil {
		t.Fatal(err)
	}
	big, _ := json.Marshal(toolResult)
	msg, _ := json.Marshal("hello")
	events := []session.Event{
		{Kind: session.KindSessionStart},
		{Kind: session.KindModelCall, Request: &session.Request{Model: "m", Messages: []session.Message{{Role: "user", Content: msg}}},
			Usage: &session.Usage{InputTokens: 900, OutputTokens: 120, CacheCreationInputTokens: 100, CacheReadInputTokens: 500, CostMicroUSD: 4100}},
		{Kind: session.KindToolCall, Name: "fetch", Args: json.RawMessage(`{}`), Result: big},
	}
	if !open {
		events = append(events, session.Event{Kind: session.KindSessionEnd})
	}
	for i, ev := range events {
		ev.Step, ev.Seq, ev.Lane = int64(i), int64(i), "0"
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// push uploads a session directory to the store at prefix.
func push(t *testing.T, prefix, dir string) {
	t.Helper()
	st := openStore(t, prefix)
	if _, err := st.Push(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
}

func openStore(t *testing.T, prefix string) *blobstore.SessionStore {
	t.Helper()
	objects, err := blobstore.Open(context.Background(), blobstore.Config{Endpoint: "http://" + s3.Endpoint, Bucket: testBucket,
		Credentials: blobstore.Credentials{AccessKeyID: s3.AccessKey, SecretAccessKey: blobstore.Secret(s3.SecretKey)}})
	if err != nil {
		t.Fatal(err)
	}
	layout, err := blobstore.NewLayout(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return blobstore.NewSessionStore(objects, layout, blobstore.StoreOptions{})
}

// keys lists the store's keys under prefix.
func keys(t *testing.T, prefix string) []string {
	t.Helper()
	c, err := s3.Client()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for o := range c.ListObjects(context.Background(), testBucket, minioListOptions(prefix)) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		out = append(out, o.Key)
	}
	return out
}

// diff is cmp.Diff, for short assertions.
func diff(want, got any, opts ...cmp.Option) string { return cmp.Diff(want, got, opts...) }

var minioBucketOptions = minio.MakeBucketOptions{Region: "us-east-1"}

func minioListOptions(prefix string) minio.ListObjectsOptions {
	return minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
}
