package checkpoint

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func sum(id, sess string, step, incr int64) Summary {
	return Summary{ID: id, Anchor: Anchor{Session: sess, Step: step}, IncrementalBytes: incr,
		CreatedAt: time.Date(2026, 1, 1, 0, 0, int(step), 0, time.UTC)}
}

func TestResolveAddresses(t *testing.T) {
	list := []Summary{
		sum("ab12aa", "s1", 3, 0), sum("ab34bb", "s1", 12, 0), sum("cd56cc", "s1", 20, 0), sum("ef78dd", "s2", 15, 0),
	}
	cases := []struct {
		name, session, addr, want string
		wantErr                   error
		candidates                []string
	}{
		{"a unique prefix", "", "cd", "cd56cc", nil, nil},
		{"a prefix is case-insensitive", "", "CD5", "cd56cc", nil, nil},
		{"a full id", "", "ab34bb", "ab34bb", nil, nil},
		{"an ambiguous prefix lists its candidates, newest first", "", "ab", "", &AmbiguousError{}, []string{"ab34bb", "ab12aa"}},
		{"an unknown prefix", "", "ff", "", ErrNotFound, nil},
		{"step N is the nearest at or before N", "s1", "step 19", "ab34bb", nil, nil},
		{"step N on the step itself", "s1", "step 12", "ab34bb", nil, nil},
		{"step N stays in its session", "s1", "step 16", "ab34bb", nil, nil},
		{"step N across sessions when none is given", "", "step 16", "ef78dd", nil, nil},
		{"step before the first checkpoint", "s1", "step 2", "", ErrNotFound, nil},
		{"latest of a session", "s2", "latest", "ef78dd", nil, nil},
		{"latest overall", "", "LATEST", "cd56cc", nil, nil},
		{"latest of an unknown session", "s9", "latest", "", ErrNotFound, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(list, tc.session, tc.addr)
			switch want := tc.wantErr.(type) {
			case nil:
				if err != nil || got.ID != tc.want {
					t.Fatalf("Resolve(%q) = %s, %v; want %s", tc.addr, got.ID, err, tc.want)
				}
			case *AmbiguousError:
				var amb *AmbiguousError
				if !errors.As(err, &amb) {
					t.Fatalf("Resolve(%q): %v, want ambiguity", tc.addr, err)
				}
				if d := cmp.Diff(tc.candidates, amb.Candidates); d != "" {
					t.Errorf("candidates (-want +got):\n%s", d)
				}
			default:
				if !errors.Is(err, want) {
					t.Fatalf("Resolve(%q): %s, %v; want %v", tc.addr, got.ID, err, want)
				}
			}
		})
	}
	for _, bad := range []string{"", "step", "step -1", "step x", "step 1 2"} {
		if _, err := Resolve(list, "", bad); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%q) = %v, want a usage error", bad, err)
		}
	}
}

func TestPrunePlan(t *testing.T) {
	cases := []struct {
		name   string
		list   []Summary
		policy PrunePolicy
		want   []Deletion
		kept   int64
		over   bool
	}{
		{
			name:   "no rules delete nothing",
			list:   []Summary{sum("a", "s1", 1, 100), sum("b", "s1", 2, 100)},
			policy: PrunePolicy{},
			kept:   200,
		},
		{
			name:   "keep N per session deletes each session's oldest, oldest first",
			list:   []Summary{sum("a1", "s1", 1, 10), sum("a2", "s1", 2, 10), sum("a3", "s1", 3, 10), sum("b1", "s2", 1, 10), sum("b2", "s2", 5, 10)},
			policy: PrunePolicy{KeepPerSession: 2},
			want:   []Deletion{{ID: "a1", Session: "s1", Rule: RuleKeepPerSession, IncrementalBytes: 10}},
			kept:   40,
		},
		{
			name:   "the byte quota deletes oldest first across sessions until the kept bytes fit",
			list:   []Summary{sum("a1", "s1", 1, 100), sum("a2", "s1", 2, 50), sum("a3", "s1", 4, 10), sum("b1", "s2", 3, 40), sum("b2", "s2", 6, 10)},
			policy: PrunePolicy{MaxBytes: 80},
			want: []Deletion{
				{ID: "a1", Session: "s1", Rule: RuleMaxBytes, IncrementalBytes: 100},
				{ID: "a2", Session: "s1", Rule: RuleMaxBytes, IncrementalBytes: 50},
			},
			kept: 60,
		},
		{
			name:   "each rule is credited with its own deletions",
			list:   []Summary{sum("a1", "s1", 1, 5), sum("a2", "s1", 2, 100), sum("a3", "s1", 3, 10), sum("a4", "s1", 4, 10)},
			policy: PrunePolicy{KeepPerSession: 3, MaxBytes: 50},
			want: []Deletion{
				{ID: "a1", Session: "s1", Rule: RuleKeepPerSession, IncrementalBytes: 5},
				{ID: "a2", Session: "s1", Rule: RuleMaxBytes, IncrementalBytes: 100},
			},
			kept: 20,
		},
		{
			name:   "the newest checkpoint of a session survives a quota it alone exceeds",
			list:   []Summary{sum("a1", "s1", 1, 10), sum("a2", "s1", 2, 500), sum("b1", "s2", 1, 300)},
			policy: PrunePolicy{MaxBytes: 100},
			want:   []Deletion{{ID: "a1", Session: "s1", Rule: RuleMaxBytes, IncrementalBytes: 10}},
			kept:   800,
			over:   true,
		},
		{
			name:   "keep 1 keeps only the newest of every session",
			list:   []Summary{sum("a1", "s1", 1, 1), sum("a2", "s1", 2, 1), sum("b1", "s2", 1, 1)},
			policy: PrunePolicy{KeepPerSession: 1},
			want:   []Deletion{{ID: "a1", Session: "s1", Rule: RuleKeepPerSession, IncrementalBytes: 1}},
			kept:   2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Prune(tc.list, tc.policy)
			if d := cmp.Diff(tc.want, p.Delete); d != "" {
				t.Errorf("deletions (-want +got):\n%s", d)
			}
			if p.KeptBytes != tc.kept || p.OverQuota != tc.over {
				t.Errorf("kept %d bytes (over quota %v), want %d (%v)", p.KeptBytes, p.OverQuota, tc.kept, tc.over)
			}
		})
	}
}

func TestOnlyTheRecorderAnchorsARewind(t *testing.T) {
	for author, want := range map[session.Author]bool{
		session.AuthorRecorder: true, session.AuthorAgent: false, session.AuthorThirdParty: false, "": false,
	} {
		if got := (Anchor{Session: "s1", Author: author}).AnchorsRewind(); got != want {
			t.Errorf("author %q anchors a rewind: %v, want %v", author, got, want)
		}
	}
	if (Anchor{Author: session.AuthorRecorder}).AnchorsRewind() {
		t.Error("a checkpoint outside any session anchors a rewind")
	}
}

func TestACheckpointRecordsItsAnchor(t *testing.T) {
	ws, store := t.TempDir(), OpenStore(t.TempDir())
	write(t, ws, map[string]string{"a": "a"})
	c := create(t, store, ws, clock(), 12)
	m, err := store.Load(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(recorderAnchor(12), m.Anchor); d != "" {
		t.Errorf("anchor (-want +got):\n%s", d)
	}
}

func guard(id, sess string, step, incr int64) Summary {
	s := sum(id, sess, step, incr)
	s.Guard, s.CreatedAt = true, s.CreatedAt.Add(time.Hour)
	return s
}

func TestGuardsAreNamedOnlyByID(t *testing.T) {
	// The guard of a restore carries the latest step and is the newest checkpoint of all.
	list := []Summary{sum("ab12aa", "s1", 3, 0), sum("cd56cc", "s1", 20, 0), guard("9a0000", "s1", 20, 0)}
	for addr, want := range map[string]string{"latest": "cd56cc", "step 20": "cd56cc", "step 25": "cd56cc", "step 5": "ab12aa", "9a": "9a0000"} {
		if got, err := Resolve(list, "s1", addr); err != nil || got.ID != want {
			t.Errorf("Resolve(%q) = %s, %v; want %s", addr, got.ID, err, want)
		}
	}
	if got, err := Resolve([]Summary{guard("9a0000", "s1", 20, 0)}, "s1", "latest"); !errors.Is(err, ErrNotFound) {
		t.Errorf("latest among guards alone = %s, %v; want ErrNotFound", got.ID, err)
	}
}

func TestPruneKeepsCapturesAndTreatsGuardsAsTheirOwnClass(t *testing.T) {
	list := []Summary{sum("c1", "s1", 1, 10), sum("c2", "s1", 2, 10), guard("g1", "s1", 2, 10), guard("g2", "s1", 2, 10)}
	p := Prune(list, PrunePolicy{KeepPerSession: 1})
	want := []Deletion{
		{ID: "c1", Session: "s1", Rule: RuleKeepPerSession, IncrementalBytes: 10},
		{ID: "g1", Session: "s1", Guard: true, Rule: RuleKeepPerSession, IncrementalBytes: 10},
	}
	if d := cmp.Diff(want, p.Delete); d != "" {
		t.Errorf("keep 1 (-want +got):\n%s", d)
	}
	// Over the quota, guards go before any capture, even an older one.
	p = Prune(list, PrunePolicy{MaxBytes: 20})
	want = []Deletion{
		{ID: "g1", Session: "s1", Guard: true, Rule: RuleMaxBytes, IncrementalBytes: 10},
		{ID: "g2", Session: "s1", Guard: true, Rule: RuleMaxBytes, IncrementalBytes: 10},
	}
	if d := cmp.Diff(want, p.Delete); d != "" {
		t.Errorf("max bytes (-want +got):\n%s", d)
	}
}
