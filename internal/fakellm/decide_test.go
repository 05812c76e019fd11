package fakellm

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecideLetsSlowFaultsAddUpAndTheFirstOtherFaultDecide(t *testing.T) {
	slow := Fault{Kind: FaultSlow, Delay: Duration{time.Second}, EventDelay: Duration{time.Millisecond}}
	for _, tc := range []struct {
		name   string
		faults []Fault
		stream bool
		want   outcome
	}{
		{"none", nil, false, outcome{}},
		{"slow twice then a rate limit", []Fault{slow, slow, {Kind: FaultRateLimit}, {Kind: FaultServerError}}, false,
			outcome{fault: FaultRateLimit, delay: 2 * time.Second, eventDelay: 2 * time.Millisecond, status: http.StatusTooManyRequests, retryAfter: 1}},
		{"slow alone", []Fault{slow}, true, outcome{fault: FaultSlow, delay: time.Second, eventDelay: time.Millisecond}},
		{"server error before cut", []Fault{{Kind: FaultServerError}, {Kind: FaultCut}}, true, outcome{fault: FaultServerError, status: 500}},
		{"cut", []Fault{{Kind: FaultCut, CutAfter: 3}}, false, outcome{fault: FaultCut, breakOff: FaultCut, breakAfter: 3}},
		{"stream error on a stream", []Fault{{Kind: FaultStreamError}}, true, outcome{fault: FaultStreamError, breakOff: FaultStreamError}},
		{"stream error without a stream is a 500", []Fault{{Kind: FaultStreamError}}, false, outcome{fault: FaultStreamError, status: 500}},
		{"retry-after as scripted", []Fault{{Kind: FaultRateLimit, RetryAfter: 9}}, false, outcome{fault: FaultRateLimit, status: 429, retryAfter: 9}},
	} {
		if d := cmp.Diff(tc.want, decide(tc.faults, tc.stream), cmp.AllowUnexported(outcome{})); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

func TestPiecesSplitAnywhereButInsideACharacter(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want []string
	}{
		{"", 3, nil},
		{"abcdefg", 0, []string{"abcdefg"}},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{`{"a":1}`, 1, []string{"{", `"`, "a", `"`, ":", "1", "}"}},
		{"héllo", 2, []string{"h", "é", "ll", "o"}}, // é is 2 bytes: "hé" would be 3
		{"€uro", 2, []string{"€", "ur", "o"}},       // € is 3 bytes, longer than a piece: alone
	} {
		got := pieces(tc.s, tc.n)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("pieces(%q, %d) (-want +got):\n%s", tc.s, tc.n, d)
		}
		if strings.Join(got, "") != tc.s {
			t.Errorf("pieces(%q, %d) do not join back to it", tc.s, tc.n)
		}
	}
}

func TestMatchHoldsOnlyWhenEveryConditionDoes(t *testing.T) {
	f := &facts{model: "claude-x", system: "Be careful. Never delete tests.", last: "tests fail", step: 2}
	for _, tc := range []struct {
		m    Match
		want bool
	}{
		{Match{}, true},
		{Match{Step: 2}, true},
		{Match{Step: 1}, false},
		{Match{Step: 2, System: "Never delete tests"}, true},
		{Match{Step: 2, System: "never delete tests"}, false}, // case matters
		{Match{Message: "fail", Model: "claude"}, true},
		{Match{Message: "pass"}, false},
		{Match{Model: "gpt"}, false},
	} {
		if got := tc.m.matches(f); got != tc.want {
			t.Errorf("%+v matches = %v, want %v", tc.m, got, tc.want)
		}
	}
}
