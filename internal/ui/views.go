package ui

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/codec"
	"github.com/agentrewind/agentrewind/internal/engine/inspect"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// The views are what the JSON endpoints send: the engine's answers reshaped for a page, every
// recorded string left as recorded (the page escapes it when it renders it).

// Row is one event of a timeline.
type Row struct {
	Step         int64  `json:"step"`
	Seq          int64  `json:"seq"`
	Lane         string `json:"lane"`
	Kind         string `json:"kind"`
	CallSite     string `json:"callSite"`
	What         string `json:"what,omitempty"`
	Author       string `json:"author,omitempty"`
	Provenance   string `json:"provenance,omitempty"`
	LatencyMs    int64  `json:"latencyMs,omitempty"`
	InputTokens  int64  `json:"inputTokens,omitempty"`
	OutputTokens int64  `json:"outputTokens,omitempty"`
	// CostMicroUSD is a model call's cost at the price table; CostUnknown, set instead, says why it
	// has none (a model without a price), so the page shows "unknown", never $0.
	CostMicroUSD *int64 `json:"costMicroUSD,omitempty"`
	CostUnknown  string `json:"costUnknown,omitempty"`
	Error        string `json:"error,omitempty"`
	// Forged says why the stored fingerprint is not the one the stored call hashes to.
	Forged string `json:"forged,omitempty"`
	// Truncated marks a model call whose stream the upstream cut off before its last event.
	Truncated bool `json:"truncated,omitempty"`
}

// whatMax bounds Row.What and errorMax Row.Error, in characters: the row is one line and its error a
// tooltip; the step view has the whole values.
const (
	whatMax  = 120
	errorMax = 500
)

// clip cuts s to n characters, the last an ellipsis, reading no further than the cut: a recorded
// string may be megabytes long, and a page of rows must not cost a copy of each.
func clip(s string, n int) string {
	count, cut := 0, 0
	for i := range s {
		if count == n-1 {
			cut = i
		}
		if count == n {
			return s[:cut] + "…"
		}
		count++
	}
	return s
}

// rowsOf lists events as timeline rows, marking those whose stored fingerprint the engine finds
// forged. Only the events given are checked, so a page costs its own size, not the session's.
func rowsOf(s *session.Session, events []session.Event) []Row {
	page := &session.Session{Dir: s.Dir, Meta: s.Meta, Events: events}
	forged := map[int64]string{}
	if mismatches, err := replay.FingerprintMismatches(page, codec.ForProvider); err == nil {
		for _, m := range mismatches {
			forged[m.Step] = m.Error()
		}
	}
	rows := make([]Row, len(events))
	for i := range events {
		ev := &events[i]
		r := Row{Step: ev.Step, Seq: ev.Seq, Lane: ev.Lane, Kind: string(ev.Kind), CallSite: ev.CallSite, Author: string(ev.Author),
			Provenance: string(ev.Provenance), LatencyMs: ev.LatencyMs, Forged: forged[ev.Step], What: inspect.What(ev), Truncated: ev.Truncated()}
		if ev.Usage != nil {
			r.InputTokens, r.OutputTokens = ev.Usage.InputTokens, ev.Usage.OutputTokens
		}
		if ev.Error != nil {
			// Not ev.Error.Error(): that copies the whole message before it is cut.
			r.Error = clip(clip(ev.Error.Name, errorMax)+": "+clip(ev.Error.Message, errorMax), errorMax)
		}
		r.What = clip(r.What, whatMax)
		rows[i] = r
	}
	return rows
}

// pricedRowsOf is rowsOf with every model call's cost at prices.
func pricedRowsOf(s *session.Session, events []session.Event, prices *price.Table) []Row {
	rows := rowsOf(s, events)
	for i := range events {
		if ev := &events[i]; ev.Kind == session.KindModelCall {
			rows[i].CostMicroUSD, rows[i].CostUnknown = costFields(prices.Call(ev.Provider, price.ModelOf(ev), ev.Usage))
		}
	}
	return rows
}

// CostView is a cost as the page shows it: micro-dollars, or why it is unknown.
type CostView struct {
	MicroUSD *int64 `json:"microUSD,omitempty"`
	Unknown  string `json:"unknown,omitempty"`
}

func costView(c price.Cost) CostView {
	micro, unknown := costFields(c)
	return CostView{MicroUSD: micro, Unknown: unknown}
}

func costFields(c price.Cost) (*int64, string) {
	if micro, ok := c.MicroUSD(); ok {
		return &micro, ""
	}
	return nil, clip(c.Reason(), errorMax)
}

// Summary is a session's header: its meta and totals.
type Summary struct {
	ID         string        `json:"id"`
	Meta       session.Meta  `json:"meta"`
	Events     int           `json:"events"`
	ModelCalls int           `json:"modelCalls"`
	ToolCalls  int           `json:"toolCalls"`
	Errors     int           `json:"errors"`
	Lanes      []string      `json:"lanes"`
	Usage      session.Usage `json:"usage"`
	// Cost is what the model calls cost at the price table.
	Cost      CostView `json:"cost"`
	LatencyMs int64    `json:"latencyMs"`
	// Served is, for a fork, what its model calls served from the parent cost when they were recorded
	// (replay.ServedUsage): Usage less Served is what the fork spent live, and LiveCost its cost.
	Served   *session.Usage `json:"served,omitempty"`
	LiveCost *CostView      `json:"liveCost,omitempty"`
	// Complete is false for a run that stopped before session_end.
	Complete bool `json:"complete"`
	// Forks are the sessions of the same source forked from this one.
	Forks []string `json:"forks"`
}

func summaryOf(id string, s *session.Session, prices *price.Table) Summary {
	sum := Summary{ID: id, Meta: s.Meta, Events: len(s.Events), Complete: s.CheckComplete() == nil, Lanes: []string{}, Forks: []string{}}
	lanes := map[string]bool{}
	for i := range s.Events {
		ev := &s.Events[i]
		switch ev.Kind {
		case session.KindModelCall:
			sum.ModelCalls++
		case session.KindToolCall:
			sum.ToolCalls++
		}
		if ev.Error != nil {
			sum.Errors++
		}
		sum.Usage.Add(ev.Usage)
		sum.LatencyMs += ev.LatencyMs
		if !lanes[ev.Lane] {
			lanes[ev.Lane] = true
			sum.Lanes = append(sum.Lanes, ev.Lane)
		}
	}
	sum.Cost = costView(prices.Events(s.Events, nil))
	if s.Meta.Parent != "" {
		served := replay.ServedUsage(s.Events)
		live := costView(prices.Events(s.Events, func(ev *session.Event) bool { return ev.Provenance == session.ProvenanceLive }))
		sum.Served, sum.LiveCost = &served, &live
	}
	return sum
}

// StepView is everything recorded at one step: for a model call the context sent (system prompt,
// messages with their tool calls and results) and the answer.
type StepView struct {
	Row
	// Index is the event's position in the log, where the timeline shows it.
	Index       int                        `json:"index"`
	TS          int64                      `json:"ts,omitempty"`
	Provider    string                     `json:"provider,omitempty"`
	Model       string                     `json:"model,omitempty"`
	System      string                     `json:"system,omitempty"`
	Messages    []MessageView              `json:"messages,omitempty"`
	Params      map[string]json.RawMessage `json:"params,omitempty"`
	Response    string                     `json:"response,omitempty"`
	Stop        string                     `json:"stopReason,omitempty"`
	Args        string                     `json:"args,omitempty"`
	Result      string                     `json:"result,omitempty"`
	Value       string                     `json:"value,omitempty"`
	Text        string                     `json:"text,omitempty"`
	Ledger      string                     `json:"ledger,omitempty"`
	ErrorDetail *session.SerializedError   `json:"errorDetail,omitempty"`
	Fingerprint string                     `json:"fingerprint,omitempty"`
}

// MessageView is one message of a prompt, its content split into parts: text, a tool call (name
// and arguments) or a tool result.
type MessageView struct {
	Role  string     `json:"role"`
	Parts []PartView `json:"parts"`
}

// PartView is one part of a message.
type PartView struct {
	// Type is text, tool_use, tool_result or json (anything else, shown as JSON).
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	Text string `json:"text"`
}

func stepView(s *session.Session, index int, prices *price.Table) (StepView, error) {
	ev := &s.Events[index]
	v := StepView{Row: pricedRowsOf(s, []session.Event{*ev}, prices)[0], Index: index, TS: ev.TS, Provider: ev.Provider, ErrorDetail: ev.Error}
	switch ev.Kind {
	case session.KindModelCall:
		msgs, err := inspect.ContextAt(s.Events, ev.Step)
		if err != nil {
			return v, err
		}
		v.Messages = messageViews(msgs)
		v.Fingerprint = ev.RequestHash
		if ev.Request != nil {
			v.Model, v.System, v.Params = ev.Request.Model, ev.Request.System, ev.Request.Params
		}
		if ev.Response != nil {
			v.Response, v.Stop = jsonText(ev.Response.Content), ev.Response.StopReason
		}
	case session.KindToolCall:
		v.Args, v.Result, v.Fingerprint = jsonText(ev.Args), jsonText(ev.Result), ev.ArgsHash
	case session.KindEntropy:
		v.Value = jsonText(ev.Value)
	case session.KindNote:
		v.Text = ev.Text
	case session.KindLedger:
		v.Ledger = jsonText(ev.Ledger)
	}
	return v, nil
}

func messageViews(msgs []session.Message) []MessageView {
	out := make([]MessageView, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, MessageView{Role: m.Role, Parts: partsOf(m.Content)})
	}
	return out
}

// partsOf splits message content: a JSON string is one text part; an array of content blocks (the
// Anthropic and OpenAI shapes) is one part per block; anything else is one JSON part.
func partsOf(content json.RawMessage) []PartView {
	var text string
	if json.Unmarshal(content, &text) == nil {
		return []PartView{{Type: "text", Text: text}}
	}
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(content, &blocks) != nil {
		return []PartView{{Type: "json", Text: jsonText(content)}}
	}
	parts := make([]PartView, 0, len(blocks))
	for _, b := range blocks {
		var typ, name string
		_ = json.Unmarshal(b["type"], &typ)
		_ = json.Unmarshal(b["name"], &name)
		switch typ {
		case "text":
			var t string
			_ = json.Unmarshal(b["text"], &t)
			parts = append(parts, PartView{Type: "text", Text: t})
		case "tool_use":
			parts = append(parts, PartView{Type: "tool_use", Name: name, Text: jsonText(b["input"])})
		case "tool_result":
			parts = append(parts, PartView{Type: "tool_result", Text: jsonText(b["content"])})
		default:
			doc, _ := json.Marshal(b)
			parts = append(parts, PartView{Type: "json", Text: jsonText(doc)})
		}
	}
	return parts
}

// jsonText shows a JSON value: a string as its text, anything else indented with its strings as
// written (encoding/json stores <, > and & as \u escapes; a reader wants the characters, which the
// page then shows as text). Numbers keep their digits; object keys come out sorted.
func jsonText(doc json.RawMessage) string {
	if len(doc) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(doc, &s) == nil {
		return s
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return string(doc)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return string(doc)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// DiffView is how the context changed between the model calls at two steps.
type DiffView struct {
	From       int64         `json:"from"`
	To         int64         `json:"to"`
	Added      []MessageView `json:"added"`
	Removed    []MessageView `json:"removed"`
	TokenDelta int64         `json:"tokenDelta"`
	Estimate   bool          `json:"tokenDeltaIsEstimate"`
	// SystemChanged says the system prompt differs; System and SystemBefore are both sides.
	SystemChanged bool   `json:"systemChanged"`
	SystemBefore  string `json:"systemBefore,omitempty"`
	System        string `json:"system,omitempty"`
}

func diffView(events []session.Event, from, to int64) (DiffView, error) {
	d, err := inspect.DiffContext(events, from, to, nil)
	if err != nil {
		return DiffView{}, err
	}
	v := DiffView{From: d.From, To: d.To, Added: messageViews(d.Added), Removed: messageViews(d.Removed), TokenDelta: d.TokenDelta, Estimate: d.TokenDeltaIsEstimate}
	a, b := systemAt(events, from), systemAt(events, to)
	v.SystemChanged, v.SystemBefore, v.System = a != b, a, b
	return v, nil
}

// systemAt is the system prompt of the model call at step (DiffContext has checked it is one).
func systemAt(events []session.Event, step int64) string {
	for i := range events {
		if events[i].Step == step && events[i].Request != nil {
			return events[i].Request.System
		}
	}
	return ""
}

// ForkView is a fork beside its parent from the fork point, with where they first part. A fork parts
// from its parent on purpose at or after its fork point, where it goes live with its change: that is
// ForkPoint, not drift. Divergence is set only for drift, a part before the fork point, where the
// fork's calls are served from the recording and must be the parent's.
type ForkView struct {
	Parent       string          `json:"parent"`
	Child        string          `json:"child"`
	ForkedAtStep int64           `json:"forkedAtStep"`
	ForkPoint    *ForkPointView  `json:"forkPoint,omitempty"`
	Divergence   *DivergenceView `json:"divergence,omitempty"`
	// From is the first step the rows pair: the fork point, or an earlier step the fork drifted at.
	From int64 `json:"from"`
	// Total is the number of step pairs from From; Rows is the page asked for.
	Total  int       `json:"total"`
	Offset int       `json:"offset"`
	Rows   []ForkRow `json:"rows"`
}

// DivergenceView is the first step where a fork's calls part from its parent's (replay.Compare).
type DivergenceView struct {
	Step     int64    `json:"step"`
	Code     string   `json:"code"`
	Kind     string   `json:"kind"`
	Lane     string   `json:"lane"`
	CallSite string   `json:"callSite"`
	Message  string   `json:"message"`
	Diff     []string `json:"diff"`
	// ParentStep is the parent's call the fork was expected to make there.
	ParentStep *int64 `json:"parentStep,omitempty"`
}

// ForkPointView is where a fork first asked something its parent did not, at or after its fork point:
// what its change did to the request there.
type ForkPointView struct {
	Step int64 `json:"step"`
	// Changes names what differs in the request: "system prompt", "model a → b", "params.temperature",
	// "messages", "tool arguments".
	Changes []string `json:"changes"`
	// Diff is the request diff, each line a path with the parent's and the fork's value.
	Diff []string `json:"diff"`
	// Code and Message say how the calls part when they are not one request against another: the fork
	// made fewer calls (RunEndedEarly) or more (ExtraCall).
	Code    string `json:"code"`
	Message string `json:"message"`
	// ParentStep is the parent's call at that point.
	ParentStep *int64 `json:"parentStep,omitempty"`
}

// ForkRow is one step of the parent and the fork side by side; either side may be missing. Diverged
// marks drift, ForkPoint the step where the fork's change took effect.
type ForkRow struct {
	Step      int64 `json:"step"`
	Parent    *Row  `json:"parent,omitempty"`
	Child     *Row  `json:"child,omitempty"`
	Diverged  bool  `json:"diverged"`
	ForkPoint bool  `json:"forkPoint,omitempty"`
}

// forkView pairs parent and child events by step from the fork point and asks the engine where they
// part (replay.Compare, the check a Replay ForkRun uses): before the fork point that is drift, from it
// on the fork's own change.
func forkView(parentID, childID string, parent, child *session.Session, offset, limit int, prices *price.Table) ForkView {
	at := int64(0)
	if child.Meta.ForkedAtStep != nil {
		at = *child.Meta.ForkedAtStep
	}
	v := ForkView{Parent: parentID, Child: childID, ForkedAtStep: at, Rows: []ForkRow{}}
	if d := replay.Compare(parent.Events, child.Events); d != nil {
		diff := d.Diff
		if diff == nil {
			diff = []string{}
		}
		var parentStep *int64
		if d.Expected != nil {
			parentStep = &d.Expected.Step
		}
		if d.Step >= at {
			v.ForkPoint = &ForkPointView{Step: d.Step, Changes: changesOf(d.Expected, boundaryAt(child.Events, d.Step)), Diff: diff,
				Code: string(d.Code), Message: d.Error(), ParentStep: parentStep}
		} else {
			v.Divergence = &DivergenceView{Step: d.Step, Code: string(d.Code), Kind: string(d.Kind), Lane: d.Lane, CallSite: d.CallSite,
				Message: d.Error(), Diff: diff, ParentStep: parentStep}
		}
	}
	// Drift before the fork point is shown in the rows too.
	v.From = at
	if v.Divergence != nil && v.Divergence.Step < at {
		v.From = v.Divergence.Step
	}
	ps, cs := fromStep(parent.Events, v.From), fromStep(child.Events, v.From)
	steps := mergeSteps(ps, cs)
	v.Total = len(steps)
	lo, hi := pageBounds(len(steps), offset, limit)
	v.Offset = lo // the offset served: past the end, the end
	if lo == hi {
		return v
	}
	// Rows only for the page's steps: a row checks its fingerprint, and a page costs its own size.
	first, last := steps[lo], steps[hi-1]
	pRows, cRows := rowsByStep(parent, stepRange(ps, first, last), prices), rowsByStep(child, stepRange(cs, first, last), prices)
	for _, st := range steps[lo:hi] {
		r := ForkRow{Step: st, Parent: pRows[st], Child: cRows[st]}
		r.Diverged = v.Divergence != nil && st == v.Divergence.Step
		r.ForkPoint = v.ForkPoint != nil && st == v.ForkPoint.Step
		v.Rows = append(v.Rows, r)
	}
	return v
}

// boundaryAt is the boundary call of a log at step, if any.
func boundaryAt(events []session.Event, step int64) *session.Event {
	for i := range events {
		if events[i].Step == step && events[i].Kind.IsBoundary() {
			return &events[i]
		}
	}
	return nil
}

// changeMax bounds a name or model shown in a change.
const changeMax = 80

// changesOf names what differs between the parent's call and the fork's at the fork point: the model,
// the system prompt, each parameter, the messages; a tool's name and arguments. Empty when one side
// is missing (the fork made fewer or more calls).
func changesOf(parent, child *session.Event) []string {
	out := []string{}
	if parent == nil || child == nil {
		return out
	}
	if parent.Kind != child.Kind {
		return append(out, "kind "+string(parent.Kind)+" → "+string(child.Kind))
	}
	if parent.CallSite != child.CallSite {
		out = append(out, "call site "+clip(parent.CallSite, changeMax)+" → "+clip(child.CallSite, changeMax))
	}
	switch parent.Kind {
	case session.KindModelCall:
		var a, b session.Request
		if parent.Request != nil {
			a = *parent.Request
		}
		if child.Request != nil {
			b = *child.Request
		}
		if a.Model != b.Model {
			out = append(out, "model "+clip(a.Model, changeMax)+" → "+clip(b.Model, changeMax))
		}
		if a.System != b.System {
			out = append(out, "system prompt")
		}
		keys := map[string]bool{}
		for k := range a.Params {
			keys[k] = true
		}
		for k := range b.Params {
			keys[k] = true
		}
		var params []string
		for k := range keys {
			if !bytes.Equal(compactJSON(a.Params[k]), compactJSON(b.Params[k])) {
				params = append(params, "params."+clip(k, changeMax))
			}
		}
		sort.Strings(params)
		out = append(out, params...)
		if !sameMessages(a.Messages, b.Messages) {
			out = append(out, "messages")
		}
	case session.KindToolCall:
		if parent.Name != child.Name {
			out = append(out, "tool "+clip(parent.Name, changeMax)+" → "+clip(child.Name, changeMax))
		}
		if !bytes.Equal(compactJSON(parent.Args), compactJSON(child.Args)) {
			out = append(out, "tool arguments")
		}
	}
	return out
}

func sameMessages(a, b []session.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Role != b[i].Role || !bytes.Equal(compactJSON(a[i].Content), compactJSON(b[i].Content)) {
			return false
		}
	}
	return true
}

// compactJSON is doc without insignificant white space, or doc itself when it does not parse.
func compactJSON(doc json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, doc) != nil {
		return doc
	}
	return b.Bytes()
}

func fromStep(events []session.Event, at int64) []session.Event {
	for i := range events {
		if events[i].Step >= at {
			return events[i:]
		}
	}
	return nil
}

// stepRange is the events of a log sorted by step whose steps are from first to last.
func stepRange(events []session.Event, first, last int64) []session.Event {
	lo := sort.Search(len(events), func(i int) bool { return events[i].Step >= first })
	hi := sort.Search(len(events), func(i int) bool { return events[i].Step > last })
	return events[lo:hi]
}

// mergeSteps is the sorted union of the steps of two logs, each sorted by step.
func mergeSteps(a, b []session.Event) []int64 {
	out := make([]int64, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i].Step < b[j].Step):
			out = append(out, a[i].Step)
			i++
		case i >= len(a) || b[j].Step < a[i].Step:
			out = append(out, b[j].Step)
			j++
		default:
			out = append(out, a[i].Step)
			i, j = i+1, j+1
		}
	}
	return out
}

func rowsByStep(s *session.Session, events []session.Event, prices *price.Table) map[int64]*Row {
	rows := pricedRowsOf(s, events, prices)
	out := make(map[int64]*Row, len(rows))
	for i := range rows {
		out[rows[i].Step] = &rows[i]
	}
	return out
}

// pageBounds clamps offset and limit to n items.
func pageBounds(n, offset, limit int) (int, int) {
	lo := min(max(offset, 0), n)
	return lo, min(lo+max(limit, 0), n)
}

// PlanView is a resume plan: the verdict with its reasons and the rewind plan.
type PlanView struct {
	// Source says where the verdict comes from: the engine now, or a ResumePlan object.
	Source             string     `json:"source"`
	Verdict            string     `json:"verdict"`
	Reason             string     `json:"reason"`
	Message            string     `json:"message"`
	ResumeSHA          string     `json:"resumeSHA,omitempty"`
	Residual           []string   `json:"residual"`
	Verified           []string   `json:"verified"`
	Reachability       string     `json:"reachability,omitempty"`
	ReachabilityReason string     `json:"reachabilityReason,omitempty"`
	Convergence        string     `json:"convergence,omitempty"`
	Drift              string     `json:"drift,omitempty"`
	Rewind             RewindView `json:"rewind"`
	// Checkpoint is the latest anchor the recorder minted (ANCHOR or SUSPEND), if any.
	Checkpoint  *ledger.Checkpoint `json:"checkpoint,omitempty"`
	EvaluatedAt *time.Time         `json:"evaluatedAt,omitempty"`
}

// RewindView is the transcript-rewind verdict.
type RewindView struct {
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason"`
	Message      string   `json:"message"`
	RewindToTurn *int64   `json:"rewindToTurn,omitempty"`
	DroppedTurns int      `json:"droppedTurns"`
	NoGoodNote   []string `json:"noGoodNote"`
}

// planView reshapes the engine's report on a session judged without workspace evidence.
func planView(r verdict.Report, cp ledger.Checkpoint) PlanView {
	v := PlanView{Source: "engine (no workspace evidence: nothing counts as verified)", Verdict: string(r.Resume.Verdict), Reason: string(r.Resume.Reason),
		Message: r.Resume.Message, ResumeSHA: r.Resume.ResumeSHA, Residual: append([]string{}, r.Resume.Residual...), Verified: []string{},
		Reachability: string(r.Reachability.Reachability), ReachabilityReason: string(r.Reachability.Reason),
		Convergence: string(r.Convergence.Verdict), Drift: string(r.Drift.Verdict),
		Rewind: RewindView{Decision: string(r.Rewind.Decision), Reason: string(r.Rewind.Reason), Message: r.Rewind.Message,
			DroppedTurns: len(r.Rewind.DroppedTurns), NoGoodNote: r.Rewind.Note.Lines()}}
	for _, s := range r.Resume.Verified {
		v.Verified = append(v.Verified, s.ID+"@"+s.SHA)
	}
	if r.Rewind.RewindToTurn >= 0 {
		t := int64(r.Rewind.RewindToTurn)
		v.Rewind.RewindToTurn = &t
	}
	if cp.Present {
		v.Checkpoint = &cp
	}
	return v
}

// CheckpointView is one checkpoint of a session: a workspace checkpoint from a store, or one the
// cluster holds.
type CheckpointView struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Turn   int64  `json:"turn"`
	Step   int64  `json:"step"`
	Reason string `json:"reason,omitempty"`
	Author string `json:"author,omitempty"`
	// AnchorsRewind is true only for a checkpoint the recorder minted.
	AnchorsRewind    bool       `json:"anchorsRewind"`
	Files            int        `json:"files"`
	Bytes            int64      `json:"bytes"`
	IncrementalBytes int64      `json:"incrementalBytes"`
	CreatedAt        *time.Time `json:"createdAt,omitempty"`
	Problem          string     `json:"problem,omitempty"`
}

func checkpointView(s checkpoint.Summary) CheckpointView {
	created := s.CreatedAt
	return CheckpointView{ID: s.ID, Source: "store", Turn: s.Anchor.Turn, Step: s.Anchor.Step, Reason: s.Reason, Author: string(s.Anchor.Author),
		AnchorsRewind: s.Anchor.AnchorsRewind(), Files: s.Files, Bytes: s.Bytes, IncrementalBytes: s.IncrementalBytes, CreatedAt: &created}
}
