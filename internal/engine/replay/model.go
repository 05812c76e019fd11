package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Model implements AgentContext.
func (r *runner) Model(ctx context.Context, req session.Request, opts ...CallOption) (*session.Response, error) {
	return r.modelCall(ctx, req, nil, opts)
}

// ModelStream implements AgentContext.
func (r *runner) ModelStream(ctx context.Context, req session.Request, emit func(json.RawMessage) error, opts ...CallOption) (*session.Response, error) {
	if emit == nil {
		emit = func(json.RawMessage) error { return nil }
	}
	return r.modelCall(ctx, req, emit, opts)
}

func (r *runner) modelCall(ctx context.Context, req session.Request, emit func(json.RawMessage) error, opts []CallOption) (*session.Response, error) {
	if r.fork != nil && r.fork.isHalted() {
		return nil, r.fork.haltErr()
	}
	c := r.begin(ctx, session.KindModelCall, opts, "")
	if r.phaseOf(c.step) == phaseLive {
		return r.liveModel(ctx, c, req, emit)
	}
	stored, fp, err := r.prepareRequest(c, req)
	if err != nil {
		r.skip(c.step)
		return nil, err
	}
	if rec, ok := r.resolve(c, session.KindModelCall, fp); ok {
		return r.serveModel(ctx, c, rec, emit)
	}
	actual, _ := json.Marshal(stored)
	d := r.drift(c, session.KindModelCall, fp, actual, func(ev *session.Event) []byte {
		b, _ := json.Marshal(ev.Request)
		return b
	})
	if r.policy == Passthrough {
		r.tolerate(d)
		return r.liveModel(ctx, c, req, emit)
	}
	r.failed(c, session.KindModelCall, d)
	return nil, d
}

// failed records the event of a call that drifted, so a replay's trajectory shows where it stopped.
// The event keeps only what drifted, not the request diff: the diff quotes request text, which is
// redacted with the replay's patterns and not necessarily the recording's.
func (r *runner) failed(c call, kind session.Kind, d *DriftError) {
	ev := r.event(c, kind)
	ev.Error = &session.SerializedError{Name: "DriftError",
		Message: fmt.Sprintf("drift at step %d: %s from %s (fingerprint %s) matches no recorded call", d.Step, d.Kind, d.CallSite, short(d.Fingerprint))}
	if r.fork != nil {
		r.fork.diverged(c.step, d)
	}
	r.mu.Lock()
	r.unresolved = append(r.unresolved, d)
	r.mu.Unlock()
	r.finish(&ev)
}

// serveModel answers a call with a recorded one: the same response, error and stream, with secrets
// restored from the vault.
func (r *runner) serveModel(ctx context.Context, c call, rec *session.Event, emit func(json.RawMessage) error) (*session.Response, error) {
	ev := r.event(c, session.KindModelCall)
	ev.Provider, ev.Request, ev.RequestHash = rec.Provider, rec.Request, rec.RequestHash
	ev.Response, ev.Error, ev.Stream, ev.Usage = rec.Response, rec.Error, rec.Stream, rec.Usage
	if r.fork != nil {
		ev.Provenance = session.ProvenanceRecorded
	}
	r.countServed()
	r.finish(&ev)

	if f, ok := ctx.Value(servedKey{}).(func(*session.Event)); ok {
		f(rec)
	}
	if emit != nil {
		if err := r.replayStream(ctx, rec.Stream, emit); err != nil {
			return nil, err
		}
	}
	if rec.Error != nil {
		return nil, rec.Error
	}
	if rec.Response == nil {
		return nil, fmt.Errorf("step %d: the recorded model call has neither a response nor an error", rec.Step)
	}
	if resp, ok := r.servedByField(rec.Response); ok {
		return resp, nil
	}
	return r.servedByRoundTrip(rec.Response)
}

// servedByRoundTrip is the recorded response as the agent is served it: encoded, in the canonical
// spelling, its secrets restored, and decoded again.
func (r *runner) servedByRoundTrip(rec *session.Response) (*session.Response, error) {
	doc, err := marshalNoEscape(rec)
	if err != nil {
		return nil, err
	}
	doc = unescapeHTML(doc)
	if doc, err = r.restore(doc); err != nil {
		return nil, err
	}
	var resp session.Response
	if err := json.Unmarshal(doc, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// servedByField gives what servedByRoundTrip gives, a field at a time, without encoding and decoding
// the whole response: each JSON field compacted (as the encoder does), respelled and restored on its
// own, which is the same because the respelling and the restoring go value by value. ok is false
// where the round trip may change or refuse what this would not: a stop reason that is not valid
// UTF-8, or restored to a secret that is not (the encoder replaces each bad byte); a field that is
// not JSON, or only within the depth limit on its own (the round trip's error is the one to report).
// TestServingByFieldEqualsTheRoundTrip holds the two to the same result.
func (r *runner) servedByField(rec *session.Response) (*session.Response, bool) {
	if !utf8.ValidString(rec.StopReason) {
		return nil, false
	}
	resp := &session.Response{StopReason: rec.StopReason}
	if r.vault != nil {
		// A secret restored into it must be valid UTF-8 too: the encoder would replace a bad byte.
		if resp.StopReason = r.vault.Restore(rec.StopReason); !utf8.ValidString(resp.StopReason) {
			return nil, false
		}
	}
	if rec.Usage != nil {
		u := *rec.Usage
		resp.Usage = &u
	}
	content := rec.Content
	if content == nil {
		content = json.RawMessage("null") // what the encoder writes for it, decoded as it is
	}
	var ok bool
	if resp.Content, ok = r.servedJSON(content); !ok {
		return nil, false
	}
	if len(rec.Raw) > 0 { // an empty Raw is omitted, and decodes as nil
		if resp.Raw, ok = r.servedJSON(rec.Raw); !ok {
			return nil, false
		}
	}
	if len(rec.Headers) > 0 { // an empty map is omitted, and decodes as nil
		resp.Headers = make(map[string]string, len(rec.Headers))
		for k, v := range rec.Headers {
			if r.vault != nil {
				k, v = r.vault.Restore(k), r.vault.Restore(v)
			}
			if _, dup := resp.Headers[k]; dup || !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, false // two names restored to one: the round trip decides which is kept
			}
			resp.Headers[k] = v
		}
	}
	return resp, true
}

type servedKey struct{}

// WithServed returns ctx with f, which a call answered from the recording calls with the recorded
// event before it answers: a caller that writes the answer on a wire learns its recorded shape and
// headers before the first streamed chunk. f must not keep or change the event.
func WithServed(ctx context.Context, f func(rec *session.Event)) context.Context {
	return context.WithValue(ctx, servedKey{}, f)
}

// servedJSON is one JSON field of a recorded response as it is served: compacted, respelled and
// restored, in a buffer of its own.
func (r *runner) servedJSON(field json.RawMessage) (json.RawMessage, bool) {
	// The round trip decodes the field inside the response: one level deeper than on its own.
	valid, compact := jsonscan.Check(field, 1)
	if !valid {
		return nil, false
	}
	doc := bytes.Clone(field) // as a recorded field is, having been written by the encoder
	if !compact {
		var b bytes.Buffer
		if err := json.Compact(&b, field); err != nil {
			return nil, false
		}
		doc = b.Bytes()
	}
	doc, err := r.restore(unescapeHTML(doc))
	if err != nil {
		return nil, false
	}
	return doc, true
}

// replayStream re-emits recorded chunks, instantly or with their recorded timing.
func (r *runner) replayStream(ctx context.Context, chunks []session.Chunk, emit func(json.RawMessage) error) error {
	var last int64
	for _, ch := range chunks {
		if r.timing {
			if err := r.sleep(ctx, time.Duration(ch.OffsetMs-last)*time.Millisecond); err != nil {
				return err
			}
			last = ch.OffsetMs
		}
		data, err := r.restore(unescapeHTML(ch.Data))
		if err != nil {
			return err
		}
		if err := emit(data); err != nil {
			return err
		}
	}
	return nil
}

// liveModel sends a call to the live model — with the fork's overrides in a fork's tail — and records
// it, redacted.
func (r *runner) liveModel(ctx context.Context, c call, req session.Request, emit func(json.RawMessage) error) (*session.Response, error) {
	if r.model == nil {
		r.skip(c.step)
		return nil, fmt.Errorf("step %d: %w", c.step, ErrLiveModelRequired)
	}
	tail := r.fork != nil && r.phaseOf(c.step) == phaseLive // not a Passthrough call in the served prefix
	if tail {
		var err error
		if req, err = r.fork.overrides.Apply(req, c.step); err != nil {
			r.skip(c.step)
			oe := &OverridesError{Step: c.step, Lane: c.lane.id, CallSite: c.site, Model: r.cfg.Redactor.String(req.Model),
				Err: err, detail: r.cfg.Redactor.String(err.Error())}
			r.fork.overridesFailed(oe)
			return nil, oe
		}
	}
	stored, fp, err := r.prepareRequest(c, req)
	if err != nil {
		r.skip(c.step)
		return nil, err
	}
	ev := r.event(c, session.KindModelCall)
	ev.Provider, ev.Request, ev.RequestHash = r.cfg.Codec.Name(), &stored, fp

	start := r.cfg.Now()
	var resp *session.Response
	var callErr error
	defer r.recordPanic(ev)
	if emit != nil {
		resp, ev.Stream, callErr = r.liveStream(ctx, req, emit, start)
	} else {
		resp, callErr = r.model.Create(ctx, req)
	}
	r.countLive()
	ev.LatencyMs = r.cfg.Now().Sub(start).Milliseconds()
	if callErr != nil {
		ev.Error = r.serializeError(callErr)
	}
	if resp != nil {
		resp.Content, resp.Raw = canonicalJSON(resp.Content), canonicalJSON(resp.Raw)
		stored, err := r.redactResponse(resp)
		if err != nil {
			return r.unrecordable(ev, err)
		}
		ev.Response, ev.Usage = stored, resp.Usage
	}
	complete := ev.Response
	if ev.Error != nil {
		complete = nil // a stream that failed is not to be rewritten as one that succeeded
	}
	if ev.Stream, err = r.redactChunks(c.step, ev.Stream, complete); err != nil {
		return r.unrecordable(ev, err)
	}
	if r.matcher != nil {
		// A replay's or fork's live call says so, so its usage is never counted as replayed.
		ev.Provenance = session.ProvenanceLive
	}
	if r.fork != nil {
		r.fork.count(session.ProvenanceLive)
		if tail {
			r.fork.spend(resp) // tokensSpent is the tail's; a tolerated drift in the prefix is not
		}
	}
	r.finish(&ev)
	return resp, callErr
}

// unrecordable records a live call whose answer cannot be stored (text that is not valid Unicode, say)
// as the error it is, without the answer: the call happened, so its step must not vanish from the
// recording, and a replay returns the same error instead of drifting on a call the log does not hold.
func (r *runner) unrecordable(ev session.Event, err error) (*session.Response, error) {
	ev.Response, ev.Usage, ev.Stream = nil, nil, nil
	ev.Error = &session.SerializedError{Name: "UnrecordableAnswer",
		Message: r.cfg.Redactor.String("the model's answer cannot be recorded: " + err.Error())}
	if r.matcher != nil {
		ev.Provenance = session.ProvenanceLive
	}
	if r.fork != nil {
		r.fork.count(session.ProvenanceLive)
	}
	r.finish(&ev)
	return nil, ev.Error
}

// liveStream streams from the live model, recording each chunk's offset from the start.
func (r *runner) liveStream(ctx context.Context, req session.Request, emit func(json.RawMessage) error, start time.Time) (*session.Response, []session.Chunk, error) {
	sm, ok := r.model.(StreamingModel)
	if !ok {
		return nil, nil, errors.New("the live model does not support streaming")
	}
	var chunks []session.Chunk
	resp, err := sm.Stream(ctx, req, func(data json.RawMessage) error {
		data = append(json.RawMessage(nil), canonicalJSON(data)...)
		chunks = append(chunks, session.Chunk{OffsetMs: r.cfg.Now().Sub(start).Milliseconds(), Data: data})
		return emit(data)
	})
	return resp, chunks, err
}

func (r *runner) redactResponse(resp *session.Response) (*session.Response, error) {
	doc, err := marshalNoEscape(resp)
	if err != nil {
		return nil, err
	}
	if doc, err = r.redactJSON(doc); err != nil {
		return nil, err
	}
	var out session.Response
	return &out, json.Unmarshal(doc, &out)
}

// redactChunks redacts a recorded stream as a whole, so that a secret the provider delivered in pieces
// is redacted however the chunks cut it (redact.Redactor.Stream): each lane of text in the replayed
// stream assembles to exactly its redacted text, and with the vault the token restores the secret in
// the chunk where it started.
//
// It fails closed. When a secret the redactor knows would still be readable from the chunks — most
// likely one straddling two lanes, such as a content block's start and its deltas — none of them is
// stored. The stream is replaced by one the codec writes from the redacted response (StreamSynthesizer),
// so a replay still serves a stream the SDK accumulates to exactly the recorded response, which the
// vault restores as usual; the original timing is lost. With a codec that cannot write streams the call
// is kept without one: a replay returns its response and emits no chunk. Blanking the secret's pieces
// instead would leave a stream that assembles to neither the recorded response nor, with the vault,
// the original one.
func (r *runner) redactChunks(step int64, chunks []session.Chunk, resp *session.Response) ([]session.Chunk, error) {
	if len(chunks) == 0 {
		return chunks, nil
	}
	docs := make([][]byte, len(chunks))
	for i, c := range chunks {
		docs[i] = c.Data
	}
	red, err := r.cfg.Redactor.Stream(docs)
	if errors.Is(err, redact.ErrStreamExposed) {
		return r.replaceStream(step, chunks, resp), nil
	}
	if err != nil {
		return nil, err
	}
	for i := range chunks {
		chunks[i].Data = red[i]
	}
	return chunks, nil
}

// StreamSynthesizer is a Codec that can write a response as the stream that assembles to it.
type StreamSynthesizer interface {
	SynthesizeStream(resp session.Response) ([]session.Chunk, error)
}

// replaceStream is the stream recorded in place of chunks that cannot be stored: the codec's stream of
// the redacted response resp (nil when the call failed), at the time the original stream ended, or none.
func (r *runner) replaceStream(step int64, chunks []session.Chunk, resp *session.Response) []session.Chunk {
	if synth, ok := r.cfg.Codec.(StreamSynthesizer); ok && resp != nil {
		if out, err := synth.SynthesizeStream(*resp); err == nil {
			for i := range out {
				out[i].OffsetMs = chunks[len(chunks)-1].OffsetMs
			}
			r.cfg.Logf("Replaced the stream of the model call at step %d: a redacted secret straddles its chunks in a way that cannot be rewritten, so the stream was rewritten from the redacted response", step)
			return out
		}
	}
	r.cfg.Logf("Dropped the stream of the model call at step %d: a redacted secret straddles its chunks in a way that cannot be rewritten; the call is recorded without its stream", step)
	return nil
}

// recordPanic records the event of a live call whose model or tool panicked, as an error, and lets the
// panic go on: the step must not vanish from the recording, or every later event would wait behind it.
func (r *runner) recordPanic(ev session.Event) {
	p := recover()
	if p == nil {
		return
	}
	ev.Error = &session.SerializedError{Name: "Panic", Message: r.cfg.Redactor.String(fmt.Sprint(p))}
	r.finish(&ev)
	panic(p)
}

// marshalNoEscape encodes v as JSON the way the providers write it: '<', '>' and '&' stay as they are.
// A response re-encoded with encoding/json's HTML escaping (json.Marshal compacts a RawMessage with
// it) would be served as \u003c where the live answer said '<'.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// A model's answer reaches the agent in one canonical JSON spelling, live and replayed alike: '<', '>'
// and '&' as themselves, U+2028 and U+2029 escaped. The store cannot keep any other: encoding/json
// escapes the first three in the raw JSON of a stored event (as \u003c, \u003e, \u0026) and the line
// separators with them, so which spelling the upstream used is lost. Serving the live answer in the
// spelling a replay can give back keeps record and replay byte for byte the same; the meaning is the
// upstream's exactly.

// canonicalJSON rewrites a live answer's JSON in the canonical spelling.
func canonicalJSON(doc []byte) []byte { return spell(doc, true) }

// unescapeHTML undoes encoding/json's HTML escaping of a stored answer: the canonical spelling again.
func unescapeHTML(doc []byte) []byte { return spell(doc, false) }

var (
	lineSep = []byte(`\u2028`)
	paraSep = []byte(`\u2029`)
)

func spell(doc []byte, separators bool) []byte {
	if !bytes.Contains(doc, []byte(`\u00`)) && !(separators && bytes.Contains(doc, []byte{0xE2, 0x80})) {
		return doc
	}
	out := make([]byte, 0, len(doc))
	for i := 0; i < len(doc); i++ {
		switch {
		case separators && doc[i] == 0xE2 && i+2 < len(doc) && doc[i+1] == 0x80 && (doc[i+2] == 0xA8 || doc[i+2] == 0xA9):
			// Outside a string a raw line separator is not JSON, so it is always inside one.
			if doc[i+2] == 0xA8 {
				out = append(out, lineSep...)
			} else {
				out = append(out, paraSep...)
			}
			i += 2
			continue
		case doc[i] != '\\' || i+1 >= len(doc):
			out = append(out, doc[i])
			continue
		}
		if doc[i+1] == 'u' && i+6 <= len(doc) {
			switch string(bytes.ToLower(doc[i+2 : i+6])) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out, i = append(out, doc[i], doc[i+1]), i+1 // any other escape is kept whole: \\u003c stays as it is
	}
	return out
}

// serializeError records an error from a live call, redacted, so replay can return an equivalent one.
// A Go error is named by what it is, not by its Go type (which names the wrapping, *fmt.wrapError, not
// the failure): a stable name, and the message the live error had.
func (r *runner) serializeError(err error) *session.SerializedError {
	var se *session.SerializedError
	if !errors.As(err, &se) {
		se = &session.SerializedError{Name: errorName(err), Message: err.Error()}
	}
	// The name is the model's or tool's to choose, so it is redacted like the message.
	return &session.SerializedError{Name: r.cfg.Redactor.String(se.Name), Message: r.cfg.Redactor.String(se.Message)}
}

// Names of the errors of live calls that are not the model's or tool's own SerializedError.
const (
	ErrorNameCanceled         = "Canceled"
	ErrorNameDeadlineExceeded = "DeadlineExceeded"
	ErrorNameCallFailed       = "CallFailed"
)

func errorName(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return ErrorNameCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorNameDeadlineExceeded
	}
	return ErrorNameCallFailed
}
