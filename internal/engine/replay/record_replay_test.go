package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

const triageSystem = "You are a triage bot."

// recordTriage records the sample agent into a fresh directory and loads the recording.
func recordTriage(t *testing.T, cfg Config) (*session.Session, *counter) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "triage")
	tools := &counter{}
	res, err := Record(context.Background(), RecordOptions{Config: cfg, Dir: dir, ID: "triage", Model: triageModel(), Tools: triageTools(tools)}, triageAgent(triageSystem))
	if err != nil {
		t.Fatal(err)
	}
	if res.HarnessErr != nil {
		t.Fatal(res.HarnessErr)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, tools
}

// trajectoryEvent is what must be identical between a recorded event and its replay: everything but
// the step number and the wall-clock time, which a concurrent replay may legitimately change.
type trajectoryEvent struct {
	Kind     session.Kind
	Lane     string
	Seq      int64
	CallSite string
	Name     string
	// Fingerprint is the request or args hash of a call, the source of an entropy draw.
	Fingerprint string
	// Result is what the boundary answered, as JSON: the response, tool result or drawn value, and
	// the error when there was one.
	Result string
}

// trajectory projects events onto what a replay must reproduce, in log order.
func trajectory(events []session.Event) []trajectoryEvent {
	var out []trajectoryEvent
	for _, ev := range events {
		result, _ := json.Marshal(struct {
			Response *session.Response        `json:",omitempty"`
			Result   json.RawMessage          `json:",omitempty"`
			Value    json.RawMessage          `json:",omitempty"`
			Error    *session.SerializedError `json:",omitempty"`
			Stream   []session.Chunk          `json:",omitempty"`
		}{ev.Response, ev.Result, ev.Value, ev.Error, ev.Stream})
		out = append(out, trajectoryEvent{Kind: ev.Kind, Lane: ev.Lane, Seq: ev.Seq, CallSite: ev.CallSite, Name: ev.Name,
			Fingerprint: ev.RequestHash + ev.ArgsHash + string(ev.Source), Result: string(result)})
	}
	return out
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func kinds(events []session.Event) string {
	var ks []string
	for _, ev := range events {
		ks = append(ks, string(ev.Kind))
	}
	return strings.Join(ks, ",")
}

func TestRecordWritesACommittedSessionInInitiationOrder(t *testing.T) {
	s, tools := recordTriage(t, liveEntropy())
	type recorded struct {
		Step     int64
		Kind     session.Kind
		Source   session.EntropySource
		CallSite string
		Name     string
	}
	// The tools' call sites are derived from the stack: the function that called, in its file.
	const derived = "triageAgent@fake_test.go"
	want := []recorded{
		{0, session.KindSessionStart, "", "session", ""},
		{1, session.KindEntropy, session.SourceUUID, "uuid", ""},
		{2, session.KindEntropy, session.SourceClock, "clock", ""},
		{3, session.KindModelCall, "", "plan", ""},
		{4, session.KindToolCall, "", derived, "search_issues"},
		{5, session.KindModelCall, "", "decide", ""},
		{6, session.KindToolCall, "", derived, "add_label"},
		{7, session.KindLedger, "", "recorder", ""}, // the recorder's END
		{8, session.KindSessionEnd, "", "session", ""},
	}
	var got []recorded
	for _, ev := range s.Events {
		got = append(got, recorded{ev.Step, ev.Kind, ev.Source, ev.CallSite, ev.Name})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("recorded events (-want +got):\n%s", diff)
	}
	if tools.n.Load() != 2 {
		t.Errorf("tools ran %d times, want 2", tools.n.Load())
	}
	if len(s.Meta.EventsHash) != 64 || s.Meta.ID != "triage" || s.Meta.Events != int64(len(want)) {
		t.Errorf("meta.json: id %q, eventsHash %q, %d events", s.Meta.ID, s.Meta.EventsHash, s.Meta.Events)
	}
}

func TestReplayReproducesTheTrajectoryWithNoLiveCalls(t *testing.T) {
	s, _ := recordTriage(t, liveEntropy())
	for i := 0; i < 5; i++ { // replaying N times gives the same trajectory every time
		res, err := Replay(context.Background(), ReplayOptions{Config: liveEntropy(), Session: s,
			Model: failingModel{t}, Tools: failingTools(t, "search_issues", "add_label")}, triageAgent(triageSystem))
		if err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
		if diff := cmp.Diff(trajectory(s.Events), trajectory(res.Events)); diff != "" {
			t.Fatalf("replay %d trajectory differs from the recording (-recorded +replayed):\n%s", i, diff)
		}
		if res.LiveCalls != 0 || len(res.Drifts) != 0 {
			t.Fatalf("replay %d: %d live calls, drifts %v", i, res.LiveCalls, res.Drifts)
		}
	}
}

// TestEntropyInRequestsReplaysByteIdentical: the uuid drawn from the context is embedded in the prompt,
// so the replayed request must be byte-identical to the recorded one — or it would not match at all.
func TestEntropyInRequestsReplaysByteIdentical(t *testing.T) {
	s, _ := recordTriage(t, liveEntropy())
	res, err := Replay(context.Background(), ReplayOptions{Config: liveEntropy(), Session: s, Model: failingModel{t}}, triageAgent(triageSystem))
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(s.Events[3].Request)
	got, _ := json.Marshal(res.Events[3].Request)
	if diff := cmp.Diff(string(rec), string(got)); diff != "" {
		t.Fatalf("replayed request differs (-recorded +replayed):\n%s", diff)
	}
	if !strings.Contains(string(got), "00000000-0000-4000-8000-") {
		t.Fatalf("the request does not embed the drawn uuid: %s", got)
	}
}

func TestDuplicateRequestsAreDisambiguatedByCallSite(t *testing.T) {
	answers := map[string]string{}
	var mu sync.Mutex
	n := 0
	model := &fakeModel{answer: func(session.Request) string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return []string{"first", "second"}[(n-1)%2]
	}}
	req := session.Request{Model: "m", Messages: []session.Message{userMessage("same question")}}
	harness := func(order []string) Harness {
		return func(ctx context.Context, ac AgentContext) error {
			for _, site := range order {
				resp, err := ac.Model(ctx, req, Site(site))
				if err != nil {
					return err
				}
				mu.Lock()
				answers[site] = textOf(resp)
				mu.Unlock()
			}
			return nil
		}
	}
	dir := filepath.Join(t.TempDir(), "dup")
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, Model: model}, harness([]string{"a", "b"})); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Replay asks from site b first: it must get b's recorded answer, not the first in the bucket.
	answers = map[string]string{}
	if _, err := Replay(context.Background(), ReplayOptions{Session: s}, harness([]string{"b", "a"})); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "first", "b": "second"}, answers); diff != "" {
		t.Fatalf("answers by site (-want +got):\n%s", diff)
	}
}

// TestConcurrentToolCallsResolveByContentAndLane runs four tool calls in four lanes under several
// seeds. The recording starts them in one shuffled order and lets them complete in another (each live
// tool blocks until released); each replay starts them in a third, and being served from the recording
// each completes before the next starts. Every replay must reproduce the recording's whole trajectory —
// per lane the same call, fingerprint and answer — with no live call.
func TestConcurrentToolCallsResolveByContentAndLane(t *testing.T) {
	const n = 4
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9411))
			start := rng.Perm(n)
			finish, replayOrder := shuffledOtherThan(rng, start), shuffledOtherThan(rng, start)
			s, completed := recordConcurrentFetches(t, start, finish)
			if diff := cmp.Diff(finish, completed); diff != "" {
				t.Fatalf("order the recorded calls completed in (-want +got):\n%s", diff)
			}
			// Steps are assigned when a call starts, not when it completes: the k-th call started is step k+1.
			var gotSteps, wantSteps []string
			for _, ev := range s.Events {
				if ev.Kind == session.KindToolCall {
					gotSteps = append(gotSteps, fmt.Sprintf("step %d lane %s args %s", ev.Step, ev.Lane, ev.Args))
				}
			}
			for k, page := range start {
				wantSteps = append(wantSteps, fmt.Sprintf("step %d lane 0.%d args {\"page\":%d}", k+1, page+1, page))
			}
			if diff := cmp.Diff(wantSteps, gotSteps); diff != "" {
				t.Fatalf("recorded tool calls (-want +got):\n%s", diff)
			}

			gate := newGates(n)
			var mu sync.Mutex
			var served []int
			res, err := Replay(context.Background(), ReplayOptions{Session: s, Model: failingModel{t}, Tools: failingTools(t, "fetch")},
				concurrentFetches(gate, &mu, &served, func() error {
					for _, page := range replayOrder {
						close(gate.turn[page])
						if err := waitFor(gate.done[page], "replayed call of page %d", page); err != nil {
							return err
						}
					}
					return nil
				}))
			if err != nil {
				t.Fatalf("replay in order %v: %v", replayOrder, err)
			}
			if diff := cmp.Diff(replayOrder, served); diff != "" {
				t.Fatalf("order the replayed calls were served in (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(byLane(trajectory(s.Events)), byLane(trajectory(res.Events))); diff != "" {
				t.Fatalf("replay in order %v differs from the recording (-recorded +replayed):\n%s", replayOrder, diff)
			}
			if res.LiveCalls != 0 || len(res.Reorders) != 0 || len(res.Drifts) != 0 {
				t.Fatalf("live calls %d, reorders %v, drifts %v", res.LiveCalls, res.Reorders, res.Drifts)
			}
		})
	}
}

// shuffledOtherThan returns a permutation of as many elements as order that differs from it.
func shuffledOtherThan(rng *rand.Rand, order []int) []int {
	for {
		if p := rng.Perm(len(order)); !slices.Equal(p, order) {
			return p
		}
	}
}

// gates sequence the calls of concurrentFetches: turn[i] lets page i's call start, began[i] says the
// live tool for page i is running, release[i] lets it return, done[i] says the agent has its answer.
type gates struct{ turn, began, release, done []chan struct{} }

func newGates(n int) *gates {
	mk := func() []chan struct{} {
		chans := make([]chan struct{}, n)
		for i := range chans {
			chans[i] = make(chan struct{})
		}
		return chans
	}
	return &gates{turn: mk(), began: mk(), release: mk(), done: mk()}
}

func waitFor(ch <-chan struct{}, what string, args ...any) error {
	select {
	case <-ch:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("timed out waiting for the "+what, args...)
	}
}

// concurrentFetches spawns one lane per page, each fetching its page when its turn comes and checking
// the answer, appends each page to completed as its call returns, and lets schedule drive the gates.
func concurrentFetches(g *gates, mu *sync.Mutex, completed *[]int, schedule func() error) Harness {
	return func(ctx context.Context, ac AgentContext) error {
		errs := make([]error, len(g.turn))
		var wg sync.WaitGroup
		for page := range g.turn {
			laneCtx := ac.Go(ctx)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(g.done[page])
				if errs[page] = waitFor(g.turn[page], "turn of page %d", page); errs[page] != nil {
					return
				}
				out, err := ac.Tool(laneCtx, "fetch", map[string]int{"page": page})
				if err == nil && string(out) != fmt.Sprintf(`{"page":%d}`, page) {
					err = fmt.Errorf("page %d was answered %s", page, out)
				}
				mu.Lock()
				*completed = append(*completed, page)
				mu.Unlock()
				errs[page] = err
			}()
		}
		err := schedule()
		wg.Wait()
		return errors.Join(append(errs, err)...)
	}
}

// recordConcurrentFetches records concurrentFetches with the calls started in order start and, once
// all are running, completed in order finish. It returns the recording and the observed completion order.
func recordConcurrentFetches(t *testing.T, start, finish []int) (*session.Session, []int) {
	t.Helper()
	g := newGates(len(start))
	tools := map[string]Tool{"fetch": func(_ context.Context, args json.RawMessage) (any, error) {
		var a struct{ Page int }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		close(g.began[a.Page])
		return args, waitFor(g.release[a.Page], "release of page %d", a.Page)
	}}
	var mu sync.Mutex
	var completed []int
	dir := filepath.Join(t.TempDir(), "concurrent")
	rec, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools}, concurrentFetches(g, &mu, &completed, func() error {
		for _, page := range start {
			close(g.turn[page])
			if err := waitFor(g.began[page], "recorded call of page %d to start", page); err != nil {
				return err
			}
		}
		for _, page := range finish {
			close(g.release[page])
			if err := waitFor(g.done[page], "recorded call of page %d to return", page); err != nil {
				return err
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if rec.HarnessErr != nil {
		t.Fatal(rec.HarnessErr)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, completed
}

// byLane orders a trajectory by lane, then seq: the order concurrent calls are compared in, since
// their global steps depend on which started first.
func byLane(events []trajectoryEvent) []trajectoryEvent {
	out := slices.Clone(events)
	slices.SortStableFunc(out, func(a, b trajectoryEvent) int {
		if c := strings.Compare(a.Lane, b.Lane); c != 0 {
			return c
		}
		return int(a.Seq - b.Seq)
	})
	return out
}

func TestControlFlowChangeIsADriftAtTheRightStep(t *testing.T) {
	s, _ := recordTriage(t, liveEntropy())
	// The agent's prompt changed: the first model call (step 3) no longer matches.
	_, err := Replay(context.Background(), ReplayOptions{Config: liveEntropy(), Session: s}, triageAgent("You are a careful triage bot."))
	var d *DriftError
	if !errors.As(err, &d) {
		t.Fatalf("got %v, want a *DriftError", err)
	}
	if d.Step != 3 || d.Kind != session.KindModelCall || d.CallSite != "plan" {
		t.Fatalf("drift at step %d (%s from %s), want step 3 model_call from plan", d.Step, d.Kind, d.CallSite)
	}
	if d.Nearest == nil || d.Nearest.Step != 3 || d.ExpectedFingerprint() != s.Events[3].RequestHash {
		t.Fatalf("nearest recorded call: %+v", d.Nearest)
	}
	msg := d.Error()
	for _, want := range []string{"drift at step 3", `system: "You are a triage bot." → "You are a careful triage bot."`, "expected model_call at step 3 from plan"} {
		if !strings.Contains(msg, want) {
			t.Errorf("drift message lacks %q:\n%s", want, msg)
		}
	}
}

func TestAReplayThatEndsEarlyIsADrift(t *testing.T) {
	s, _ := recordTriage(t, liveEntropy())
	stopsAfterPlanning := func(ctx context.Context, ac AgentContext) error {
		_, _ = ac.UUID(ctx)
		_, _ = ac.Clock(ctx)
		return nil
	}
	_, err := Replay(context.Background(), ReplayOptions{Session: s}, stopsAfterPlanning)
	var d *DriftError
	if !errors.As(err, &d) || d.Step != 3 || !strings.Contains(d.Error(), "the recording has 4 more call(s)") {
		t.Fatalf("got %v, want a drift at step 3 saying 4 calls were left", err)
	}
}

func TestDriftPolicies(t *testing.T) {
	s, _ := recordTriage(t, liveEntropy())
	changed := triageAgent("You are a careful triage bot.")
	t.Run("Warn never answers a changed request with another request's recording", func(t *testing.T) {
		_, err := Replay(context.Background(), ReplayOptions{Config: liveEntropy(), Session: s, DriftPolicy: Warn, Model: failingModel{t}}, changed)
		var d *DriftError
		if !errors.As(err, &d) || d.Step != 3 || d.Kind != session.KindModelCall {
			t.Fatalf("got %v, want the changed model call at step 3 to fail", err)
		}
	})
	t.Run("Passthrough sends unmatched calls live", func(t *testing.T) {
		model := triageModel()
		res, err := Replay(context.Background(), ReplayOptions{Config: liveEntropy(), Session: s, DriftPolicy: Passthrough, Model: model}, changed)
		if err != nil {
			t.Fatal(err)
		}
		if model.calls.Load() != 2 || res.LiveCalls != 2 {
			t.Fatalf("live model calls %d (result says %d), want 2", model.calls.Load(), res.LiveCalls)
		}
	})
	t.Run("Passthrough without a live model is refused up front", func(t *testing.T) {
		_, err := Replay(context.Background(), ReplayOptions{Session: s, DriftPolicy: Passthrough}, changed)
		if !errors.Is(err, ErrLiveModelRequired) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestToolResultThatIsNotJSONFailsAtRecordTime(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bad-tool")
	tools := map[string]Tool{"open": func(context.Context, json.RawMessage) (any, error) { return make(chan int), nil }}
	res, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		_, err := ac.Tool(ctx, "open", map[string]string{"path": "/tmp/x"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var se *SerializationError
	if !errors.As(res.HarnessErr, &se) || se.Tool != "open" || se.What != "result" {
		t.Fatalf("got %v, want a SerializationError for the result of open", res.HarnessErr)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ev := s.Events[1]; ev.Result != nil || ev.Error == nil || ev.Error.Name != "SerializationError" {
		t.Fatalf("the broken value was recorded: %+v", ev)
	}
}

func TestLargeResponsesAreExternalisedAndReplayed(t *testing.T) {
	big := strings.Repeat("lorem ipsum ", 3000) // ~36 KiB
	model := &fakeModel{answer: func(session.Request) string { return big }}
	harness := func(ctx context.Context, ac AgentContext) error {
		resp, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("write a lot")}})
		if err != nil {
			return err
		}
		if textOf(resp) != big {
			return errors.New("truncated response")
		}
		return nil
	}
	dir := filepath.Join(t.TempDir(), "big")
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, Model: model}, harness); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, session.EventsFile))
	if len(raw) > 8<<10 {
		t.Fatalf("events.jsonl is %d bytes: the response was not externalised", len(raw))
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(session.Blobs(s.Events[1:2])) == 0 { // a field blob, or the content's definition (defBlobs)
		t.Fatalf("no blob reference: blobs %v, defBlobs %v", s.Events[1].Blobs, s.Events[1].DefBlobs)
	}
	if _, err := Replay(context.Background(), ReplayOptions{Session: s}, harness); err != nil {
		t.Fatal(err)
	}
}

func TestStreamingIsRecordedAndReEmitted(t *testing.T) {
	model := triageModel()
	var got []string
	harness := func(ctx context.Context, ac AgentContext) error {
		got = nil
		_, err := ac.ModelStream(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("Issue 1")}}, func(c json.RawMessage) error {
			got = append(got, string(c))
			return nil
		})
		return err
	}
	dir := filepath.Join(t.TempDir(), "stream")
	if _, err := Record(context.Background(), RecordOptions{Config: liveEntropy(), Dir: dir, Model: model}, harness); err != nil {
		t.Fatal(err)
	}
	recorded := strings.Join(got, "")
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	chunks := s.Events[1].Stream
	if len(chunks) != 7 || chunks[1].OffsetMs <= 0 {
		t.Fatalf("recorded chunks %+v", chunks)
	}
	var slept []int64
	if _, err := Replay(context.Background(), ReplayOptions{Session: s, PreserveTiming: true,
		Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d.Milliseconds()); return nil }}, harness); err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	for i, c := range chunks {
		offsets = append(offsets, c.OffsetMs)
		if i > 0 {
			offsets[i] -= chunks[i-1].OffsetMs
		}
	}
	if diff := cmp.Diff(recorded, strings.Join(got, "")); diff != "" {
		t.Fatalf("re-emitted chunks (-recorded +replayed):\n%s", diff)
	}
	if diff := cmp.Diff(offsets, slept); diff != "" {
		t.Fatalf("waits between chunks in ms (-recorded +replayed):\n%s", diff)
	}
}

func TestOutOfOrderCallsInALaneAreServedAndReported(t *testing.T) {
	tools := map[string]Tool{"get": func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }}
	agent := func(order ...string) Harness {
		return func(ctx context.Context, ac AgentContext) error {
			for _, k := range order {
				if _, err := ac.Tool(ctx, "get", map[string]string{"k": k}, Site("get")); err != nil {
					return err
				}
			}
			return nil
		}
	}
	dir := filepath.Join(t.TempDir(), "order")
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools}, agent("a", "b")); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	res, err := Replay(context.Background(), ReplayOptions{Session: s, Config: Config{Logf: func(f string, a ...any) { logged = append(logged, f) }}}, agent("b", "a"))
	if err != nil {
		t.Fatalf("a reordered lane is a diagnostic, not a drift: %v", err)
	}
	if diff := cmp.Diff([]Reorder{{Lane: "0", ExpectedSeq: 1, ServedSeq: 2}}, res.Reorders); diff != "" {
		t.Fatalf("reorders (-want +got):\n%s", diff)
	}
	if len(logged) != 1 {
		t.Fatalf("logged %q, want the one reorder", logged)
	}
}

func TestCostIsAccountedPerStepAndPerRun(t *testing.T) {
	s, _ := recordTriage(t, liveEntropy())
	var perStep session.Usage
	steps := 0
	for _, ev := range s.Events {
		if ev.Kind == session.KindModelCall {
			if ev.Usage == nil || ev.Usage.CostMicroUSD != 7 {
				t.Fatalf("step %d usage %+v", ev.Step, ev.Usage)
			}
			perStep.Add(ev.Usage)
			steps++
		}
	}
	if steps != 2 || perStep.CostMicroUSD != 14 {
		t.Fatalf("%d model calls costing %d micro-dollars, want 2 costing 14", steps, perStep.CostMicroUSD)
	}
	if diff := cmp.Diff(perStep, Trace(s.Events).Usage()); diff != "" {
		t.Fatalf("run total against the sum of the steps (-steps +run):\n%s", diff)
	}
}

// TestStructuralFingerprintsIgnoreSamplingParameters: a replay that changed only the temperature drifts
// under strict fingerprints and matches under structural ones.
func TestStructuralFingerprintsIgnoreSamplingParameters(t *testing.T) {
	agent := func(temperature string) Harness {
		return func(ctx context.Context, ac AgentContext) error {
			_, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("hi")},
				Params: map[string]json.RawMessage{"temperature": json.RawMessage(temperature), "stream": json.RawMessage("false")}})
			return err
		}
	}
	for _, mode := range []struct {
		mode    fingerprint.Mode
		drifted bool
	}{{fingerprint.Strict, true}, {fingerprint.Structural, false}} {
		t.Run(string(mode.mode), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			cfg := Config{FingerprintMode: mode.mode}
			if _, err := Record(context.Background(), RecordOptions{Config: cfg, Dir: dir, Model: triageModel()}, agent("0.2")); err != nil {
				t.Fatal(err)
			}
			s, err := session.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if s.Meta.FingerprintMode != string(mode.mode) {
				t.Fatalf("meta fingerprint mode %q", s.Meta.FingerprintMode)
			}
			// The replay takes the recording's mode without being told.
			_, err = Replay(context.Background(), ReplayOptions{Session: s}, agent("0.7"))
			var d *DriftError
			if drifted := errors.As(err, &d); drifted != mode.drifted {
				t.Fatalf("drift = %v (%v), want %v", drifted, err, mode.drifted)
			}
		})
	}
	t.Run("a conflicting mode is refused", func(t *testing.T) {
		s, _ := recordTriage(t, liveEntropy())
		_, err := Replay(context.Background(), ReplayOptions{Config: Config{FingerprintMode: fingerprint.Structural}, Session: s}, triageAgent(triageSystem))
		if err == nil || !strings.Contains(err.Error(), "recorded with strict fingerprints") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestAPanickingAgentIsStillRecorded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "crash")
	res, err := Record(context.Background(), RecordOptions{Config: liveEntropy(), Dir: dir}, func(ctx context.Context, ac AgentContext) error {
		if _, err := ac.UUID(ctx); err != nil {
			return err
		}
		panic("index out of range")
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.HarnessErr, ErrHarnessPanicked) || !strings.Contains(res.HarnessErr.Error(), "index out of range") {
		t.Fatalf("harness error %v", res.HarnessErr)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatalf("the crashed run was not committed: %v", err)
	}
	if diff := cmp.Diff("session_start,entropy,ledger,session_end", kinds(s.Events)); diff != "" {
		t.Fatalf("recorded kinds (-want +got):\n%s", diff)
	}
	if *s.Events[3].OK {
		t.Fatal("session_end of a crashed run says ok")
	}
	// The recorder's END says the run failed: a crash is a stop without finishing.
	if st := ledger.Fold(s.Events); st.End == nil || st.End.How != ledger.EndFailed || !st.Suspended || st.Stop != ledger.StopFailed {
		t.Fatalf("end %+v suspended %v stop %q, want a failed end that suspends the run", st.End, st.Suspended, st.Stop)
	}
}

type failingKeys struct{}

func (failingKeys) Key(context.Context) ([]byte, error) {
	return nil, errors.New("key service unavailable")
}

func TestARecordingSurvivesAVaultThatCannotBeSealed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "no-vault")
	model := &fakeModel{answer: func(session.Request) string { return "key: " + canary }}
	rec, err := Record(context.Background(), RecordOptions{Config: Config{Keys: failingKeys{}}, Dir: dir, Model: model},
		func(ctx context.Context, ac AgentContext) error {
			_, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("hi")}})
			return err
		})
	if !errors.Is(err, ErrVaultNotSealed) || rec == nil {
		t.Fatalf("got %v (result %v), want the recording and ErrVaultNotSealed", err, rec)
	}
	if _, err := session.Open(dir); err != nil {
		t.Fatalf("the recording was not committed: %v", err)
	}
	assertNoCanary(t, dir)
}

// TestADriftTheAgentIgnoresStillFailsTheReplay: an agent that swallows the error of a call the
// recording does not hold must not make a strict replay pass.
func TestADriftTheAgentIgnoresStillFailsTheReplay(t *testing.T) {
	s, _ := recordTriage(t, liveEntropy())
	careless := func(ctx context.Context, ac AgentContext) error {
		_, _ = ac.Tool(ctx, "ping", map[string]int{"n": 1}) // not in the recording; error ignored
		return triageAgent(triageSystem)(ctx, ac)
	}
	_, err := Replay(context.Background(), ReplayOptions{Config: liveEntropy(), Session: s}, careless)
	var d *DriftError
	if !errors.As(err, &d) || d.Kind != session.KindToolCall {
		t.Fatalf("got %v, want the ignored tool call's drift", err)
	}
}

func TestWarnNeverAnswersAToolWithAnotherToolsRecording(t *testing.T) {
	tools := map[string]Tool{"a": func(context.Context, json.RawMessage) (any, error) { return "A", nil },
		"b": func(context.Context, json.RawMessage) (any, error) { return "B", nil }}
	dir := filepath.Join(t.TempDir(), "warn")
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		if _, err := ac.Tool(ctx, "a", 1); err != nil {
			return err
		}
		_, err := ac.Tool(ctx, "b", 2)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got json.RawMessage
	_, err = Replay(context.Background(), ReplayOptions{Session: s, DriftPolicy: Warn}, func(ctx context.Context, ac AgentContext) error {
		_, _ = ac.Tool(ctx, "c", 9) // no recording of c: not answered with a's
		var err error
		got, err = ac.Tool(ctx, "a", 1)
		return err
	})
	var d *DriftError
	if !errors.As(err, &d) || d.Kind != session.KindToolCall || string(got) != `"A"` {
		t.Fatalf("err %v, a answered %s; want a's own answer and the unanswerable c reported", err, got)
	}
}

func TestAPanickingToolIsRecordedAsAnError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tool-panic")
	tools := map[string]Tool{"boom": func(context.Context, json.RawMessage) (any, error) { panic("disk on fire") }}
	_, err := Record(context.Background(), RecordOptions{Dir: dir, Tools: tools}, func(ctx context.Context, ac AgentContext) error {
		_, err := ac.Tool(ctx, "boom", 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("session_start,tool_call,ledger,session_end", kinds(s.Events)); diff != "" {
		t.Fatalf("recorded kinds (-want +got):\n%s", diff)
	}
	if e := s.Events[1].Error; e == nil || e.Name != "Panic" || !strings.Contains(e.Message, "disk on fire") {
		t.Fatalf("tool error %+v, want the panic", e)
	}
}

func TestReplayRefusesARedactorWithoutTheRecordingsPatterns(t *testing.T) {
	user, err := redact.ParsePatterns([]string{"internal-token=itk_[a-z0-9]{20}"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Redactor: redact.New(append(redact.BuiltinPatterns(), user...))}
	dir := filepath.Join(t.TempDir(), "custom")
	if _, err := Record(context.Background(), RecordOptions{Config: cfg, Dir: dir, Model: triageModel()}, func(ctx context.Context, ac AgentContext) error {
		_, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("itk_abcdefghij0123456789")}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Replay(context.Background(), ReplayOptions{Session: s}, func(context.Context, AgentContext) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "internal-token") {
		t.Fatalf("got %v, want a refusal naming the missing pattern", err)
	}
}

// TestWarnServesARequestFromAMovedCallSiteAndCountsIt records two model calls from named call sites,
// then replays with the same requests from renamed sites: Warn serves each its own recorded answer (the
// bytes are asserted) and counts both as tolerated drifts; Strict serves them silently. An entropy draw
// with nothing recorded left fails under Warn instead of drawing live.
func TestWarnServesARequestFromAMovedCallSiteAndCountsIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "moved")
	model := &fakeModel{answer: func(req session.Request) string { return "answer to " + lastUser(req) }}
	agent := func(first, second string, extraDraw bool) Harness {
		return func(ctx context.Context, ac AgentContext) error {
			for _, q := range []struct{ site, text string }{{first, "one"}, {second, "two"}} {
				resp, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage(q.text)}}, Site(q.site))
				if err != nil {
					return err
				}
				if got := textOf(resp); got != "answer to "+q.text {
					return fmt.Errorf("%s was answered %q", q.text, got)
				}
			}
			if extraDraw {
				_, err := ac.UUID(ctx)
				return err
			}
			return nil
		}
	}
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, Model: model}, agent("ask-one", "ask-two", false)); err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(context.Background(), ReplayOptions{Session: s, DriftPolicy: Warn, Model: failingModel{t}}, agent("first-question", "second-question", false))
	if err != nil {
		t.Fatal(err)
	}
	type tolerated struct{ CallSite, RecordedAt, Fingerprint string }
	var got []tolerated
	for _, d := range res.Drifts {
		g := tolerated{CallSite: d.CallSite, Fingerprint: d.Fingerprint}
		if d.Nearest != nil {
			g.RecordedAt = d.Nearest.CallSite
		}
		got = append(got, g)
	}
	want := []tolerated{{"first-question", "ask-one", s.Events[1].RequestHash}, {"second-question", "ask-two", s.Events[2].RequestHash}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("tolerated drifts (-want +got):\n%s", diff)
	}
	if res.LiveCalls != 0 {
		t.Fatalf("%d live calls", res.LiveCalls)
	}
	strict, err := Replay(context.Background(), ReplayOptions{Session: s, Model: failingModel{t}}, agent("first-question", "second-question", false))
	if err != nil || len(strict.Drifts) != 0 {
		t.Fatalf("strict: %v, drifts %v", err, strict.Drifts)
	}
	_, err = Replay(context.Background(), ReplayOptions{Session: s, DriftPolicy: Warn, Model: failingModel{t}}, agent("ask-one", "ask-two", true))
	var d *DriftError
	if !errors.As(err, &d) || d.Kind != session.KindEntropy {
		t.Fatalf("an unrecorded draw under Warn: %v, want an entropy drift", err)
	}
}
