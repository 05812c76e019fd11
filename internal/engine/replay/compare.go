package replay

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// FingerprintMismatchError reports a stored fingerprint that is not the one its stored request (or
// tool arguments) hash to: the log was edited, or written by something other than the recorder.
type FingerprintMismatchError struct {
	Session    string
	Step       int64
	Kind       session.Kind
	Field      string // requestHash or argsHash
	Stored     string
	Recomputed string
	Err        error // why it could not be recomputed, if it could not
}

func (e *FingerprintMismatchError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("session %s: step %d: %s %s cannot be recomputed from the stored %s: %v", e.Session, e.Step, e.Kind, e.Field, e.Kind, e.Err)
	}
	return fmt.Sprintf("session %s: step %d: the stored %s %s is not the fingerprint of the stored call (%s): the log was tampered with",
		e.Session, e.Step, e.Field, short(e.Stored), short(e.Recomputed))
}

func (e *FingerprintMismatchError) Unwrap() error { return e.Err }

// CodecLookup returns the codec a recorder used for a provider name; nil means the generic codec.
type CodecLookup func(provider string) Codec

// CompareSessions is Compare for recordings read from storage, which it does not take at their word:
// both runs must be complete (session.ErrIncomplete otherwise), and every stored fingerprint must be
// the one its stored request or arguments hash to, in that recording's fingerprint mode and with its
// provider's codec, as the recorder computed it (*FingerprintMismatchError otherwise). The runs are
// then compared on fingerprints recomputed in the golden run's mode, so a candidate recorded in
// another mode is judged by the golden run's rules.
func CompareSessions(golden, candidate *session.Session, codecs CodecLookup) (*DriftError, error) {
	for _, s := range []*session.Session{golden, candidate} {
		if err := s.CheckComplete(); err != nil {
			return nil, err
		}
		if err := CheckFingerprints(s, codecs); err != nil {
			return nil, err
		}
	}
	fps, err := recomputeFingerprints(golden, golden.Meta.FingerprintMode, codecs, false)
	if err != nil {
		return nil, err
	}
	cfps, err := recomputeFingerprints(candidate, golden.Meta.FingerprintMode, codecs, false)
	if err != nil {
		return nil, err
	}
	for ev, fp := range cfps {
		fps[ev] = fp
	}
	return compare(golden.Events, candidate.Events, func(ev *session.Event) string { return fps[ev] }), nil
}

// CheckFingerprints recomputes every stored fingerprint of s (a model call's requestHash, a tool
// call's argsHash) from the stored request or arguments, in s's fingerprint mode and with its
// provider's codec, as the recorder computed it, and returns a *FingerprintMismatchError for the
// first that differs (a *session.CorruptMetaError when the mode is not one).
func CheckFingerprints(s *session.Session, codecs CodecLookup) error {
	_, err := recomputeFingerprints(s, s.Meta.FingerprintMode, codecs, true)
	return err
}

// FingerprintMismatches is CheckFingerprints reporting every mismatch, in log order, for a reader
// that shows the log rather than refusing it.
func FingerprintMismatches(s *session.Session, codecs CodecLookup) ([]*FingerprintMismatchError, error) {
	opts, err := fingerprintOptions(s, s.Meta.FingerprintMode)
	if err != nil {
		return nil, err
	}
	var out []*FingerprintMismatchError
	for i := range s.Events {
		if fp, field, err := recompute(&s.Events[i], opts, codecs); field != "" && (err != nil || fp != eventFingerprint(&s.Events[i])) {
			out = append(out, mismatch(s, &s.Events[i], field, fp, err))
		}
	}
	return out, nil
}

// recomputeFingerprints hashes every boundary call of s in mode, keyed by event; with check set it
// also requires each to equal the stored one.
func recomputeFingerprints(s *session.Session, mode string, codecs CodecLookup, check bool) (map[*session.Event]string, error) {
	opts, err := fingerprintOptions(s, mode)
	if err != nil {
		return nil, err
	}
	out := map[*session.Event]string{}
	for i := range s.Events {
		ev := &s.Events[i]
		fp, field, err := recompute(ev, opts, codecs)
		if field == "" {
			continue
		}
		if check && (err != nil || fp != eventFingerprint(ev)) {
			return nil, mismatch(s, ev, field, fp, err)
		}
		out[ev] = fp
	}
	return out, nil
}

func fingerprintOptions(s *session.Session, mode string) (fingerprint.Options, error) {
	opts := fingerprint.Options{Mode: fingerprint.Mode(mode)}
	if opts.Mode == "" {
		opts.Mode = fingerprint.Strict
	}
	if opts.Mode != fingerprint.Strict && opts.Mode != fingerprint.Structural {
		return opts, &session.CorruptMetaError{File: filepath.Join(s.Dir, session.MetaFile), Field: "fingerprintMode",
			Err: fmt.Errorf("%q is not a fingerprint mode", mode)}
	}
	return opts, nil
}

// recompute hashes the call ev stores; field names the stored fingerprint ("" for an event that has
// none).
func recompute(ev *session.Event, opts fingerprint.Options, codecs CodecLookup) (fp, field string, err error) {
	switch ev.Kind {
	case session.KindModelCall:
		field = "requestHash"
		if ev.Request != nil {
			codec := Codec(GenericCodec{Provider: ev.Provider})
			if codecs != nil && codecs(ev.Provider) != nil {
				codec = codecs(ev.Provider)
			}
			o := opts
			o.VolatilePaths = codec.VolatilePaths()
			fp, err = fingerprint.Of(codec.StripVolatile(*ev.Request), o)
		}
	case session.KindToolCall:
		field = "argsHash"
		if len(ev.Args) > 0 {
			fp, err = fingerprint.OfJSON(ev.Args, fingerprint.Options{})
		}
	}
	return fp, field, err
}

func mismatch(s *session.Session, ev *session.Event, field, fp string, err error) *FingerprintMismatchError {
	return &FingerprintMismatchError{Session: s.Meta.ID, Step: ev.Step, Kind: ev.Kind, Field: field,
		Stored: eventFingerprint(ev), Recomputed: fp, Err: err}
}

// Compare checks that a candidate run crossed the boundary exactly as a golden recording did: the same
// boundary calls, in the same per-lane order, from the same call sites, with the same fingerprints. It
// returns nil when they agree and otherwise a *DriftError at the first step where they part, with a
// diff of the two requests. Timestamps, latencies and answers do not count: a trajectory is what the
// agent asked, not what it was told. It trusts the stored fingerprints: for recordings read from
// storage, use CompareSessions.
func Compare(golden, candidate []session.Event) *DriftError {
	return compare(golden, candidate, eventFingerprint)
}

func compare(golden, candidate []session.Event, fpOf func(*session.Event) string) *DriftError {
	g, c := boundary(golden), boundary(candidate)
	for i := 0; i < len(g) || i < len(c); i++ {
		switch {
		case i >= len(c):
			return &DriftError{Step: g[i].Step, Kind: g[i].Kind, Lane: g[i].Lane, CallSite: g[i].CallSite, Expected: g[i], Code: DriftRunEndedEarly,
				Reason: fmt.Sprintf("the candidate stopped after %d boundary calls; the golden run made %d", len(c), len(g))}
		case i >= len(g):
			return &DriftError{Step: c[i].Step, Kind: c[i].Kind, Lane: c[i].Lane, CallSite: c[i].CallSite, Fingerprint: fpOf(c[i]), Code: DriftExtraCall,
				Reason: fmt.Sprintf("the candidate made more boundary calls than the golden run's %d: %s from %s", len(g), c[i].Kind, c[i].CallSite)}
		case !sameCall(g[i], c[i], fpOf):
			return &DriftError{Step: c[i].Step, Kind: c[i].Kind, Lane: c[i].Lane, CallSite: c[i].CallSite, Fingerprint: fpOf(c[i]),
				Expected: g[i], Nearest: g[i], Diff: diffJSON(callDoc(g[i]), callDoc(c[i])), Code: DriftNoRecordedCall}
		}
	}
	return nil
}

func boundary(events []session.Event) []*session.Event {
	var out []*session.Event
	for i := range events {
		if events[i].Kind.IsBoundary() {
			out = append(out, &events[i])
		}
	}
	return out
}

func sameCall(a, b *session.Event, fpOf func(*session.Event) string) bool {
	return a.Kind == b.Kind && a.Lane == b.Lane && a.Seq == b.Seq && a.CallSite == b.CallSite &&
		a.Name == b.Name && a.Source == b.Source && fpOf(a) == fpOf(b)
}

// callDoc is what a drift diff shows of a call: its identity and its request.
func callDoc(ev *session.Event) []byte {
	doc := map[string]any{"kind": ev.Kind, "lane": ev.Lane, "seq": ev.Seq, "callSite": ev.CallSite}
	switch ev.Kind {
	case session.KindModelCall:
		doc["request"] = ev.Request
	case session.KindToolCall:
		doc["name"], doc["args"] = ev.Name, ev.Args
	case session.KindEntropy:
		doc["source"] = ev.Source
	}
	b, _ := json.Marshal(doc)
	return b
}
