package coherence

import (
	"regexp"
	"strings"
)

// The tool vocabulary is keyed on what a call does, not on famous names: anything that spawns a
// process is a run tool, whatever it is called.
var (
	// RunTools spawn a process.
	RunTools = set("run_command", "run_program", "evaluate", "check_acceptance", "repl", "check_types")
	// DeliverTools make work leave the machine or become a commit.
	DeliverTools = set("git_commit", "git_push", "git_branch", "gh_pr", "gh_issue")
	// OrientTools only read. None of them can ever count as drift, however many there are.
	OrientTools = set("read_file", "read_lines", "read_around", "read_document", "read_table", "read_image",
		"search_text", "find_files", "find_definition", "find_references", "list_symbols", "list_dir",
		"git_diff", "git_log", "git_status", "docs", "fetch_url", "web_search", "see_page", "read_skill",
		"plan_status")
	// WriteTools change files. A recorded call says so itself with result.mutated; for a call that does
	// not, a successful call of one of these is taken to have mutated the paths it names.
	WriteTools = set("write_file", "write_files", "edit_file", "create_file", "delete_file", "move_file",
		"rename_file", "apply_patch", "str_replace", "append_file", "patch_file")
	// MarkTools are a run maintaining its own plan (besides STEP_CLAIMED ledger records).
	MarkTools = set("plan_step")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// deliverCommand recognises a shell command that is a delivery, for runs that shell out.
var deliverCommand = regexp.MustCompile(`\bgit\s+(?:commit|push)\b|\bgh\s+pr\s+create\b`)

// genericSegments are directory names too common to identify a step. Without this stoplist a step
// that mentions "lib" would claim every file under lib/ — attribution so generous it can never fail.
var genericSegments = set("src", "lib", "test", "tests", "spec", "app", "apps", "dist", "build", "out",
	"bin", "pkg", "pkgs", "packages", "node_modules", "index", "main", "utils", "util", "common", "shared",
	"components", "scripts", "tmp", "temp", "docs", "internal", "cmd", "vendor")

// stopWords are words too common to identify anything in a step's prose.
var stopWords = set("the", "and", "for", "with", "from", "into", "onto", "that", "this", "these", "those",
	"then", "than", "them", "they", "each", "all", "any", "are", "was", "were", "has", "have", "had", "not",
	"but", "its", "our", "your", "you", "will", "can", "should", "must", "when", "what", "which", "who",
	"how", "out", "use", "using", "via", "per", "also", "only", "just", "some", "more", "most", "file",
	"files", "step", "steps", "code", "new", "make", "sure", "there", "here", "over", "under", "about")

// significantWords are the lower-case words of at least three characters in s that are not stop
// words: what a stem or a directory segment may be matched against.
func significantWords(s string) map[string]bool {
	words := map[string]bool{}
	for _, w := range wordSplit.Split(strings.ToLower(s), -1) {
		if len(w) >= 3 && !stopWords[w] {
			words[w] = true
		}
	}
	return words
}

var wordSplit = regexp.MustCompile(`[^\pL\pN_]+`)

// Kind is what a step asks for, which decides what counts as evidence that it happened.
type Kind string

const (
	KindDeliver  Kind = "deliver"
	KindWrite    Kind = "write"
	KindCommand  Kind = "command"
	KindVerify   Kind = "verify"
	KindResearch Kind = "research"
	KindUnknown  Kind = "unknown"
)

// kindPatterns are tried in this order and the first match is the step's primary kind. Deliver
// outranks write on purpose: the deliverable that dies when the turns run out is the last one, and
// the last one is almost always the commit. Notes on the word lists:
//   - git_commit does not match `\bcommit\b` (the underscore is a word character), so the tool names
//     are listed bare — otherwise a step literally named "git_commit" would be waved through as unknown;
//   - bare "make" and "build" are absent: "make it readable" and "build the parser" are writing, and
//     classifying them as commands would refuse them in a session that ran nothing.
var kindPatterns = []struct {
	kind Kind
	re   *regexp.Regexp
}{
	{KindDeliver, wordsRE([]string{`commit`, `push`, `pull\s+request`, `open\s+a\s+pr`, `merge`, `tag`, `publish`,
		`release`, `deploy`}, `git_commit`, `git_push`, `gh_pr`)},
	{KindWrite, wordsRE([]string{`writ\w*`, `creat\w*`, `add`, `adds`, `adding`, `implement\w*`, `port\w*`,
		`refactor\w*`, `renam\w*`, `delet\w*`, `remov\w*`, `updat\w*`, `edit\w*`, `generat\w*`, `scaffold\w*`,
		`fix\w*`, `extend\w*`, `wire\w*`, `replac\w*`, `migrat\w*`})},
	{KindCommand, wordsRE([]string{`run`, `runs`, `running`, `execut\w*`, `npm`, `npx`, `node`, `pytest`,
		`makefile`, `lint\w*`, `typecheck\w*`, `compil\w*`, `benchmark\w*`, `install`, `test`, `tests`, `suite`})},
	{KindVerify, wordsRE([]string{`verif\w*`, `check\w*`, `confirm\w*`, `validat\w*`, `ensur\w*`, `prov\w*`,
		`measur\w*`, `inspect\w*`})},
	{KindResearch, wordsRE([]string{`research\w*`, `investigat\w*`, `read`, `reads`, `reading`, `review\w*`,
		`understand\w*`, `explor\w*`, `decid\w*`, `choos\w*`, `chose`, `design\w*`, `identif\w*`, `figure`,
		`compar\w*`, `assess\w*`, `audit\w*`, `plan`, `survey`})},
}

// wordsRE matches any of the bounded words, or any of the bare alternatives, case-insensitively.
func wordsRE(bounded []string, bare ...string) *regexp.Regexp {
	alts := []string{`\b(?:` + strings.Join(bounded, "|") + `)\b`}
	alts = append(alts, bare...)
	return regexp.MustCompile(`(?i)` + strings.Join(alts, "|"))
}

// ClassifyStep returns a step's primary kind and every kind its text matches. Evidence is required for
// the primary kind alone: requiring it for every detected kind would refuse a step the moment half of
// it is unobservable, and this package's safety argument is that it refuses rarely and specifically.
func ClassifyStep(text string) (Kind, []Kind) {
	var kinds []Kind
	for _, p := range kindPatterns {
		if p.re.MatchString(text) {
			kinds = append(kinds, p.kind)
		}
	}
	if len(kinds) == 0 {
		return KindUnknown, nil
	}
	return kinds[0], kinds
}
