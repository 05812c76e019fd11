package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// newStoreSync is the store sync of the test's namespace over the suite's store, with its own clock,
// event recorder and metrics.
func (e *env) newStoreSync() (*StoreSync, *events.FakeRecorder, *Metrics) {
	rec := events.NewFakeRecorder(16)
	m := NewMetrics(e.c)
	return &StoreSync{
		Client: e.c, Recorder: rec, Metrics: m, Namespace: e.ns, Interval: time.Minute, Clock: clocktesting.NewFakeClock(testNow),
		Stores: &Stores{Config: StoreConfig{Endpoint: "http://" + s3.Endpoint, Bucket: testBucket, Prefix: testPrefix,
			Credentials: blobstore.Credentials{AccessKeyID: s3.AccessKey, SecretAccessKey: blobstore.Secret(s3.SecretKey)}}},
	}, rec, m
}

// syncedSession is what the test compares of an AgentSession.
type syncedSession struct {
	Name, SessionID, Synced, Parent string
	ForkedAtStep                    *int64
}

func (e *env) sessionsInNamespace() []syncedSession {
	e.t.Helper()
	var list v1alpha1.AgentSessionList
	if err := e.c.List(e.ctx, &list, client.InNamespace(e.ns)); err != nil {
		e.t.Fatal(err)
	}
	var out []syncedSession
	for _, s := range list.Items {
		out = append(out, syncedSession{s.Name, s.Spec.SessionID, s.Labels[LabelSynced], s.Spec.ParentRef.Name, s.Spec.ForkedAtStep})
	}
	slices.SortFunc(out, func(a, b syncedSession) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// removeKey deletes one object of the store, as an upload cut short before it would have left it out.
func removeKey(t *testing.T, key string) {
	t.Helper()
	c, err := s3.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveObject(context.Background(), testBucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestStoreSyncCreatesAnAgentSessionPerCommittedSession pushes two sessions with the engine's blobstore
// (one id that is not a Kubernetes name), one whose upload stopped before meta.json, and one under
// another namespace's prefix: a pass makes exactly the two AgentSessions, and a second makes nothing.
func TestStoreSyncCreatesAnAgentSessionPerCommittedSession(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"plain-1", "Nightly_Run.7", "cut-short"} {
		push(t, e.storeKey(), recordSession(t, id, strings.Repeat(id+" ", 40), false))
	}
	removeKey(t, e.storeKey("sessions", "cut-short", session.MetaFile))
	push(t, testPrefix+"/"+e.ns+"-other", recordSession(t, "elsewhere", strings.Repeat("elsewhere ", 40), false))
	sync, _, m := e.newStoreSync()

	res, err := sync.Sync(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	nightly := syncName("Nightly_Run.7")
	want := []syncedSession{{Name: nightly, SessionID: "Nightly_Run.7", Synced: "true"}, {Name: "plain-1", SessionID: "plain-1", Synced: "true"}}
	if d := diff(want, e.sessionsInNamespace()); d != "" {
		t.Errorf("AgentSessions after one pass (-want +got):\n%s", d)
	}
	if d := diff([]string{nightly, "plain-1"}, res.Created); d != "" || len(res.Skipped) != 0 {
		t.Errorf("first pass created (-want +got):\n%s; skipped %v", d, res.Skipped)
	}

	res, err = sync.Sync(e.ctx)
	if err != nil || len(res.Created) != 0 || len(res.Skipped) != 0 {
		t.Errorf("second pass: created %v, skipped %v, %v; want nothing", res.Created, res.Skipped, err)
	}
	if d := diff(want, e.sessionsInNamespace()); d != "" {
		t.Errorf("AgentSessions after a second pass (-want +got):\n%s", d)
	}
	if got := scrape(t, m)["agentrewind_store_sync_sessions_created_total{}"]; got != 2 {
		t.Errorf("sessions created counter = %v, want 2", got)
	}
}

// recordFork writes a committed session whose meta.json says it was forked from parent at step.
func recordFork(t *testing.T, id, parent string, step int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), id)
	w, err := session.Create(dir, session.Meta{ID: id, Parent: parent, ForkedAtStep: &step, CreatedAt: 1700000000000, FingerprintMode: "strict"}, session.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal("hello")
	for i, ev := range []session.Event{{Kind: session.KindSessionStart},
		{Kind: session.KindModelCall, Request: &session.Request{Model: "m", Messages: []session.Message{{Role: "user", Content: msg}}}},
		{Kind: session.KindSessionEnd}} {
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

// TestStoreSyncLeavesATakenNameAndRunsOnItsClock: a committed session whose name an AgentSession of
// another session holds is skipped with a Warning event on that AgentSession; a fork's AgentSession
// names its parent's and its fork step; Start passes once at once, then on every tick of its clock.
func TestStoreSyncLeavesATakenNameAndRunsOnItsClock(t *testing.T) {
	e := newEnv(t)
	e.create(newSession("taken", "another-session"))
	e.create(newSession("root", "root-run"))
	push(t, e.storeKey(), recordSession(t, "taken", strings.Repeat("taken ", 40), false))
	push(t, e.storeKey(), recordFork(t, "fork-1", "root-run", 1))
	sync, rec, _ := e.newStoreSync()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- sync.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()

	var seen []string
	e.eventually("the event about the taken name", func() (bool, string) {
		select {
		case ev := <-rec.Events:
			seen = append(seen, ev)
		default:
		}
		return slices.ContainsFunc(seen, func(ev string) bool {
			return strings.HasPrefix(ev, "Warning "+ReasonSyncNameTaken+" session taken committed to s3://") && strings.HasSuffix(ev, ": taken records session another-session")
		}), fmt.Sprint(seen)
	})
	e.eventually("the first pass", func() (bool, string) {
		got := e.sessionsInNamespace()
		return len(got) == 3, fmt.Sprint(got)
	})
	want := []syncedSession{
		{Name: "fork-1", SessionID: "fork-1", Synced: "true", Parent: "root", ForkedAtStep: new(int64(1))},
		{Name: "root", SessionID: "root-run"},
		{Name: "taken", SessionID: "another-session"},
	}
	if d := diff(want, e.sessionsInNamespace()); d != "" {
		t.Errorf("AgentSessions after the first pass (-want +got):\n%s", d)
	}

	push(t, e.storeKey(), recordSession(t, "late", strings.Repeat("late ", 40), false))
	time.Sleep(500 * time.Millisecond)
	if got := e.sessionsInNamespace(); len(got) != 3 {
		t.Fatalf("a pass ran before the clock ticked: %v", got)
	}
	clk := sync.Clock.(*clocktesting.FakeClock)
	clk.Step(sync.Interval)
	e.eventually("the pass of the tick", func() (bool, string) {
		got := e.sessionsInNamespace()
		return slices.ContainsFunc(got, func(s syncedSession) bool { return s.Name == "late" }), fmt.Sprint(got)
	})
}

// TestSyncNamesAreKubernetesNamesThatNeverCollide: an id that is a DNS label is kept; any other is
// lowercased, cut and hashed, so it fits a label value and two ids never share a name.
func TestSyncNamesAreKubernetesNamesThatNeverCollide(t *testing.T) {
	long := strings.Repeat("a", 128)
	for _, tc := range []struct{ id, want string }{
		{"run-1", "run-1"},
		{"0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"Run_1", "run-1-" + syncName("Run_1")[6:]},
		{"run.1", "run-1-" + syncName("run.1")[6:]},
		{long, strings.Repeat("a", 54) + "-" + syncName(long)[55:]},
		{"_.", "session-" + syncName("_.")[8:]},
	} {
		got := syncName(tc.id)
		if got != tc.want || len(validation.IsDNS1123Label(got)) != 0 {
			t.Errorf("syncName(%q) = %q, want %q, a DNS label (%v)", tc.id, got, tc.want, validation.IsDNS1123Label(got))
		}
	}
	names := map[string]string{}
	for _, id := range []string{"run-1", "Run_1", "run.1", "RUN-1", "run_1", long, long + "b"} {
		n := syncName(id)
		if other, ok := names[n]; ok {
			t.Errorf("%q and %q share the name %q", id, other, n)
		}
		names[n] = id
	}
}
