package replay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// Config is what every mode shares. Zero values are usable: the generic codec, strict fingerprints,
// the built-in redaction patterns, and the real clock and random sources.
type Config struct {
	Codec           Codec
	FingerprintMode fingerprint.Mode
	// Redactor replaces secrets before anything is hashed or stored.
	Redactor *redact.Redactor
	// Keys encrypts the vault of redacted secrets on record and opens it on replay. Without it no vault
	// is written and replayed values keep their redaction tokens.
	Keys redact.KeyProvider
	// Now, Random and NewUUID are the live entropy sources and the clock for timestamps and latency.
	Now     func() time.Time
	Random  func() float64
	NewUUID func() string
	// Getenv reads the environment for AgentContext.Env; Environ lists it, so credential-like values
	// are learned as secrets before the harness runs, whether or not the agent reads them through Env.
	Getenv  func(string) string
	Environ func() []string
	// Secrets are values redacted wherever they appear, whatever their shape: the operator passes every
	// value of the Secrets it injects into an agent's container. Each must be at least
	// MinDeclaredSecretLen bytes.
	Secrets []string
	// Workspace is a git work tree the recorder reads HEAD from: the commit the run starts from (a
	// minted START) and the resume SHA of a minted SUSPEND. Empty means the run has no workspace.
	Workspace string
	// WorkspaceHead is the commit the run starts from, given directly (a Job's flag) when the recorder
	// has no work tree to read: it becomes the minted START. A minted SUSPEND then carries no resume
	// SHA, as the recorder cannot see where the workspace moved. Ignored when Workspace is set.
	WorkspaceHead string
	// RunEnd says how the agent ended, for the recorder's END record, in place of EndOf(harnessErr). A
	// harness that only parks until the recorder is stopped (a proxy) cannot see the agent end and
	// says so (ledger.EndStopped).
	RunEnd func(harnessErr error) ledger.RunEnd
	// Logf receives diagnostics: reordered lanes and drifts tolerated by the Warn policy.
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	if c.Codec == nil {
		c.Codec = GenericCodec{}
	}
	if c.FingerprintMode == "" {
		c.FingerprintMode = fingerprint.Strict
	}
	if c.Redactor == nil {
		c.Redactor = redact.New(redact.BuiltinPatterns())
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Random == nil {
		c.Random = cryptoFloat
	}
	if c.NewUUID == nil {
		c.NewUUID = uuidV4
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.Environ == nil {
		c.Environ = os.Environ
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// matchRecording makes cfg fingerprint the way the recording did: a request hashed in another mode
// never matches, so a replay takes the recording's mode and refuses a conflicting one.
func matchRecording(cfg Config, s *session.Session) (Config, error) {
	requested := cfg.FingerprintMode
	cfg = cfg.withDefaults()
	if missing := missingPatterns(s.Meta.Redaction.Patterns, cfg.Redactor.PatternNames()); len(missing) > 0 {
		return cfg, fmt.Errorf("session %s was redacted with patterns this replay does not have (%s): configure the "+
			"recording's redaction patterns, or its secrets would neither match nor stay redacted", s.Meta.ID, strings.Join(missing, ", "))
	}
	recorded := fingerprint.Mode(s.Meta.FingerprintMode)
	switch {
	case recorded == "":
		return cfg, nil
	case requested == "":
		cfg.FingerprintMode = recorded
	case requested != recorded:
		return cfg, fmt.Errorf("session %s was recorded with %s fingerprints; replaying it with %s fingerprints would match nothing (leave FingerprintMode unset)",
			s.Meta.ID, recorded, cfg.FingerprintMode)
	}
	return cfg, nil
}

// missingPatterns lists the recorded pattern names the configured redactor lacks.
func missingPatterns(recorded, configured []string) []string {
	have := map[string]bool{}
	for _, n := range configured {
		have[n] = true
	}
	var missing []string
	for _, n := range recorded {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	return missing
}

// phase says how one call is answered.
type phase int

const (
	phaseLive  phase = iota // Record, and a fork's tail
	phaseServe              // Replay, and a fork's prefix
)

// runner is the AgentContext of every mode. It numbers calls at initiation, answers each according to
// its phase, and emits events in step order however calls complete.
type runner struct {
	cfg     Config
	model   Model
	tools   map[string]Tool
	matcher *Matcher // nil in Record mode
	vault   *redact.Vault
	policy  DriftPolicy
	atStep  int64 // first live step; -1 when every step is served, maxInt when every step is live
	fork    *forkState
	timing  bool // re-emit streamed chunks with their recorded timing
	sleep   func(context.Context, time.Duration) error
	// startSHA is the workspace HEAD prepare read, minted as START when the run begins.
	startSHA string
	// noEnd skips the recorder's END: a replay of a recording that has none.
	noEnd bool

	root *lane

	mu       sync.Mutex
	nextStep int64
	pending  map[int64]*session.Event // completed events waiting for earlier steps; nil marks a gap
	flushed  int64
	events   []session.Event
	writer   *session.Writer
	writeErr error
	memos    map[string]*requestMemo // by lane: what its last model request leaves its next (prepare.go)
	// countedParts are the request parts (head, message; redacted) whose redactions were counted:
	// the session stores each once, and counts it once (prepare.go).
	countedParts map[[sha256.Size]byte]bool
	// messagesRedacted counts the request messages redacted (and hashed) so far: about the messages
	// the agent added, not the ones its requests repeat.
	messagesRedacted atomic.Int64
	drifts           []*DriftError // tolerated by Warn or Passthrough
	unresolved       []*DriftError // returned to the harness as errors
	reorders         []Reorder
	live             int // calls that went live
	served           int // calls answered from the recording outside a fork (a fork counts its own)
	closed           bool
}

func newRunner(cfg Config) *runner {
	return &runner{cfg: cfg.withDefaults(), root: newLane("0"), pending: map[int64]*session.Event{}, policy: Strict,
		sleep: sleepCtx}
}

// call is one initiated boundary crossing.
type call struct {
	lane *lane
	seq  int64
	step int64
	site string
}

// begin numbers a call when it is initiated, not when it completes, so concurrent calls keep the order
// in which the harness made them.
func (r *runner) begin(ctx context.Context, kind session.Kind, opts []CallOption, site string) call {
	l := laneOf(ctx, r.root)
	if site == "" {
		var o callOptions
		for _, opt := range opts {
			opt(&o)
		}
		site = deriveCallSite(o, l, string(kind))
	}
	// A call site can be any label the agent chose (Site); it is stored and matched redacted, the same
	// way on record and on replay.
	site = r.cfg.Redactor.String(site)
	// The lane's seq and the global step are taken together: two concurrent calls of one lane must get
	// them in the same order, or the log (in step order) would show the lane's seqs out of order.
	c := call{lane: l, site: site}
	r.mu.Lock()
	c.seq, c.step = l.nextSeq(), r.nextStep
	r.nextStep++
	r.mu.Unlock()
	return c
}

// event starts the event for a call.
func (r *runner) event(c call, kind session.Kind) session.Event {
	return session.Event{Seq: c.seq, Step: c.step, TS: r.cfg.Now().UnixMilli(), Lane: c.lane.id, CallSite: c.site, Kind: kind}
}

func (r *runner) phaseOf(step int64) phase {
	if r.atStep >= 0 && step >= r.atStep {
		return phaseLive
	}
	return phaseServe
}

// finish records a completed event and flushes every event whose predecessors are all complete.
func (r *runner) finish(ev *session.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return // a call the harness left running after it returned: the run is already framed
	}
	r.pending[ev.Step] = ev
	r.flushLocked()
}

// skip marks a step that produced no event (the call failed before it could be recorded).
func (r *runner) skip(step int64) { r.finish(&session.Event{Step: step, Kind: ""}) }

func (r *runner) flushLocked() {
	for {
		ev, ok := r.pending[r.flushed]
		if !ok {
			return
		}
		delete(r.pending, r.flushed)
		r.flushed++
		if ev.Kind == "" {
			continue
		}
		r.events = append(r.events, *ev)
		if r.writer != nil && r.writeErr == nil {
			r.writeErr = r.writer.Append(*ev)
		}
	}
}

// drain emits whatever is still pending, in step order, skipping steps that never completed (a call
// abandoned by a harness that returned early).
func (r *runner) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	steps := make([]int64, 0, len(r.pending))
	for s := range r.pending {
		steps = append(steps, s)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	for _, s := range steps {
		r.flushed = s
		r.flushLocked()
	}
	r.closed = true
}

// redactJSON redacts a document for storage and hashing.
func (r *runner) redactJSON(doc []byte) ([]byte, error) {
	return r.cfg.Redactor.JSON(doc)
}

// restore swaps redaction tokens in a recorded document back to the secrets the vault holds.
func (r *runner) restore(doc json.RawMessage) (json.RawMessage, error) {
	if r.vault == nil || len(doc) == 0 {
		return doc, nil
	}
	return r.vault.RestoreJSON(doc)
}

// resolve asks the matcher for a recorded call, noting a reorder.
func (r *runner) resolve(c call, kind session.Kind, key string) (*session.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev, reorder, how := r.matcher.Resolve(kind, c.site, c.lane.id, key)
	if reorder != nil {
		r.reorders = append(r.reorders, *reorder)
		r.cfg.Logf("lane %s served seq %d before seq %d: the calls completed in another order than recorded", reorder.Lane, reorder.ServedSeq, reorder.ExpectedSeq)
	}
	if how == ResolvedFallback && r.policy == Warn {
		// The same request from a call site that moved: served, because it is the recorded request,
		// and reported, because Warn is the policy that wants to hear about every difference.
		d := &DriftError{Step: c.step, Kind: kind, Lane: c.lane.id, CallSite: c.site, Fingerprint: key, Nearest: ev, Code: DriftOtherCallSite,
			Reason: fmt.Sprintf("%s from %s matched the call recorded from %s at step %d by fingerprint only", kind, c.site, ev.CallSite, ev.Step)}
		r.drifts = append(r.drifts, d)
		r.cfg.Logf("tolerated (%s): %v", r.policy, d)
	}
	return ev, how != Unresolved
}

// drift builds the error for a call the recording does not hold.
func (r *runner) drift(c call, kind session.Kind, fp string, actual []byte, recordedOf func(*session.Event) []byte) *DriftError {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := &DriftError{Step: c.step, Kind: kind, Lane: c.lane.id, CallSite: c.site, Fingerprint: fp, Code: DriftNoRecordedCall,
		Expected: r.matcher.Expected(c.lane.id, ""), Nearest: r.matcher.Nearest(kind, c.lane.id, c.site)}
	if d.Nearest != nil && recordedOf != nil {
		d.Diff = diffJSON(recordedOf(d.Nearest), actual)
	}
	return d
}

// tolerate records a drift the Passthrough policy let through.
func (r *runner) tolerate(d *DriftError) {
	r.mu.Lock()
	r.drifts = append(r.drifts, d)
	r.mu.Unlock()
	r.cfg.Logf("tolerated (%s): %v", r.policy, d)
}

// countServed counts a call answered from the recording: a fork's provenance, or a replay's tally.
func (r *runner) countServed() {
	if r.fork != nil {
		r.fork.count(session.ProvenanceRecorded)
		return
	}
	r.mu.Lock()
	r.served++
	r.mu.Unlock()
}

func (r *runner) countLive() {
	r.mu.Lock()
	r.live++
	r.mu.Unlock()
}

// Go implements AgentContext.
func (r *runner) Go(ctx context.Context) context.Context {
	return withLane(ctx, laneOf(ctx, r.root).child())
}

// secretEnvName matches environment variable names that hold credentials.
var secretEnvName = regexp.MustCompile(`(?i)(key|secret|token|passw|pwd|credential)`)

// minEnvSecretLen keeps short values ("1", "true") from being redacted everywhere they occur.
const minEnvSecretLen = 8

// Env implements AgentContext. The read is noted, never the value: an environment variable may hold a
// secret no redaction pattern knows.
func (r *runner) Env(ctx context.Context, key string) string {
	v := r.cfg.Getenv(key)
	state := "unset"
	if v != "" {
		state = "set"
	}
	if secretEnvName.MatchString(key) && len(v) >= minEnvSecretLen {
		// The agent may pass the value on to a model or tool; no pattern knows its shape.
		r.cfg.Redactor.AddLiteral("env-secret", v)
	}
	r.Note(ctx, fmt.Sprintf("env %s (%s)", key, state))
	return v
}

// Note implements AgentContext.
func (r *runner) Note(ctx context.Context, text string) {
	c := r.begin(ctx, session.KindNote, nil, "note")
	ev := r.event(c, session.KindNote)
	ev.Text = r.cfg.Redactor.String(text)
	r.finish(&ev)
}

// Ledger implements AgentContext.
func (r *runner) Ledger(ctx context.Context, record any) error {
	c := r.begin(ctx, session.KindLedger, nil, "ledger")
	doc, err := jsonscan.Marshal(record)
	if err != nil {
		r.skip(c.step)
		return &SerializationError{Step: c.step, Tool: "ledger", What: "record", Err: err}
	}
	red, err := r.redactJSON(doc)
	if err != nil {
		r.skip(c.step)
		return err
	}
	ev := r.event(c, session.KindLedger)
	ev.Ledger = red
	r.finish(&ev)
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func cryptoFloat() float64 {
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<53))
	return float64(n.Int64()) / (1 << 53)
}

func uuidV4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
