package evidence

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// fixture is a git repository built inside the test (gittest) with the short names these tests use.
type fixture struct {
	*gittest.Repo
	t    *testing.T
	dir  string
	repo *git.Repository
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	r := gittest.New(t)
	return &fixture{Repo: r, t: t, dir: r.Dir, repo: r.Git}
}

func (f *fixture) commit(msg string, files map[string]string) string { return f.Commit(msg, files) }

// empty makes an --allow-empty commit whose message names a step: it proves nothing moved.
func (f *fixture) empty(msg string) string { return f.Empty(msg) }

func (f *fixture) checkout(branch string, create bool) { f.Checkout(branch, create) }

func (f *fixture) open(ref string) *Workspace {
	f.t.Helper()
	w, err := OpenGit(f.dir, ref)
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

func step(id, text string, paths ...string) ledger.Step {
	return ledger.Step{ID: id, Text: text, Paths: paths}
}

func TestAdjudicateReVerifiesEveryStepByItsCommitFootprint(t *testing.T) {
	f := newFixture(t)
	root := f.commit("init", map[string]string{"README.md": "hello"})
	store := f.commit("store", map[string]string{"lib/store.go": "package lib"})
	unrelated := f.commit("docs", map[string]string{"docs/unrelated.md": "x"})
	emptyS4 := f.empty("s4: parser done")
	f.checkout("elsewhere", true)
	offLane := f.commit("elsewhere", map[string]string{"lib/store.go": "package lib // v2"})
	f.checkout("master", false)

	state := ledger.State{HasIntent: true, StartSHA: root,
		Steps: []ledger.Step{
			step("readme", "write README.md"),
			step("store", "write lib/store.go"),
			step("short", "", "lib/store.go"),
			step("dir", "fill the library", "lib"),
			step("forged", "write api/server.go"),
			step("allow-empty", "write parse/parse.go"),
			step("tiny", "write lib/store.go"),
			step("not-hex", "write lib/store.go"),
			step("no-sha", "write lib/store.go"),
			step("off-lane", "write lib/store.go"),
			step("missing", "write lib/store.go"),
			step("names-nothing", "make it faster"),
			step("unclaimed", "write lib/other.go"),
			step("basename", "write store.go"),
		},
		Verified: map[string]ledger.Verification{
			"readme":        {SHA: root, Via: resume.ViaFilePath},
			"store":         {SHA: store, Via: resume.ViaFilePath},
			"short":         {SHA: store[:7], Via: resume.ViaFilePath},
			"dir":           {SHA: strings.ToUpper(store), Via: resume.ViaFilePath},
			"forged":        {SHA: unrelated, Via: resume.ViaFilePath},
			"allow-empty":   {SHA: emptyS4, Via: resume.ViaFilePath},
			"tiny":          {SHA: store[:2], Via: resume.ViaFilePath},
			"not-hex":       {SHA: "HEAD~1", Via: resume.ViaFilePath},
			"no-sha":        {Via: resume.ViaFilePath},
			"off-lane":      {SHA: offLane, Via: resume.ViaFilePath},
			"missing":       {SHA: strings.Repeat("0", 40), Via: resume.ViaFilePath},
			"names-nothing": {SHA: store, Via: resume.ViaFilePath},
			"undeclared":    {SHA: store, Via: resume.ViaFilePath},
			"basename":      {SHA: store, Via: resume.ViaFilePath},
		},
	}
	want := map[string]resume.CheckReason{
		"readme":        resume.CheckPredatesRun,       // the start commit (a root: its footprint is its whole tree) is not the run's work
		"basename":      resume.CheckFootprintMismatch, // store.go at the root was named; lib/store.go is another file
		"store":         resume.CheckVerified,
		"short":         resume.CheckVerified,
		"dir":           resume.CheckVerified,
		"forged":        resume.CheckFootprintMismatch,
		"allow-empty":   resume.CheckEmptyCommit,
		"tiny":          resume.CheckSHATooShort,
		"not-hex":       resume.CheckNotASHA,
		"no-sha":        resume.CheckNoSHA,
		"off-lane":      resume.CheckNotInAncestry,
		"missing":       resume.CheckCommitMissing,
		"names-nothing": resume.CheckStepNamesNoPath,
	}
	checks := adjudicate(t, f.open(""), state)
	got := map[string]resume.CheckReason{}
	for _, c := range checks {
		got[c.Step] = c.Reason
		if c.Verified != (c.Reason == resume.CheckVerified) {
			t.Errorf("%s: verified=%v with reason %s", c.Step, c.Verified, c.Reason)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("adjudication =\n%v\nwant\n%v", got, want)
	}
	if checks[1].Commit != store || !reflect.DeepEqual(checks[1].Touched, []string{"lib/store.go"}) {
		t.Fatalf("store check = %+v", checks[1])
	}

	// Without a start commit in ancestry nothing can be told apart from history: nothing is verified.
	state.StartSHA = ""
	for _, c := range adjudicate(t, f.open(""), state) {
		if c.Verified || c.Reason != resume.CheckNoStartAnchor {
			t.Errorf("%s without a start anchor: verified=%v reason %s", c.Step, c.Verified, c.Reason)
		}
	}
}

func TestAShortSHAThatNamesTwoCommitsIsAmbiguous(t *testing.T) {
	f := newFixture(t)
	f.commit("init", map[string]string{"a.go": "a"})
	w := f.open("")
	// Two ancestry entries sharing a 7-character prefix cannot come from a small fixture, so the
	// ancestry is doubled by hand: the same commit listed under two spellings must still refuse.
	w.ancestry = append(w.ancestry, plumbing.NewHash(w.ancestry[0].String()[:7]+strings.Repeat("f", 33)))
	facts, err := w.commitFacts(w.ancestry[0].String()[:7], nil)
	if err != nil || facts.Lookup != resume.LookupAmbiguous {
		t.Fatalf("lookup = %+v, %v", facts, err)
	}
}

func TestLane(t *testing.T) {
	f := newFixture(t)
	start := f.commit("init", map[string]string{"README.md": "x"})
	s1 := f.commit("s1", map[string]string{"lib/a.go": "a"})
	own := f.commit("s2 attempt", map[string]string{"lib/b.go": "b"})
	parked := f.commit("more of the run's work", map[string]string{"lib/c.go": "c"})
	foreign := f.commit("a human fixed something", map[string]string{"lib/a.go": "a2"})

	cases := []struct {
		name     string
		ref      string
		point    string
		state    ledger.State
		advanced bool
		reason   resume.LaneReason
		foreign  int
	}{
		{"no resume point is not advanced", "", "", ledger.State{}, false, resume.LaneNoResumePoint, 0},
		{"a resume point rewritten out of history is advanced", "", strings.Repeat("9", 40), ledger.State{}, true, resume.LaneResumePointRewritten, 0},
		{"HEAD at the resume point is not advanced", s1, s1, ledger.State{}, false, resume.LaneAtResumePoint, 0},
		{"the run's own recorded commit past the point is not advanced", own, s1,
			ledger.State{Claimed: map[string]ledger.Claim{"s2": {SHA: own[:10]}}}, false, resume.LaneOnlyRunsOwnWork, 0},
		{"an unrecorded commit past the point is advanced", own, s1, ledger.State{}, true, resume.LaneForeignWork, 1},
		{"commits up to the recorder-minted suspend SHA are accounted for", parked, s1,
			ledger.State{SuspendSHA: parked}, false, resume.LaneOnlyRunsOwnWork, 0},
		{"a human's commit after the suspend is advanced", foreign, s1,
			ledger.State{SuspendSHA: parked}, true, resume.LaneForeignWork, 1},
		{"a resume point at the start SHA counts every later unrecorded commit", foreign, start,
			ledger.State{Verified: map[string]ledger.Verification{"s1": {SHA: s1}}}, true, resume.LaneForeignWork, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lf, err := f.open(tc.ref).LaneFacts(tc.point, tc.state)
			if err != nil {
				t.Fatal(err)
			}
			lc := resume.JudgeLane(lf)
			if lc.Advanced != tc.advanced || lc.Reason != tc.reason || lc.ForeignCount != tc.foreign || len(lc.Foreign) != tc.foreign {
				t.Fatalf("lane = %+v", lc)
			}
		})
	}
}

func TestFactsFeedTheResumeVerdict(t *testing.T) {
	f := newFixture(t)
	start := f.commit("init", map[string]string{"README.md": "x"})
	s1 := f.commit("s1", map[string]string{"lib/store.go": "a"})
	s2empty := f.empty("s2: parse.go done")
	s3 := f.commit("s3", map[string]string{"cmd/main.go": "package main"})
	plan := []ledger.Step{step("s1", "write lib/store.go"), step("s2", "write parse/parse.go"), step("s3", "write cmd/main.go")}

	cases := []struct {
		name     string
		ref      string
		state    ledger.State
		verdict  resume.Verdict
		verified int
		residual []string
		point    string
	}{
		{
			name: "an --allow-empty STEP_VERIFIED is a hole: later verified steps stay in the residual",
			state: ledger.State{HasIntent: true, StartSHA: start, Steps: plan,
				Verified: map[string]ledger.Verification{"s1": {SHA: s1, Via: "file-path"}, "s2": {SHA: s2empty, Via: "file-path"}, "s3": {SHA: s3, Via: "file-path"}}},
			verdict: resume.Resumable, verified: 1, residual: []string{"s2", "s3"}, point: s1,
		},
		{
			name: "a forged STEP_VERIFIED at a real unrelated commit is redone",
			ref:  s1,
			state: ledger.State{HasIntent: true, StartSHA: start, Steps: plan,
				Verified: map[string]ledger.Verification{"s1": {SHA: start, Via: "file-path"}},
				Claimed:  map[string]ledger.Claim{"s1": {SHA: s1}}},
			verdict: resume.Resumable, verified: 0, residual: []string{"s1", "s2", "s3"}, point: start,
		},
		{
			name: "a finished run whose lane moved is complete, not diverged",
			state: ledger.State{HasIntent: true, StartSHA: start, Steps: plan[:1],
				Verified: map[string]ledger.Verification{"s1": {SHA: s1, Via: "file-path"}}},
			verdict: resume.Complete, verified: 1, residual: []string{}, point: s1,
		},
		{
			name: "an unrecorded commit past the resume point is diverged",
			state: ledger.State{HasIntent: true, StartSHA: start, Steps: plan,
				Verified: map[string]ledger.Verification{"s1": {SHA: s1, Via: "file-path"}}},
			verdict: resume.Diverged, verified: 1, residual: []string{"s2", "s3"}, point: s1,
		},
		{
			name: "the run's own recorded commits past the point are resumable",
			state: ledger.State{HasIntent: true, StartSHA: start, Steps: plan,
				Verified: map[string]ledger.Verification{"s1": {SHA: s1, Via: "file-path"}},
				Claimed:  map[string]ledger.Claim{"s2": {SHA: s2empty}, "s3": {SHA: s3}}},
			verdict: resume.Resumable, verified: 1, residual: []string{"s2", "s3"}, point: s1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			facts, rep, err := f.open(tc.ref).Facts(tc.state, nil, resume.DefaultPolicy())
			if err != nil {
				t.Fatal(err)
			}
			p := resume.Decide(tc.state, facts, nil, resume.DefaultPolicy())
			if p.Verdict != tc.verdict || len(p.Verified) != tc.verified || !reflect.DeepEqual(p.Residual, tc.residual) || p.ResumeSHA != tc.point {
				t.Fatalf("plan = %+v\nlane = %+v\nsteps = %+v", p, rep.Lane, rep.Steps)
			}
			if rep.Head != facts.HeadSHA || rep.Commits != len(facts.SHAsInAncestry) {
				t.Fatalf("report = %+v", rep)
			}
		})
	}
}

func TestCloneGitFromAPathOrAFileURLNeedsNoNetwork(t *testing.T) {
	f := newFixture(t)
	first := f.commit("init", map[string]string{"README.md": "x"})
	f.checkout("feature", true)
	feature := f.commit("feature", map[string]string{"lib/a.go": "a"})
	f.checkout("master", false)
	cases := []struct{ url, ref, head string }{
		{f.dir, "", first},
		{"file://" + f.dir, "", first},
		{f.dir, "feature", feature},
		{f.dir, first, first},
	}
	for _, tc := range cases {
		w, err := CloneGit(context.Background(), tc.url, tc.ref, t.TempDir())
		if err != nil {
			t.Fatalf("CloneGit(%s, %q): %v", tc.url, tc.ref, err)
		}
		if w.Head() != tc.head {
			t.Errorf("CloneGit(%s, %q) head = %s, want %s", tc.url, tc.ref, w.Head(), tc.head)
		}
	}
}

func TestOpeningOrCloningSomethingWrongSaysWhatToDo(t *testing.T) {
	f := newFixture(t)
	f.commit("init", map[string]string{"README.md": "x"})
	if _, err := OpenGit(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "--git-dir") {
		t.Fatalf("OpenGit of a non-repository: %v", err)
	}
	if _, err := OpenGit(f.dir, "no-such-branch"); err == nil || !strings.Contains(err.Error(), "not a branch, tag or commit") {
		t.Fatalf("OpenGit with a bad ref: %v", err)
	}
	if _, err := CloneGit(context.Background(), filepath.Join(t.TempDir(), "missing"), "", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "check the URL") {
		t.Fatalf("CloneGit of a missing repository: %v", err)
	}
	empty := t.TempDir()
	if _, err := git.PlainInit(empty, false); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenGit(empty, ""); err == nil || !strings.Contains(err.Error(), "HEAD") {
		t.Fatalf("OpenGit of an empty repository: %v", err)
	}
}

func TestOpenGitFindsTheRepositoryFromASubdirectoryAndPeelsTags(t *testing.T) {
	f := newFixture(t)
	h := f.commit("init", map[string]string{"lib/a.go": "a"})
	if _, err := f.repo.CreateTag("v1", plumbing.NewHash(h), &git.CreateTagOptions{Tagger: &object.Signature{Name: "fixture", Email: "fixture@example.com", When: time.Unix(1_700_000_100, 0)}, Message: "v1"}); err != nil {
		t.Fatal(err)
	}
	f.commit("next", map[string]string{"lib/b.go": "b"})
	w, err := OpenGit(filepath.Join(f.dir, "lib"), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if w.Head() != h || len(w.Ancestry()) != 1 || w.Source() != filepath.Join(f.dir, "lib") {
		t.Fatalf("head %s ancestry %v", w.Head(), w.Ancestry())
	}
}

// adjudicate gathers the claims against the workspace and applies the rules, as Facts does.
func adjudicate(t *testing.T, w *Workspace, state ledger.State) []resume.StepCheck {
	t.Helper()
	claims, err := w.Claims(state)
	if err != nil {
		t.Fatal(err)
	}
	out := []resume.StepCheck{}
	for _, c := range claims {
		out = append(out, resume.Adjudicate(c))
	}
	return out
}

// TestAnUnreadableRepositoryIsAnErrorNotAVerdict removes the tree of a claimed commit from the object
// store: the evidence cannot be read, so gathering fails and says why instead of calling the step
// unverified (which would quietly make the run look like it has more to do).
func TestAnUnreadableRepositoryIsAnErrorNotAVerdict(t *testing.T) {
	f := newFixture(t)
	start := f.commit("init", map[string]string{"README.md": "x"})
	s1 := f.commit("s1", map[string]string{"lib/store.go": "a"})
	c, err := f.repo.CommitObject(plumbing.NewHash(s1))
	if err != nil {
		t.Fatal(err)
	}
	tree := c.TreeHash.String()
	if err := os.Remove(filepath.Join(f.dir, ".git", "objects", tree[:2], tree[2:])); err != nil {
		t.Fatal(err)
	}
	state := ledger.State{HasIntent: true, StartSHA: start, Steps: []ledger.Step{step("s1", "write lib/store.go")},
		Verified: map[string]ledger.Verification{"s1": {SHA: s1, Via: "file-path"}}}
	_, _, err = f.open("").Facts(state, nil, resume.DefaultPolicy())
	if err == nil || !strings.Contains(err.Error(), "step s1") {
		t.Fatalf("Facts over a repository missing an object: err = %v, want an error naming step s1", err)
	}
}
