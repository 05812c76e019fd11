package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func TestCompareFindsTheFirstDivergentStep(t *testing.T) {
	golden, _ := recordTriage(t, liveEntropy())
	again, _ := recordTriage(t, liveEntropy())
	if d := Compare(golden.Events, again.Events); d != nil {
		t.Fatalf("two recordings of the same deterministic run differ: %v", d)
	}
	dir := filepath.Join(t.TempDir(), "changed")
	if _, err := Record(context.Background(), RecordOptions{Config: liveEntropy(), Dir: dir, Model: triageModel(), Tools: triageTools(&counter{})},
		triageAgent("You are a terse triage bot.")); err != nil {
		t.Fatal(err)
	}
	changed, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := Compare(golden.Events, changed.Events)
	if d == nil || d.Step != 3 || !strings.Contains(d.Error(), `request.system: "You are a triage bot." → "You are a terse triage bot."`) {
		t.Fatalf("got %v", d)
	}
	d = Compare(golden.Events, golden.Events[:4])
	if d == nil || d.Step != 4 || !strings.Contains(d.Error(), "the candidate stopped after 3 boundary calls; the golden run made 6") {
		t.Fatalf("truncated candidate: %v", d)
	}
}

func TestDiffShowsWhereLongStringsDiffer(t *testing.T) {
	long := "You are a triage bot for the editor team. Label each new issue."
	lines := diffJSON([]byte(`{"system":"`+long+`"}`), []byte(`{"system":"`+long+` Check CODEOWNERS first."}`))
	if len(lines) != 1 || !strings.Contains(lines[0], `…"h new issue."`) || !strings.Contains(lines[0], `…"h new issue. Check CODEOWNERS first."`) {
		t.Fatalf("diff %q", lines)
	}
}

// rewriteLog edits a recording's events.jsonl line by line and recomputes meta.json to match, as
// someone who knows the format would: only the recomputed fingerprints can tell.
func rewriteLog(t *testing.T, dir string, edit func(lines []string) []string) *session.Session {
	t.Helper()
	// The edit applies to the events as the reader returns them, one JSON line each; the edited
	// events are then recorded again, so that every digest the stored form keeps matches them, as a
	// forger who rewrites a log would make it.
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, ev := range s.Events {
		ev.Blobs, ev.DefBlobs = nil, nil
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(line)+"\n")
	}
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	w, err := session.Create(out, s.Meta, session.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range edit(lines) {
		var ev session.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	rewritten, err := session.Open(out)
	if err != nil {
		t.Fatalf("the rewritten log does not open: %v", err)
	}
	return rewritten
}

func replaceInKind(kind session.Kind, old, new string) func([]string) []string {
	return func(lines []string) []string {
		for i, l := range lines {
			if strings.Contains(l, `"kind":"`+string(kind)+`"`) && strings.Contains(l, old) {
				lines[i] = strings.Replace(l, old, new, 1)
				return lines
			}
		}
		panic("no " + string(kind) + " line holds " + old)
	}
}

// TestCompareSessionsRecomputesStoredFingerprints: an edit to a stored request or tool arguments that
// keeps the stored fingerprint — of every kind of call that has one — is reported as tampering, not
// compared as if the fingerprint were true.
func TestCompareSessionsRecomputesStoredFingerprints(t *testing.T) {
	cases := []struct {
		name  string
		edit  func([]string) []string
		kind  session.Kind
		field string
	}{
		{"model request edited", replaceInKind(session.KindModelCall, `"model":"fake-1"`, `"model":"fake-9"`), session.KindModelCall, "requestHash"},
		{"model fingerprint edited", func(lines []string) []string {
			for i, l := range lines {
				if j := strings.Index(l, `"requestHash":"`); j >= 0 {
					k := j + len(`"requestHash":"`)
					lines[i] = l[:k] + strings.Repeat("0", 64) + l[k+64:]
					return lines
				}
			}
			panic("no requestHash")
		}, session.KindModelCall, "requestHash"},
		{"tool arguments edited", replaceInKind(session.KindToolCall, `"label":"bug"`, `"label":"wontfix"`),
			session.KindToolCall, "argsHash"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			golden, _ := recordTriage(t, liveEntropy())
			candidate, _ := recordTriage(t, liveEntropy())
			tampered := rewriteLog(t, candidate.Dir, tc.edit)
			for _, pair := range [][2]*session.Session{{golden, tampered}, {tampered, golden}} {
				d, err := CompareSessions(pair[0], pair[1], nil)
				var fm *FingerprintMismatchError
				if !errors.As(err, &fm) || fm.Kind != tc.kind || fm.Field != tc.field || fm.Session != "triage" || d != nil {
					t.Fatalf("got %v, %v; want a *FingerprintMismatchError on %s %s", d, err, tc.kind, tc.field)
				}
			}
		})
	}
}

func TestCompareSessionsRefusesIncompleteRuns(t *testing.T) {
	golden, _ := recordTriage(t, liveEntropy())
	candidate, _ := recordTriage(t, liveEntropy())
	crashed := rewriteLog(t, candidate.Dir, func(lines []string) []string { return lines[:len(lines)-1] })
	for _, pair := range [][2]*session.Session{{golden, crashed}, {crashed, golden}} {
		if _, err := CompareSessions(pair[0], pair[1], nil); !errors.Is(err, session.ErrIncomplete) {
			t.Fatalf("got %v, want ErrIncomplete", err)
		}
	}
}

// TestCompareSessionsJudgesByTheGoldenMode: a candidate recorded with structural fingerprints makes
// the same calls as a strict golden run; its stored fingerprints differ, the recomputed ones do not.
func TestCompareSessionsJudgesByTheGoldenMode(t *testing.T) {
	golden, _ := recordTriage(t, liveEntropy())
	cfg := liveEntropy()
	cfg.FingerprintMode = fingerprint.Structural
	candidate, _ := recordTriage(t, cfg)
	if Compare(golden.Events, candidate.Events) == nil {
		t.Fatal("the stored fingerprints of the two modes agree; the test proves nothing")
	}
	if d, err := CompareSessions(golden, candidate, nil); d != nil || err != nil {
		t.Fatalf("got %v, %v; want a match", d, err)
	}
	golden.Meta.FingerprintMode = "fuzzy"
	var me *session.CorruptMetaError
	if _, err := CompareSessions(golden, candidate, nil); !errors.As(err, &me) || me.Field != "fingerprintMode" {
		t.Fatalf("unknown mode: %v", err)
	}
}

// TestCompareSessionsUsesTheProviderCodec: in structural mode the codec decides what is masked, so the
// lookup must be the recorder's.
func TestCompareSessionsUsesTheProviderCodec(t *testing.T) {
	cfg := liveEntropy()
	cfg.FingerprintMode = fingerprint.Structural
	cfg.Codec = maskAllCodec{}
	golden, _ := recordTriage(t, cfg)
	if _, err := CompareSessions(golden, golden, nil); !errors.As(err, new(*FingerprintMismatchError)) {
		t.Fatalf("without the recorder's codec the fingerprints cannot match: %v", err)
	}
	lookup := func(provider string) Codec {
		if provider == "mask-all" {
			return maskAllCodec{}
		}
		return nil
	}
	if d, err := CompareSessions(golden, golden, lookup); d != nil || err != nil {
		t.Fatalf("with the recorder's codec: %v, %v", d, err)
	}
}

// maskAllCodec masks the system prompt in structural fingerprints.
type maskAllCodec struct{ GenericCodec }

func (maskAllCodec) Name() string            { return "mask-all" }
func (maskAllCodec) VolatilePaths() []string { return []string{"system"} }

// TestCheckFingerprintsNamesEveryForgedStep: CheckFingerprints (what verify runs) refuses a session
// whose stored fingerprint is not its stored call's, naming the step and field, and
// FingerprintMismatches (what inspect marks) lists each one.
func TestCheckFingerprintsNamesEveryForgedStep(t *testing.T) {
	s, _ := recordTriage(t, liveEntropy())
	if err := CheckFingerprints(s, nil); err != nil {
		t.Fatalf("an intact recording: %v", err)
	}
	if got, err := FingerprintMismatches(s, nil); len(got) != 0 || err != nil {
		t.Fatalf("an intact recording: %v, %v", got, err)
	}
	tampered := rewriteLog(t, s.Dir, func(lines []string) []string {
		lines = replaceInKind(session.KindModelCall, `"model":"fake-1"`, `"model":"fake-9"`)(lines)
		return replaceInKind(session.KindToolCall, `"label":"bug"`, `"label":"wontfix"`)(lines)
	})
	var want []string
	for _, ev := range tampered.Events {
		if ev.Kind == session.KindModelCall && ev.Request.Model == "fake-9" {
			want = append(want, fmt.Sprintf("%d requestHash", ev.Step))
		}
		if ev.Kind == session.KindToolCall && strings.Contains(string(ev.Args), "wontfix") {
			want = append(want, fmt.Sprintf("%d argsHash", ev.Step))
		}
	}
	var fm *FingerprintMismatchError
	if err := CheckFingerprints(tampered, nil); !errors.As(err, &fm) || fmt.Sprintf("%d %s", fm.Step, fm.Field) != want[0] {
		t.Fatalf("CheckFingerprints: %v; want a *FingerprintMismatchError at %s", err, want[0])
	}
	all, err := FingerprintMismatches(tampered, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range all {
		got = append(got, fmt.Sprintf("%d %s", m.Step, m.Field))
	}
	if diff := cmp.Diff(want, got); diff != "" || len(want) != 2 {
		t.Fatalf("mismatches (-want +got):\n%s", diff)
	}
}
