package coherence

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func js(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func write(path string) Call {
	return Call{Name: "write_file", Args: js(map[string]any{"path": path, "content": "x"})}
}

func read(path string) Call { return Call{Name: "read_file", Args: js(map[string]any{"path": path})} }

func run(command string, exitCode int) Call {
	return Call{Name: "run_command", Args: js(map[string]any{"command": command}), Result: js(map[string]any{"exitCode": exitCode})}
}

// rounds numbers the given rounds from 1.
func rounds(rs ...Round) []Round {
	for i := range rs {
		rs[i].Label = i + 1
	}
	return rs
}

func calls(cs ...Call) Round { return Round{Calls: cs} }

func plan(steps ...Step) Plan { return Plan{Task: "the task", Steps: steps} }

func TestNormPath(t *testing.T) {
	cases := map[string]string{`src\x.go`: "src/x.go", "./src/x.go": "src/x.go", "src//x.go": "src/x.go",
		"././a/": "a", "": "", "Src/X.go": "Src/X.go"}
	for in, want := range cases {
		if got := NormPath(in); got != want {
			t.Errorf("NormPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStepTargetsReadPathsOutOfProse(t *testing.T) {
	tg := StepTargets("Write lib/store.go, then add store.test.go (and docs). Bump to v1.2.3.")
	// A multi-dot name in prose is that whole name; its stem is still "store". A version is no path.
	if !reflect.DeepEqual(tg.Paths, []string{"lib/store.go", "store.test.go"}) {
		t.Fatalf("paths = %v", tg.Paths)
	}
	if !reflect.DeepEqual(tg.Basenames, []string{"store.go", "store.test.go"}) || !tg.Stems["store"] {
		t.Fatalf("basenames %v stems %v", tg.Basenames, tg.Stems)
	}
	if !tg.Words["store"] || tg.Words["then"] || tg.Words["and"] {
		t.Fatalf("words = %v", tg.Words)
	}
}

func TestAttributeIsStrengthOrderedNotPlanOrdered(t *testing.T) {
	steps := []Step{
		{ID: "tests", Text: "add store tests"},
		{ID: "store", Text: "write lib/store.go"},
		{ID: "other", Text: "update a/config.yaml"},
		{ID: "billing", Text: "refactor the billing module"},
		{ID: "generic", Text: "tidy lib and src code"},
		{ID: "db", Text: "db"},
	}
	cases := []struct {
		name     string
		path     string
		want     string
		strength Strength
		found    bool
	}{
		{"an exact path beats an earlier step's stem", "lib/store.go", "store", StrengthExact, true},
		{"a path suffix is exact", "repo/lib/store.go", "store", StrengthExact, true},
		{"the same basename elsewhere is a basename match", "b/config.yaml", "other", StrengthBasename, true},
		{"a test beside planned work stems to the same name", "test/store.test.mjs", "tests", StrengthStem, true},
		{"a significant directory segment attributes", "billing/handlers.go", "billing", StrengthSegment, true},
		{"a generic segment attributes nothing", "lib/unrelated.go", "", "", false},
		{"a two-character stem is noise", "x/db.go", "", "", false},
		{"an empty path attributes nothing", "", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := Attribute(tc.path, steps)
			if ok != tc.found || a.StepID != tc.want || a.Strength != tc.strength {
				t.Fatalf("Attribute(%q) = %+v, %v; want %s/%s", tc.path, a, ok, tc.want, tc.strength)
			}
		})
	}
}

func TestClassifyStep(t *testing.T) {
	cases := []struct {
		text  string
		kind  Kind
		kinds []Kind
	}{
		{"git_commit the result", KindDeliver, []Kind{KindDeliver}},
		{"port every file and then commit", KindDeliver, []Kind{KindDeliver, KindWrite}},
		{"write lib/store.go", KindWrite, []Kind{KindWrite}},
		{"run the test suite", KindCommand, []Kind{KindCommand}},
		{"verify the output", KindVerify, []Kind{KindVerify}},
		{"decide which library to use", KindResearch, []Kind{KindResearch}},
		{"build the parser", KindUnknown, nil},
		{"", KindUnknown, nil},
	}
	for _, tc := range cases {
		kind, kinds := ClassifyStep(tc.text)
		if kind != tc.kind || !reflect.DeepEqual(kinds, tc.kinds) {
			t.Errorf("ClassifyStep(%q) = %s %v, want %s %v", tc.text, kind, kinds, tc.kind, tc.kinds)
		}
	}
}

func TestDetectDrift(t *testing.T) {
	p := plan(Step{ID: "s1", Text: "write lib/store.go"}, Step{ID: "s2", Text: "add the parser in parse/parse.go"})
	reads := func(n int) []Round {
		var rs []Round
		for i := range n {
			rs = append(rs, calls(read("x/file"+string(rune('a'+i))+".go")))
		}
		return rs
	}
	stray := []Round{calls(write("notes/a.md")), calls(write("notes/b.md")), calls(write("notes/c.md"))}
	cases := []struct {
		name   string
		plan   Plan
		rounds []Round
		want   DriftVerdict
	}{
		{"no declared steps is no plan", Plan{}, rounds(stray...), DriftNoPlan},
		{"every step marked done is plan-complete", plan(Step{ID: "s1", Text: "x", Done: true}), rounds(stray...), DriftPlanComplete},
		{"three rounds are not enough history", p, rounds(stray...), DriftInsufficientHistory},
		{"reading forty unplanned files is exploring", p, rounds(reads(8)...), DriftExploring},
		{"a failed write is not a write", p, rounds(calls(read("a")), calls(Call{Name: "write_file", Args: js(map[string]any{"path": "n/a.md"}), Failed: true}),
			calls(Call{Name: "write_file", Args: js(map[string]any{"path": "n/b.md"}), Result: js(map[string]any{"ok": false})}),
			calls(Call{Name: "edit_file", Args: js(map[string]any{"path": "n/c.md"}), Result: js(map[string]any{"mutated": false})})), DriftExploring},
		{"a write attributed to a step is on plan", p, rounds(append(stray, calls(write("lib/store.go")))...), DriftOnPlan},
		{"a ledger mark in the window is on plan whatever was written", p,
			rounds(calls(write("n/a.md")), calls(write("n/b.md")), Round{Calls: []Call{write("n/c.md")}, Marks: []string{"s1"}}, calls(write("n/d.md"))), DriftOnPlan},
		{"a plan_step call in the window is on plan", p,
			rounds(calls(write("n/a.md")), calls(write("n/b.md")), calls(write("n/c.md"), Call{Name: "plan_step"}), calls(read("x"))), DriftOnPlan},
		{"two stray files are helpers, on plan", p, rounds(calls(read("a")), calls(read("b")), calls(write("n/a.md")), calls(write("n/b.md"))), DriftOnPlan},
		{"three unplanned files and no mark is drifting", p, rounds(append([]Round{calls(read("a"))}, stray...)...), DriftDrifting},
		{"unplanned writes older than the window are out of sight", p, rounds(append(stray, reads(6)...)...), DriftExploring},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DetectDrift(tc.plan, tc.rounds, 0)
			if d.Verdict != tc.want {
				t.Fatalf("verdict = %s, want %s (evidence %+v)", d.Verdict, tc.want, d.Evidence)
			}
			if d.Drifting != (tc.want == DriftDrifting) || (d.Suggestion != "") != d.Drifting || (d.Banner() != "") != d.Drifting {
				t.Fatalf("only a drifting verdict carries a suggestion and a banner: %+v", d)
			}
			if (d.Evidence == nil) != (tc.want == DriftNoPlan) {
				t.Fatalf("evidence = %+v", d.Evidence)
			}
		})
	}
}

func TestDriftEvidenceNamesTheFilesAndAStableKey(t *testing.T) {
	p := plan(Step{ID: "s1", Text: "write lib/store.go"}, Step{ID: "s2", Text: "write api/server.go"})
	rs := rounds(calls(read("a")), calls(write("notes/c.md")), calls(write("notes/a.md"), write("notes/a.md")), calls(write("notes/b.md")))
	d := DetectDrift(p, rs, 0)
	if d.Evidence.Key != "drift:notes/a.md,notes/b.md,notes/c.md" {
		t.Fatalf("key = %q", d.Evidence.Key)
	}
	if !reflect.DeepEqual(d.Evidence.MutatingRounds, []int{2, 3, 4}) || len(d.Evidence.StaleSteps) != 2 {
		t.Fatalf("evidence = %+v", d.Evidence)
	}
	for _, want := range []string{"`notes/c.md`", "s1 write lib/store.go", "record a new INTENT", "not from the user"} {
		if !strings.Contains(d.Suggestion, want) {
			t.Errorf("suggestion lacks %q: %s", want, d.Suggestion)
		}
	}
	if b := d.Banner(); !strings.Contains(b, "notes/c.md, notes/a.md, notes/b.md") || !strings.Contains(b, "2 planned step(s) still untouched") {
		t.Errorf("banner = %s", b)
	}
}

func TestAcceptCompletion(t *testing.T) {
	p := plan(
		Step{ID: "w", Text: "write lib/store.go"},
		Step{ID: "wn", Text: "implement the retry logic"},
		Step{ID: "d", Text: "commit the work"},
		Step{ID: "c", Text: "run the tests"},
		Step{ID: "v", Text: "verify api/server.go behaves"},
		Step{ID: "r", Text: "decide which library to use"},
		Step{ID: "u", Text: "something else entirely"},
	)
	step := func(id string) Step {
		for _, s := range p.Steps {
			if s.ID == id {
				return s
			}
		}
		t.Fatalf("no step %s", id)
		return Step{}
	}
	cases := []struct {
		name         string
		step         string
		rounds       []Round
		accepted     bool
		evidence     EvidenceKind
		contradicted bool
	}{
		{"a write step with its file written is accepted", "w", rounds(calls(write("lib/store.go"))), true, EvidenceFileWritten, false},
		{"a write step naming a file nobody wrote is refused", "w", rounds(calls(write("other/thing.md"))), false, EvidenceNone, false},
		{"a write step naming no file accepts any write in the run", "wn", rounds(calls(write("other/thing.md"))), true, EvidenceRunWideMutation, false},
		{"a write step in a run that wrote nothing is provably unfinished", "wn", rounds(calls(read("lib/store.go"))), false, EvidenceNone, false},
		{"a deliver step with a successful git_commit is accepted", "d", rounds(calls(Call{Name: "git_commit"})), true, EvidenceDelivered, false},
		{"a deliver step with a shelled-out commit is accepted", "d", rounds(calls(run("git commit -am wip", 0))), true, EvidenceDelivered, false},
		{"a deliver step with a failed commit is refused", "d", rounds(calls(Call{Name: "git_commit", Failed: true})), false, EvidenceNone, false},
		{"a command step with nothing run is refused", "c", rounds(calls(read("x"))), false, EvidenceNone, false},
		{"a command step over a red last command is contradicted", "c", rounds(calls(run("go test ./...", 0)), calls(run("go test ./...", 1))), false, EvidenceContradicted, true},
		{"a timed-out command is a failure", "c", rounds(calls(Call{Name: "run_command", Result: js(map[string]any{"timedOut": true})})), false, EvidenceContradicted, true},
		{"passed:false is a failure", "c", rounds(calls(Call{Name: "evaluate", Result: js(map[string]any{"passed": false})})), false, EvidenceContradicted, true},
		{"a command step whose last command passed is accepted", "c", rounds(calls(run("go test ./...", 1)), calls(run("go test ./...", 0))), true, EvidenceCommandRan, false},
		{"only the latest run counts: an errored last run is not a pass", "c", rounds(calls(run("go test ./...", 0)), calls(Call{Name: "run_command", Failed: true})), false, EvidenceNone, false},
		{"an errored run followed by a green one is accepted", "c", rounds(calls(Call{Name: "run_command", Failed: true}), calls(run("go test ./...", 0))), true, EvidenceCommandRan, false},
		{"a verify step whose last run errored needs a read-back", "v", rounds(calls(run("go vet", 0)), calls(Call{Name: "run_command", Failed: true})), false, EvidenceNone, false},
		{"a verify step with a command run is accepted", "v", rounds(calls(run("go vet", 0))), true, EvidenceCommandRan, false},
		{"a verify step that read its file back is accepted", "v", rounds(calls(read("./api/server.go"))), true, EvidenceReadBack, false},
		{"a verify step with nothing run or read is refused", "v", rounds(calls(read("unrelated.txt"))), false, EvidenceNone, false},
		{"a research step is accepted as an assertion", "r", nil, true, EvidenceAssertion, false},
		{"an unknown step is accepted as an assertion", "u", nil, true, EvidenceAssertion, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := AcceptCompletion(step(tc.step), p, tc.rounds)
			if c.Accepted != tc.accepted || c.Evidence != tc.evidence || c.Contradicted != tc.contradicted {
				t.Fatalf("completion = %+v", c)
			}
			if c.Why == "" || (c.Remedy == "") == (!c.Accepted) {
				t.Fatalf("a refusal carries a remedy, an acceptance none: %+v", c)
			}
		})
	}
}

func TestAcceptCompletionWithoutAPlanAttributesToTheStepAlone(t *testing.T) {
	c := AcceptCompletion(Step{ID: "w", Text: "write lib/store.go"}, Plan{}, rounds(calls(write("lib/store.go"))))
	if !c.Accepted || !reflect.DeepEqual(c.Paths, []string{"lib/store.go"}) || !reflect.DeepEqual(c.Rounds, []int{1}) {
		t.Fatalf("completion = %+v", c)
	}
}

func TestReconcile(t *testing.T) {
	p := plan(
		Step{ID: "s1", Text: "write lib/store.go", Done: true},
		Step{ID: "s2", Text: "write lib/parse.go", Done: true},
		Step{ID: "s3", Text: "run the tests"},
	)
	rs := rounds(calls(write("lib/store.go"), write("package-lock.json")), calls(write("lib/store.go")))
	r := Reconcile(p, rs)
	if !r.OK || r.Promised != 3 || r.MarkedDone != 2 || r.Evidenced != 1 {
		t.Fatalf("counts = %+v", r)
	}
	if !reflect.DeepEqual(r.Claimed, []string{"s2"}) || !reflect.DeepEqual(r.Outstanding, []string{"s3"}) {
		t.Fatalf("claimed %v outstanding %v", r.Claimed, r.Outstanding)
	}
	if !reflect.DeepEqual(r.Unpromised, []string{"package-lock.json"}) || len(r.Changed) != 2 || r.Changed[0].StepID != "s1" {
		t.Fatalf("changed %+v unpromised %v", r.Changed, r.Unpromised)
	}
	text := strings.Join(r.Lines(), "\n")
	for _, want := range []string{"promised 3 · marked done 2 · evidenced 1 · asserted without evidence 1 · unpromised files 1",
		"✓ s1  [write] write lib/store.go — lib/store.go", "! s2  [write] write lib/parse.go — MARKED DONE, but this step names `lib/parse.go`",
		"· s3  [command]", "changed but promised by no step: package-lock.json", "says nothing about whether"} {
		if !strings.Contains(text, want) {
			t.Errorf("lines lack %q:\n%s", want, text)
		}
	}
}

func TestReconcileWithoutAPlanSaysSo(t *testing.T) {
	r := Reconcile(Plan{Task: "free-form"}, nil)
	if r.OK || r.Note == "" || !strings.HasPrefix(r.Lines()[0], "RECONCILIATION — no plan") {
		t.Fatalf("reconciliation = %+v", r)
	}
}

func TestFlattenReadsEveryFieldAsAbsentUntilPresent(t *testing.T) {
	rs := rounds(calls(
		Call{Name: ""},
		Call{Name: "write_file", Args: json.RawMessage(`{"path": broken`)},
		Call{Name: "write_files", Args: js(map[string]any{"files": []any{map[string]any{"path": "a.go"}, "b.go", 3}})},
		Call{Name: "move_file", Args: js(map[string]any{"from": "x.go", "to": "y.go"})},
		Call{Name: "custom", Result: js(map[string]any{"mutated": true, "changed": []any{"c.go"}})},
	))
	fc := flatten(rs)
	if len(fc) != 4 {
		t.Fatalf("flattened %d calls", len(fc))
	}
	if len(fc[0].args) != 0 || len(fc[0].paths) != 0 || !fc[0].mutated {
		t.Fatalf("broken args read as empty: %+v", fc[0])
	}
	if !reflect.DeepEqual(fc[1].paths, []string{"a.go", "b.go"}) || !reflect.DeepEqual(fc[2].paths, []string{"y.go"}) {
		t.Fatalf("paths = %v, %v", fc[1].paths, fc[2].paths)
	}
	if !fc[3].mutated || !reflect.DeepEqual(fc[3].paths, []string{"c.go"}) {
		t.Fatalf("an explicit mutated flag wins: %+v", fc[3])
	}
}

func TestACommandLineIsReadFromArgvToo(t *testing.T) {
	deliver := Plan{Steps: []Step{{ID: "d", Text: "open a pr"}}}
	argv := Call{Name: "run_program", Args: js(map[string]any{"argv": []any{"gh", "pr", "create", 7}})}
	if c := AcceptCompletion(deliver.Steps[0], deliver, rounds(calls(argv))); !c.Accepted || c.Evidence != EvidenceDelivered {
		t.Fatalf("a delivery run through argv: %+v", c)
	}
	command := Plan{Steps: []Step{{ID: "c", Text: "run the linter"}}}
	red := Call{Name: "run_program", Result: js(map[string]any{"argv": []any{"golangci-lint", "run"}, "exitCode": 3})}
	c := AcceptCompletion(command.Steps[0], command, rounds(calls(red)))
	if !c.Contradicted || !strings.Contains(c.Why, "`golangci-lint run`") || !strings.Contains(c.Why, "exit code 3") {
		t.Fatalf("a red argv run: %+v", c)
	}
	bare := Call{Name: "check_types", Result: js(map[string]any{"passed": false})}
	if c := AcceptCompletion(command.Steps[0], command, rounds(calls(bare))); !strings.Contains(c.Why, "`check_types`") || !strings.Contains(c.Why, "non-zero") {
		t.Fatalf("a run without a command line names the tool: %+v", c)
	}
}

func TestManyUnplannedFilesAreSummarisedNotListed(t *testing.T) {
	p := plan(Step{ID: "s1", Text: "write lib/store.go"})
	var cs []Call
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		cs = append(cs, write("notes/"+name+".md"))
	}
	d := DetectDrift(p, rounds(calls(read("x")), calls(read("y")), calls(read("z")), calls(cs...)), 0)
	if !d.Drifting || !strings.Contains(d.Suggestion, ", +2 more") || !strings.Contains(d.Banner(), " +3 more") {
		t.Fatalf("drift = %+v / %s", d, d.Banner())
	}
}
