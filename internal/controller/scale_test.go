package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// The scale harness: N AgentSessions created in a namespace of their own, on the suite's one API server,
// and reconciled by one of two sides until every one is in its final state.
//
// Both sides get the same things: the same API server; the same N sessions (same names, same spec),
// created the same way (scaleCreators goroutines on the suite's client) from the same instant the clock
// starts; managers built by the same function (startScaleManager) with the same rest config (client-side
// rate limiting off, QPS -1, as ctrl.GetConfig leaves the operator's manager; the API server's priority
// and fairness is the only limit), the same MaxConcurrentReconciles for every controller, the operator's
// cache options (CacheOptions) limited to the run's namespace, and the same counting interceptor on the manager's client. The clock stops when
// an informer of the test's own has seen every session (and, for the controllers, every ResumePlan) in
// its final state. The sides run one after the other, the no-op first, each in a fresh namespace.
//
//   - noop: one reconciler that reads the session from the cache and, unless it already says so, marks it
//     Ready with one status patch. Its limit is the API server: one write per session and nothing else.
//   - controllers: the real AgentSessionReconciler and ResumePlanReconciler. A session is final when it
//     is Verified and Ready, mirrors its ResumePlan's verdict, and the ResumePlan is Ready with that verdict.
//     Along the way they add the finalizer, create the ResumePlan, create and read a verify Job and a
//     resume-plan Job, and write each object's status as it goes.
//
// envtest has no kubelet and no Job controller. The Jobs are finished by jobPlayer, which stands in for
// both with the least work that satisfies the Job contract (jobrun.go, jobs.Read), the same for every
// Job: it writes the engine's result to results/<job-uid>.json in the store and marks the Job complete
// (one status update). The result is not computed per Job: the real engine ran the verify and resume-plan
// tasks once, before the clock started, on a recorded session (templateResults), and the player writes
// those bytes with the Job's UID in place of the template's. So engine time is not measured; the
// controllers' time is (API round trips, cache, S3 reads of the results), with the player's own
// API writes and S3 puts competing for the same API server and store, as a kubelet's would.
//
// The interceptor counts every write the manager's client makes (create, update, patch, delete, the
// status subresource included; attempts that failed with a conflict are counted too, as they cost a
// round trip) and attributes it to the session that caused it: a session's and its ResumePlan's writes
// by name (the ResumePlan is named after its session), a Job's by its agentrewind.io/parent label (the
// session's or the ResumePlan's name). Events go through the recorder's own client, not the manager's,
// so they are counted apart, from the Events left in the namespace. It also records, per reconcile pass
// (controller-runtime's reconcile ID in the context), which objects at which resourceVersions the pass
// read: a pass that wrote after reading exactly what an earlier writing pass of the same controller had
// read reconciled one change twice. A write refused because the pass read a cache that had not yet seen
// the controller's own last write (a 409 on the optimistic lock, or AlreadyExists) is counted apart.

// scaleSide is which reconcilers a scale run measures.
type scaleSide string

const (
	sideNoop        scaleSide = "noop"
	sideControllers scaleSide = "controllers"
)

const (
	// scaleWorkers is every controller's MaxConcurrentReconciles on both sides. The operator's manager
	// runs the default of 1; both sides reach the same rates with 1 as with 4 (the API server is the
	// limit), and 4 keeps a slow round trip from stalling a whole run.
	scaleWorkers = 4
	// scaleCreators create the sessions in parallel, on both sides.
	scaleCreators = 8
	// steadyChanges are the changes a session goes through on the steady path, each of which the
	// controllers must react to: it was created, its verify Job finished, its resume-plan Job finished.
	steadyChanges = 3
	// noopReason is the reason the no-op reconciler marks a session Ready with.
	noopReason = "NoOpDone"
	// templateSession is the recorded session the engine judged once for every Job's result.
	templateSession = "template"
)

// scaleFigures is what one run measured.
type scaleFigures struct {
	side     scaleSide
	sessions int
	elapsed  time.Duration
	// writes are the successful writes per session, by "verb kind[/subresource]".
	writes map[string]map[string]int
	// failedWrites are write attempts the API server refused (conflicts, already exists), by reason.
	failedWrites map[string]int
	// passes counts reconcile passes by controller (the kind of the object it reconciled).
	passes map[string]int
	// repeated lists the passes that wrote after reading exactly what an earlier pass of the same
	// controller on the same object had read and written after: one change written twice.
	repeated []string
	// events are the Events written about the run's objects.
	events int
	// controlPlaneCPU is the CPU time kube-apiserver and etcd spent during the run: a figure the other
	// processes on the machine do not skew as much as they skew elapsed time.
	controlPlaneCPU time.Duration
}

func (f scaleFigures) perSecond() float64 { return float64(f.sessions) / f.elapsed.Seconds() }

// totalWrites sums the writes of every session, failed attempts included.
func (f scaleFigures) totalWrites() int {
	n := 0
	for _, byKind := range f.writes {
		for _, c := range byKind {
			n += c
		}
	}
	for _, c := range f.failedWrites {
		n += c
	}
	return n
}

// writesPerSession is the mean of writes (failed attempts included) per session.
func (f scaleFigures) writesPerSession() float64 {
	return float64(f.totalWrites()) / float64(f.sessions)
}

// maxWrites is the largest number of successful writes any one session caused.
func (f scaleFigures) maxWrites() int {
	m := 0
	for _, byKind := range f.writes {
		n := 0
		for _, c := range byKind {
			n += c
		}
		m = max(m, n)
	}
	return m
}

// writeMix is the successful writes by kind, summed over sessions, sorted, for reports.
func (f scaleFigures) writeMix() string {
	sum := map[string]int{}
	for _, byKind := range f.writes {
		for k, c := range byKind {
			sum[k] += c
		}
	}
	keys := make([]string, 0, len(sum))
	for k := range sum {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %.2f/session; ", k, float64(sum[k])/float64(f.sessions))
	}
	for k, c := range f.failedWrites {
		fmt.Fprintf(&b, "failed (%s): %.2f/session; ", k, float64(c)/float64(f.sessions))
	}
	return strings.TrimSuffix(b.String(), "; ")
}

func (f scaleFigures) String() string {
	return fmt.Sprintf("%s: %d sessions in %s (%.1f sessions/s); API server and etcd CPU %.1f ms/session; %.2f writes/session (%s); %d passes %v; %d events; %d repeated passes",
		f.side, f.sessions, f.elapsed.Round(time.Millisecond), f.perSecond(), f.cpuPerSession(), f.writesPerSession(), f.writeMix(), sum(f.passes), f.passes, f.events, len(f.repeated))
}

// cpuPerSession is the control plane's CPU time per session, in milliseconds.
func (f scaleFigures) cpuPerSession() float64 {
	return float64(f.controlPlaneCPU.Microseconds()) / 1000 / float64(f.sessions)
}

func sum(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// writeCounter is the interceptor that counts writes per session and records what each pass read.
type writeCounter struct {
	mu     sync.Mutex
	writes map[string]map[string]int
	failed map[string]int
	passes map[types.UID]*scalePass
	order  []types.UID
}

// scalePass is one reconcile pass: the object it reconciled, what it read, whether it wrote.
type scalePass struct {
	object string // Kind/name of its first read
	reads  []string
	wrote  bool // a write of the pass succeeded
}

func newWriteCounter() *writeCounter {
	return &writeCounter{writes: map[string]map[string]int{}, failed: map[string]int{}, passes: map[types.UID]*scalePass{}}
}

func (w *writeCounter) funcs() *interceptor.Funcs {
	return &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			w.read(ctx, c, key, obj, err)
			return err
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			w.wrote(ctx, c, "create", obj, "", err)
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := c.Update(ctx, obj, opts...)
			w.wrote(ctx, c, "update", obj, "", err)
			return err
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := c.Patch(ctx, obj, patch, opts...)
			w.wrote(ctx, c, "patch", obj, "", err)
			return err
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			err := c.Delete(ctx, obj, opts...)
			w.wrote(ctx, c, "delete", obj, "", err)
			return err
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			err := c.SubResource(sub).Create(ctx, obj, subObj, opts...)
			w.wrote(ctx, c, "create", obj, sub, err)
			return err
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			w.wrote(ctx, c, "update", obj, sub, err)
			return err
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			w.wrote(ctx, c, "patch", obj, sub, err)
			return err
		},
	}
}

func kindOf(c interface {
	GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error)
}, obj client.Object) string {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}

// pass is the record of the pass ctx belongs to; nil outside a reconcile (a watch's map function).
func (w *writeCounter) pass(ctx context.Context, object string) *scalePass {
	id := controller.ReconcileIDFromContext(ctx)
	if id == "" {
		return nil
	}
	p := w.passes[id]
	if p == nil {
		p = &scalePass{object: object}
		w.passes[id] = p
		w.order = append(w.order, id)
	}
	return p
}

func (w *writeCounter) read(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, err error) {
	kind := kindOf(c, obj)
	rv := obj.GetResourceVersion()
	if err != nil {
		rv = "absent"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.pass(ctx, kind+"/"+key.Name); p != nil {
		p.reads = append(p.reads, kind+"/"+key.Name+"@"+rv)
	}
}

func (w *writeCounter) wrote(ctx context.Context, c client.Client, verb string, obj client.Object, sub string, err error) {
	kind := kindOf(c, obj)
	owner := obj.GetName()
	if kind == "Job" {
		owner = obj.GetLabels()[jobs.LabelParent]
	}
	what := verb + " " + kind
	if sub != "" {
		what += "/" + sub
	}
	if errors.Is(err, context.Canceled) {
		return // the manager stopped after the run
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pass(ctx, kind+"/"+obj.GetName())
	if err != nil {
		w.failed[what+": "+string(apierrors.ReasonForError(err))]++
		return
	}
	if p != nil {
		p.wrote = true
	}
	if w.writes[owner] == nil {
		w.writes[owner] = map[string]int{}
	}
	w.writes[owner][what]++
}

// tally fills the figures from what the counter saw.
func (w *writeCounter) tally(f *scaleFigures) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f.writes, f.failedWrites, f.passes = w.writes, w.failed, map[string]int{}
	seen := map[string]bool{}
	for _, id := range w.order {
		p := w.passes[id]
		f.passes[strings.SplitN(p.object, "/", 2)[0]]++
		reads := slices.Clone(p.reads)
		slices.Sort(reads)
		key := p.object + " after reading " + strings.Join(slices.Compact(reads), ", ")
		if p.wrote && seen[key] {
			f.repeated = append(f.repeated, key)
		}
		seen[key] = seen[key] || p.wrote
	}
}

// scaleEnv is one run's namespace on the suite's API server, with the Jobs' store credentials.
type scaleEnv struct {
	tb  testing.TB
	ctx context.Context
	ns  string
}

func newScaleEnv(tb testing.TB, ctx context.Context, side scaleSide) *scaleEnv {
	tb.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scale-" + string(side) + "-"}}
	if err := apiServer.Client.Create(ctx, ns); err != nil {
		tb.Fatal(err)
	}
	e := &scaleEnv{tb: tb, ctx: ctx, ns: ns.Name}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: e.ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: jobSecret, Namespace: e.ns},
			Data: map[string][]byte{"accessKeyID": []byte(s3.AccessKey), "secretAccessKey": []byte(s3.SecretKey)}},
	} {
		if err := apiServer.Client.Create(ctx, o); err != nil {
			tb.Fatal(err)
		}
	}
	return e
}

// scaleConfig is the rest config of every manager in a scale run: the operator's (ctrl.GetConfig turns
// client-side rate limiting off and leaves flow control to the API server).
func scaleConfig() *rest.Config {
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// scaleDeps are the Deps of the controllers under test: the suite's store and Job settings, and, when
// mgr is given, its client and an event recorder.
func scaleDeps(mgr ctrl.Manager) Deps {
	d := Deps{
		Scheme: apiServer.Scheme, Clock: clocktesting.NewFakeClock(testNow),
		Stores: &Stores{Config: StoreConfig{Endpoint: "http://" + s3.Endpoint, Bucket: testBucket, Prefix: testPrefix,
			Credentials: blobstore.Credentials{AccessKeyID: s3.AccessKey, SecretAccessKey: blobstore.Secret(s3.SecretKey)},
			JobSecret:   JobSecretKeys{Name: jobSecret, AccessKeyID: "accessKeyID", SecretAccessKey: "secretAccessKey"}}},
		Jobs: JobSettings{Image: "registry.example/agentrewind:test", TTLAfterFinished: time.Hour, ActiveDeadline: 10 * time.Minute, RetryAfter: time.Minute},
	}
	if mgr != nil {
		d.Client, d.APIReader, d.Stores.Secrets = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetAPIReader()
		d.Recorder = mgr.GetEventRecorder("agentrewind-scale")
	}
	return d
}

// startScaleManager starts a manager whose cache sees only the run's namespace, with workers as every
// controller's MaxConcurrentReconciles and, when counter is given, its client counted. It returns a
// function that stops it and waits.
func (e *scaleEnv) startScaleManager(counter *writeCounter, workers int, setup func(mgr ctrl.Manager) error) (stop func()) {
	e.tb.Helper()
	opts := ctrl.Options{
		Scheme:                 apiServer.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: new(true), MaxConcurrentReconciles: workers},
		Cache:                  CacheOptions(cache.Options{DefaultNamespaces: map[string]cache.Config{e.ns: {}}}),
	}
	if counter != nil {
		funcs := counter.funcs()
		opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, *funcs), nil
		}
	}
	mgr, err := ctrl.NewManager(scaleConfig(), opts)
	if err != nil {
		e.tb.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		e.tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.tb.Errorf("manager: %v", err)
		}
	}
}

// noopReconciler is the baseline: read the session, mark it Ready with one status patch.
type noopReconciler struct{ client.Client }

func (r *noopReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s v1alpha1.AgentSession
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == noopReason && c.ObservedGeneration == s.Generation {
		return ctrl.Result{}, nil
	}
	base := s.DeepCopy()
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: noopReason, Message: "marked done without work", ObservedGeneration: s.Generation})
	s.Status.ObservedGeneration = s.Generation
	return settle(ctx, ctrl.Result{}, patchStatus(ctx, r.Client, &s, base, func(o client.Object) any { return o.(*v1alpha1.AgentSession).Status }))
}

// templateResults runs the real engine's verify and resume-plan tasks once, on a recorded session, in
// the Jobs the controllers build, and returns their results by purpose with the placeholder UID the
// player replaces by each Job's.
func (e *scaleEnv) templateResults() map[string][]byte {
	e.tb.Helper()
	dir := e.tb.TempDir()
	recordTemplate(e.tb, filepath.Join(dir, templateSession))
	store := e.store()
	if _, err := store.Push(e.ctx, filepath.Join(dir, templateSession)); err != nil {
		e.tb.Fatal(err)
	}
	deps := scaleDeps(nil)
	s := newSession(templateSession, templateSession)
	s.Namespace = e.ns
	spec, err := (&AgentSessionReconciler{Deps: deps}).verifyJob(s, deps.Stores.LocationOf(s))
	if err != nil {
		e.tb.Fatal(err)
	}
	rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Name: templateSession, Namespace: e.ns},
		Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: templateSession}}}
	out := map[string][]byte{}
	for _, spec := range []jobs.Spec{spec, (&ResumePlanReconciler{Deps: deps}).resumePlanJob(rp, s)} {
		job, err := jobs.Build(spec, apiServer.Scheme)
		if err != nil {
			e.tb.Fatal(err)
		}
		uid := templateUID(spec.Purpose)
		e.runEngine(job, uid, dir)
		data, err := store.GetResult(e.ctx, uid)
		if err != nil {
			e.tb.Fatalf("the %s result of the template session: %v", spec.Purpose, err)
		}
		res, err := task.Decode(data)
		if err != nil || res.Outcome != task.Succeeded {
			e.tb.Fatalf("the %s result of the template session: %v\n%s", spec.Purpose, err, data)
		}
		out[spec.Purpose] = data
	}
	return out
}

func templateUID(purpose string) string { return "00000000-template-" + purpose }

// runEngine runs a Job's engine container as the kubelet would, with uid as the Job's UID.
func (e *scaleEnv) runEngine(job *batchv1.Job, uid, dir string) {
	e.tb.Helper()
	c := job.Spec.Template.Spec.Containers[0]
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for _, v := range c.Env {
		val := v.Value
		switch src := v.ValueFrom; {
		case src == nil:
		case src.FieldRef != nil: // the Job UID label, the only field a Job's env reads
			val = uid
		case src.SecretKeyRef != nil:
			val = map[string]string{"accessKeyID": s3.AccessKey, "secretAccessKey": s3.SecretKey}[src.SecretKeyRef.Key]
		}
		env = append(env, v.Name+"="+val)
	}
	cmd := exec.Command(engineBin, c.Args...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		e.tb.Fatalf("engine %v: %v\n%s", c.Args, err, out)
	}
}

func (e *scaleEnv) store() *blobstore.SessionStore {
	e.tb.Helper()
	objects, err := blobstore.Open(e.ctx, blobstore.Config{Endpoint: "http://" + s3.Endpoint, Bucket: testBucket,
		Credentials: blobstore.Credentials{AccessKeyID: s3.AccessKey, SecretAccessKey: blobstore.Secret(s3.SecretKey)}})
	if err != nil {
		e.tb.Fatal(err)
	}
	layout, err := blobstore.NewLayout(testPrefix + "/" + e.ns)
	if err != nil {
		e.tb.Fatal(err)
	}
	return blobstore.NewSessionStore(objects, layout, blobstore.StoreOptions{})
}

// recordTemplate writes a small committed session: a start, a model call, a tool call, an end.
func recordTemplate(tb testing.TB, dir string) {
	tb.Helper()
	w, err := session.Create(dir, session.Meta{ID: templateSession, CreatedAt: 1700000000000, FingerprintMode: "strict"}, session.WriterOptions{BlobThreshold: 64})
	if err != nil {
		tb.Fatal(err)
	}
	events := []session.Event{
		{Kind: session.KindSessionStart},
		{Kind: session.KindModelCall, Request: &session.Request{Model: "m", Messages: []session.Message{{Role: "user", Content: []byte(`"hello"`)}}},
			Usage: &session.Usage{InputTokens: 900, OutputTokens: 120}},
		{Kind: session.KindToolCall, Name: "fetch", Args: []byte(`{}`), Result: []byte(`"` + strings.Repeat("result ", 20) + `"`)},
		{Kind: session.KindSessionEnd},
	}
	for i, ev := range events {
		ev.Step, ev.Seq, ev.Lane = int64(i), int64(i), "0"
		if err := w.Append(ev); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		tb.Fatal(err)
	}
}

// engineJobs limits the player to engine Jobs.
var engineJobs = predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[jobs.LabelManagedBy] == jobs.ManagedBy })

// jobPlayer finishes engine Jobs in place of the kubelet and the Job controller, with the same minimal
// work for each: the template result with the Job's UID put at results/<uid>.json, then the Job marked
// complete with one status update.
type jobPlayer struct {
	client.Client
	store   *blobstore.SessionStore
	results map[string][]byte
}

func (p *jobPlayer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job batchv1.Job
	if err := p.Get(ctx, req.NamespacedName, &job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if jobs.StateOf(&job) != jobs.Running {
		return ctrl.Result{}, nil
	}
	purpose := job.Labels[jobs.LabelPurpose]
	tmpl, ok := p.results[purpose]
	if !ok {
		return ctrl.Result{}, fmt.Errorf("job %s: no template result for purpose %q", job.Name, purpose)
	}
	data := bytes.ReplaceAll(tmpl, []byte(`"`+templateUID(purpose)+`"`), []byte(`"`+string(job.UID)+`"`))
	if err := p.store.PutResult(ctx, string(job.UID), data); err != nil {
		return ctrl.Result{}, err
	}
	now := metav1.Now()
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
	}
	return settle(ctx, ctrl.Result{}, p.Status().Update(ctx, &job))
}

// finalState says whether a run's session, and its ResumePlan for the controllers, are done.
type finalState struct {
	mu      sync.Mutex
	side    scaleSide
	verdict v1alpha1.ResumeVerdict // the template's, which every ResumePlan must reach
	session map[string]bool
	plan    map[string]bool
	want    int
	done    chan struct{}
}

func (f *finalState) observe(obj any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch o := obj.(type) {
	case *v1alpha1.AgentSession:
		c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady)
		ready := c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == o.Generation
		if f.side == sideNoop {
			f.session[o.Name] = ready && c.Reason == noopReason
		} else {
			f.session[o.Name] = ready && c.Reason == v1alpha1.ReasonVerified && o.Status.ResumeVerdict == f.verdict
		}
	case *v1alpha1.ResumePlan:
		c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady)
		f.plan[o.Name] = c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonVerdictComputed && o.Status.Verdict == f.verdict
	}
	n := 0
	for name, ok := range f.session {
		if ok && (f.side == sideNoop || f.plan[name]) {
			n++
		}
	}
	if n == f.want && f.done != nil {
		close(f.done)
		f.done = nil
	}
}

// runScale creates n sessions and measures one side reconciling them to their final state. then, when
// given, runs with every manager stopped and the final objects still in place (a restart's measure).
func runScale(tb testing.TB, side scaleSide, n, workers int, timeout time.Duration, then func(*scaleEnv)) scaleFigures {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newScaleEnv(tb, ctx, side)
	done := make(chan struct{})
	state := &finalState{side: side, session: map[string]bool{}, plan: map[string]bool{}, want: n, done: done}
	counter := newWriteCounter()

	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	switch side {
	case sideNoop:
		stops = append(stops, e.startScaleManager(counter, workers, func(mgr ctrl.Manager) error {
			return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.AgentSession{}).Named("scale-noop").Complete(&noopReconciler{mgr.GetClient()})
		}))
	case sideControllers:
		results := e.templateResults()
		res, err := task.Decode(bytes.ReplaceAll(results[string(task.ResumePlan)], []byte(templateUID(string(task.ResumePlan))), []byte("x")))
		if err != nil {
			tb.Fatal(err)
		}
		verdicts, err := apimap.ResumePlanVerdicts(res.ResumePlan)
		if err != nil {
			tb.Fatal(err)
		}
		state.verdict = verdicts.Verdict
		store := e.store()
		// The player has its own manager and client (not counted), with enough workers never to be the
		// bottleneck.
		stops = append(stops, e.startScaleManager(nil, 8, func(mgr ctrl.Manager) error {
			return ctrl.NewControllerManagedBy(mgr).For(&batchv1.Job{}, builder.WithPredicates(engineJobs)).Named("scale-job-player").
				Complete(&jobPlayer{Client: mgr.GetClient(), store: store, results: results})
		}))
		stops = append(stops, e.startScaleManager(counter, workers, func(mgr ctrl.Manager) error {
			deps := scaleDeps(mgr)
			for _, r := range []setupper{&AgentSessionReconciler{Deps: deps}, &ResumePlanReconciler{Deps: deps}} {
				if err := r.SetupWithManager(ctx, mgr); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	watchFinal(tb, ctx, e.ns, state)

	if path := os.Getenv("ARW_SCALE_APISERVER_PROFILE"); path != "" && side == sideControllers {
		go profileAPIServer(tb, ctx, path+"."+string(side), 30*time.Second)
	}
	cpu := controlPlaneCPU(tb)
	start := time.Now()
	createSessions(tb, ctx, e.ns, n)
	select {
	case <-done:
	case <-time.After(timeout):
		state.mu.Lock()
		var pending []string
		for i := range n {
			name := scaleName(i)
			if !state.session[name] || (side == sideControllers && !state.plan[name]) {
				pending = append(pending, name)
			}
		}
		state.mu.Unlock()
		tb.Fatalf("%s: %d of %d sessions not final after %s, such as %v", side, len(pending), n, timeout, pending[:min(5, len(pending))])
	}
	f := scaleFigures{side: side, sessions: n, elapsed: time.Since(start), controlPlaneCPU: controlPlaneCPU(tb) - cpu}
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	stops = nil
	counter.tally(&f)
	var events eventsv1.EventList
	if err := apiServer.Client.List(context.Background(), &events, client.InNamespace(e.ns)); err != nil {
		tb.Fatal(err)
	}
	f.events = len(events.Items)
	if then != nil {
		then(e)
	}
	e.cleanup()
	return f
}

// cleanup deletes the run's sessions, plans and Jobs, so that the managers of later tests, which watch
// every namespace, find nothing of the run left to reconcile.
func (e *scaleEnv) cleanup() {
	e.tb.Helper()
	ctx, c := context.Background(), apiServer.Client
	var list v1alpha1.AgentSessionList
	if err := c.List(ctx, &list, client.InNamespace(e.ns)); err != nil {
		e.tb.Fatal(err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if len(s.Finalizers) > 0 {
			base := s.DeepCopy()
			s.Finalizers = nil
			if err := c.Patch(ctx, s, client.MergeFrom(base)); err != nil {
				e.tb.Fatal(err)
			}
		}
	}
	for _, o := range []client.Object{&v1alpha1.AgentSession{}, &v1alpha1.ResumePlan{}, &batchv1.Job{}} {
		if err := c.DeleteAllOf(ctx, o, client.InNamespace(e.ns)); err != nil {
			e.tb.Fatal(err)
		}
	}
}

func scaleName(i int) string { return fmt.Sprintf("s-%04d", i) }

// createSessions creates n sessions from scaleCreators goroutines.
func createSessions(tb testing.TB, ctx context.Context, ns string, n int) {
	tb.Helper()
	next := make(chan int)
	errs := make(chan error, scaleCreators)
	var wg sync.WaitGroup
	for range scaleCreators {
		wg.Go(func() {
			for i := range next {
				s := newSession(scaleName(i), scaleName(i))
				s.Namespace = ns
				if err := apiServer.Client.Create(ctx, s); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := errors.Join(slicesOf(errs)...); err != nil {
		tb.Fatal(err)
	}
}

func slicesOf(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// controlPlaneCPU is the CPU time used so far by the suite's kube-apiserver and etcd, the children of
// this process of those names (Linux /proc; USER_HZ is 100 on every Linux this runs on).
func controlPlaneCPU(tb testing.TB) time.Duration {
	tb.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		tb.Fatal(err)
	}
	var ticks int64
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		comm, fields := string(b[open+1:end]), strings.Fields(string(b[end+1:]))
		// After the command: state, ppid, ..., utime and stime at 11 and 12.
		if len(fields) < 13 || fields[1] != strconv.Itoa(os.Getpid()) || (comm != "kube-apiserver" && comm != "etcd") {
			continue
		}
		for _, f := range fields[11:13] {
			n, _ := strconv.ParseInt(f, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * (time.Second / 100)
}

// profileAPIServer writes a CPU profile of kube-apiserver (its /debug/pprof, on by default) over the
// first seconds of a run to path, for `go tool pprof`; a failure is logged, not fatal.
func profileAPIServer(tb testing.TB, ctx context.Context, path string, d time.Duration) {
	hc, err := rest.HTTPClientFor(apiServer.Config)
	if err == nil {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(apiServer.Config.Host, "/")+fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), nil)
		if err == nil {
			var resp *http.Response
			if resp, err = hc.Do(req); err == nil {
				var b []byte
				b, err = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("%s: %.200s", resp.Status, b)
				}
				if err == nil {
					err = os.WriteFile(path, b, 0o644)
				}
			}
		}
	}
	if err != nil {
		tb.Logf("profiling kube-apiserver: %v", err)
	}
}

// watchFinal runs an informer of the test's own over the run's sessions and plans, feeding state.
func watchFinal(tb testing.TB, ctx context.Context, ns string, state *finalState) {
	tb.Helper()
	c, err := cache.New(scaleConfig(), cache.Options{Scheme: apiServer.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		tb.Fatal(err)
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    state.observe,
		UpdateFunc: func(_, o any) { state.observe(o) },
	}
	for _, obj := range []client.Object{&v1alpha1.AgentSession{}, &v1alpha1.ResumePlan{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			tb.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		tb.Fatal("the final-state informers did not sync")
	}
}
