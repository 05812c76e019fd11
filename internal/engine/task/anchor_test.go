package task

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

func TestAVerifyResultCarriesItsAnchorsThroughTheStrictDecoder(t *testing.T) {
	want := examples()[Verify]
	want.Verify.Anchors = []Anchor{{Step: 4, TurnIndex: 1, TranscriptDigest: strings.Repeat("a", 64)}, {Step: 9, TurnIndex: 3, TranscriptDigest: strings.Repeat("b", 64)}}
	want.Verify.TotalAnchors = 2
	data, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"turnIndex": 3`) || !strings.Contains(string(data), `"totalAnchors": 2`) {
		t.Fatalf("the anchors are not on the wire:\n%s", data)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("decoded result (-want +got):\n%s", d)
	}
	// The decoder is strict inside an anchor too: a field it does not know is refused.
	bad := strings.Replace(string(data), `"turnIndex": 3`, `"turnIndex": 3, "author": "AGENT_AUTHORED"`, 1)
	if _, err := Decode([]byte(bad)); err == nil {
		t.Error("an anchor with an unknown field decoded")
	}
}

// ledgerEvent is a ledger event at step with the given author and record.
func ledgerEvent(step int64, author session.Author, rec ledger.Record) session.Event {
	return session.Event{Kind: session.KindLedger, Step: step, Author: author, Ledger: rec.JSON()}
}

func TestOnlyTheRecordersSuspendStampsAreAnchors(t *testing.T) {
	d1, d2, d3 := strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64)
	rec, agent := session.AuthorRecorder, session.AuthorAgent
	cases := []struct {
		name   string
		events []session.Event
		want   []Anchor
	}{
		{"recorder stamps in log order", []session.Event{
			{Kind: session.KindModelCall, Step: 0},
			ledgerEvent(1, rec, ledger.Suspend(0, d1, "")),
			ledgerEvent(3, rec, ledger.Suspend(1, d2, "abc")),
		}, []Anchor{{1, 0, d1}, {3, 1, d2}}},
		{"an agent-authored look-alike is not an anchor", []session.Event{
			ledgerEvent(1, agent, ledger.Suspend(0, d1, "")),
			ledgerEvent(2, rec, ledger.Suspend(1, d2, "")),
		}, []Anchor{{2, 1, d2}}},
		{"other ops and other kinds are not anchors", []session.Event{
			ledgerEvent(1, rec, ledger.Start("abc")),
			{Kind: session.KindNote, Step: 2, Author: rec, Ledger: ledger.Suspend(0, d1, "").JSON()},
		}, nil},
		{"a stamp without a turn or a digest is not an anchor", []session.Event{
			ledgerEvent(1, rec, ledger.Suspend(-1, "", "")),
			ledgerEvent(2, rec, ledger.Suspend(0, "not-a-digest", "")),
			ledgerEvent(3, rec, ledger.Suspend(0, strings.ToUpper(strings.Repeat("ab", 32)), "")),
		}, nil},
		{"a record of a newer schema or a corrupt one is not an anchor", []session.Event{
			{Kind: session.KindLedger, Step: 1, Author: rec, Ledger: json.RawMessage(`{"schema":"agentrewind.io/ledger/v9","op":"SUSPEND","turnIndex":0,"transcriptDigest":"` + d1 + `"}`)},
			{Kind: session.KindLedger, Step: 2, Author: rec, Ledger: json.RawMessage(`not json`)},
		}, nil},
		{"a turn stamped with two digests has no anchor at all", []session.Event{
			ledgerEvent(1, rec, ledger.Suspend(0, d1, "")),
			ledgerEvent(2, rec, ledger.Suspend(1, d2, "")),
			ledgerEvent(3, rec, ledger.Suspend(0, d3, "")),
			ledgerEvent(4, rec, ledger.Suspend(1, d2, "")),
		}, []Anchor{{2, 1, d2}, {4, 1, d2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, total := MintedAnchors(c.events)
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("anchors (-want +got):\n%s", d)
			}
			if total != int64(len(c.want)) {
				t.Errorf("total %d, want %d", total, len(c.want))
			}
		})
	}
}

func TestTheAnchorsListIsTheLatestOnesAndTheTotalCountsAll(t *testing.T) {
	var events []session.Event
	for i := range MaxReportedAnchors + 10 {
		events = append(events, ledgerEvent(int64(i), session.AuthorRecorder, ledger.Suspend(i, strings.Repeat("c", 64), "")))
	}
	got, total := MintedAnchors(events)
	if total != MaxReportedAnchors+10 || len(got) != MaxReportedAnchors || got[0].Step != 10 || got[len(got)-1].Step != MaxReportedAnchors+9 {
		t.Errorf("total %d, %d listed from step %d to %d", total, len(got), got[0].Step, got[len(got)-1].Step)
	}
}

func TestARunIsParkedOnlyAtTheLastStepOfAnOpenLog(t *testing.T) {
	a := []Anchor{{Step: 2, TurnIndex: 0, TranscriptDigest: strings.Repeat("a", 64)}, {Step: 6, TurnIndex: 1, TranscriptDigest: strings.Repeat("b", 64)}}
	cases := []struct {
		name   string
		v      VerifyResult
		want   Anchor
		okWant bool
	}{
		{"open log ending with the latest anchor", VerifyResult{Steps: 7, Anchors: a}, a[1], true},
		{"the run went on after the anchor", VerifyResult{Steps: 9, Anchors: a}, a[1], false},
		{"a closed log is not parked", VerifyResult{Steps: 7, Ended: true, Anchors: a}, Anchor{}, false},
		{"no anchors", VerifyResult{Steps: 7}, Anchor{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := c.v.ParkedAt()
			if ok != c.okWant || (ok && got != c.want) {
				t.Errorf("ParkedAt = %+v, %v; want %+v, %v", got, ok, c.want, c.okWant)
			}
		})
	}
}
