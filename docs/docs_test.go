package docs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The documents checked: the README and every Markdown file in docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	if len(files) < 3 {
		t.Fatalf("found only %v; the README and docs/*.md should be here", files)
	}
	return files
}

func TestMakeTargetsExist(t *testing.T) {
	targets, err := makeTargets(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range docFiles(t) {
		doc := readDoc(t, f)
		for _, c := range commands(doc) {
			if c.words[0] != "make" {
				continue
			}
			for _, target := range makeArgs(c.words[1:]) {
				seen++
				if !targets[target] {
					t.Errorf("%s:%d: `make %s`: the Makefile has no target %q", f, c.line, target, target)
				}
			}
		}
	}
	if seen < 5 {
		t.Errorf("only %d make targets found in the docs; the scan is broken (the README names make demo and make test)", seen)
	}
}

func TestRelativeLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(string(readFile(t, path)))
		anchors[path] = a
		return a
	}
	seen := 0
	for _, f := range docFiles(t) {
		for _, l := range links(readDoc(t, f)) {
			seen++
			target, frag, _ := strings.Cut(l.target, "#")
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", f, l.line, l.target, path)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", f, l.line, l.target, path, frag)
			}
		}
	}
	if seen < 5 {
		t.Errorf("only %d relative links found in the docs; the scan is broken (the README links docs/api.md and the diagram)", seen)
	}
}

// TestBenchmarkCommandsAreTheMakefiles checks that every `go test ... -bench` command the docs show is
// one `make bench` runs, so the benchmark table never names a command that is not run.
func TestBenchmarkCommandsAreTheMakefiles(t *testing.T) {
	makefile := strings.ReplaceAll(string(readFile(t, filepath.Join("..", "Makefile"))), "$$", "$")
	seen := 0
	for _, f := range docFiles(t) {
		for _, p := range prose(readDoc(t, f)) {
			for _, m := range inlineCode.FindAllStringSubmatchIndex(p.text, -1) {
				line := p.line + strings.Count(p.text[:m[0]], "\n")
				// In a table cell a | is written \|.
				cmd := strings.ReplaceAll(strings.Join(strings.Fields(p.text[m[2]:m[3]]), " "), `\|`, "|")
				if !strings.HasPrefix(cmd, "go test ") || !strings.Contains(cmd, "-bench") {
					continue
				}
				seen++
				if !strings.Contains(makefile, cmd) {
					t.Errorf("%s:%d: `%s` is not a command of the Makefile's bench target", f, line, cmd)
				}
			}
		}
	}
	if seen < 5 {
		t.Errorf("only %d benchmark commands found in the docs; the README's table names one per row", seen)
	}
}

// TestAgentrewindCommandsExist builds the binary and walks its command tree (each level's --help) for
// every `agentrewind ...` and `kubectl rewind ...` command the docs show.
func TestAgentrewindCommandsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agentrewind binary")
	}
	bin := filepath.Join(t.TempDir(), "agentrewind")
	if prebuilt := os.Getenv("DOCS_TEST_AGENTREWIND"); prebuilt != "" {
		// A binary built already (of this tree): saves the build when checking the docs by hand.
		abs, err := filepath.Abs(prebuilt)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, bin); err != nil {
			t.Fatal(err)
		}
	} else {
		build := exec.Command("go", "build", "-o", bin, "../cmd/agentrewind")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the agentrewind binary: %v\n%s", err, out)
		}
	}
	// The kubectl plugin is the same binary under the name kubectl-rewind, which may show other commands.
	plugin := filepath.Join(filepath.Dir(bin), "kubectl-rewind")
	if err := os.Symlink(bin, plugin); err != nil {
		t.Fatal(err)
	}
	trees := map[string]*commandTree{
		"agentrewind": {bin: bin, children: map[string][]string{}},
		"kubectl":     {bin: plugin, children: map[string][]string{}},
	}
	seen := 0
	for _, f := range docFiles(t) {
		for _, c := range commands(readDoc(t, f)) {
			var path []string
			switch {
			case c.words[0] == "agentrewind":
				path = c.words[1:]
			case c.words[0] == "kubectl" && len(c.words) > 1 && c.words[1] == "rewind":
				path = c.words[2:]
			default:
				continue
			}
			seen++
			if err := trees[c.words[0]].check(path); err != nil {
				t.Errorf("%s:%d: `%s`: %v", f, c.line, strings.Join(c.words, " "), err)
			}
		}
	}
	if seen < 5 {
		t.Errorf("only %d agentrewind commands found in the docs; the scan is broken", seen)
	}
}

// TestCheckersCatchMistakes feeds the scanners a document with one mistake of each kind: each must be
// found, and the correct lines beside them must not be.
func TestCheckersCatchMistakes(t *testing.T) {
	doc := strings.Join([]string{
		"Run `make demo`, then `make test e2e`; make sure of it.", // prose "make sure" is not a command
		"```sh",
		"make manifests generate   # a comment: make nothing",
		"CI=true make verify-gen && bin/agentrewind inspect runs/42 -o json",
		"agentrewind checkpoint create ws/ \\",
		"  --store-dir ckpts",
		"kubectl rewind suite status nightly | tee out",
		"```",
		"```yaml",
		"command: make bogus-in-yaml",
		"```",
		"See [the API](api.md#agentsession), ![diagram](architecture.png) and [Helm](https://helm.sh/).",
		"A [self link](#a-heading) and [a broken one](missing.md). A span `agentrewind",
		"gc report` across lines, and [a link",
		"across lines](cli.md).",
		"",
		"## A heading",
	}, "\n")
	var got []string
	for _, c := range commands(doc) {
		got = append(got, fmt.Sprintf("%d:%s", c.line, strings.Join(c.words, " ")))
	}
	want := []string{"1:make demo", "1:make test e2e", "3:make manifests generate", "4:make verify-gen",
		"4:agentrewind inspect runs/42 -o json", "5:agentrewind checkpoint create ws/ --store-dir ckpts",
		"7:kubectl rewind suite status nightly", "13:agentrewind gc report"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n got %q\nwant %q", got, want)
	}
	if args := makeArgs([]string{"test", "e2e", "GOTEST_FLAGS=-v", "lint"}); strings.Join(args, " ") != "test e2e" {
		t.Errorf("makeArgs = %q, want the targets before the first variable", args)
	}
	var ls []string
	for _, l := range links(doc) {
		ls = append(ls, l.target)
	}
	if want := "api.md#agentsession architecture.png #a-heading missing.md cli.md"; strings.Join(ls, " ") != want {
		t.Errorf("links = %q, want %q", ls, want)
	}
	a := headingAnchors("# API reference\n## AgentSession: `kubectl get` columns\n## Spec\n## Spec\n```\n# not a heading\n```\n")
	for _, want := range []string{"api-reference", "agentsession-kubectl-get-columns", "spec", "spec-1"} {
		if !a[want] {
			t.Errorf("anchor %q missing from %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a comment in a code block was taken for a heading")
	}
}

type command struct {
	line  int
	words []string
}

type link struct {
	line   int
	target string
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readDoc(t *testing.T, path string) string { return string(readFile(t, path)) }

// shellFence says whether a fenced block of this info string holds shell commands.
func shellFence(info string) bool {
	switch strings.Fields(info + " x")[0] {
	case "sh", "bash", "shell", "console", "x":
		return true
	}
	return false
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// paragraph is a run of non-blank lines outside code blocks, starting at line.
type paragraph struct {
	line int
	text string
}

// prose splits a document into its paragraphs outside fenced code blocks, so a code span or a link
// broken across lines is seen whole.
func prose(doc string) []paragraph {
	var out []paragraph
	var cur []string
	start, fence := 0, ""
	flush := func() {
		if len(cur) > 0 {
			out = append(out, paragraph{start, strings.Join(cur, "\n")})
			cur = nil
		}
	}
	for i, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			flush()
			fence = trimmed[:3]
		case trimmed == "":
			flush()
		default:
			if len(cur) == 0 {
				start = i + 1
			}
			cur = append(cur, line)
		}
	}
	flush()
	return out
}

// commands finds the commands a document shows: every line of a shell code block (continuation lines
// joined, comments dropped) and every inline code span, split at && || ; | and $( into commands whose
// words follow their leading VAR=value assignments; only make, agentrewind (or a path ending in
// /agentrewind) and kubectl commands are kept.
func commands(doc string) []command {
	var out []command
	fence, pending, pendingLine := "", "", 0
	for i, line := range strings.Split(doc, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, strings.TrimPrefix(fence, "!")) {
				fence = ""
				continue
			}
			if fence[0] == '!' { // not a shell block
				continue
			}
			if pending == "" {
				pendingLine = n
			}
			if strings.HasSuffix(trimmed, `\`) {
				pending += strings.TrimSuffix(trimmed, `\`) + " "
				continue
			}
			out = append(out, split(pendingLine, pending+trimmed)...)
			pending = ""
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			f := trimmed[:3]
			if shellFence(strings.TrimSpace(trimmed[3:])) {
				fence = f
			} else {
				fence = "!" + f
			}
		}
	}
	for _, p := range prose(doc) {
		for _, m := range inlineCode.FindAllStringSubmatchIndex(p.text, -1) {
			line := p.line + strings.Count(p.text[:m[0]], "\n")
			out = append(out, split(line, strings.ReplaceAll(p.text[m[2]:m[3]], "\n", " "))...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].line < out[j].line })
	return out
}

var separators = regexp.MustCompile(`&&|\|\||;|\||\$\(|\)`)

func split(line int, text string) []command {
	if i := commentStart(text); i >= 0 {
		text = text[:i]
	}
	var out []command
	for _, part := range separators.Split(text, -1) {
		words := strings.Fields(strings.TrimSpace(part))
		for len(words) > 0 && (regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) || words[0] == "$" || words[0] == "sudo") {
			words = words[1:]
		}
		if len(words) < 2 {
			continue
		}
		switch {
		case words[0] == "make", words[0] == "kubectl":
		case words[0] == "agentrewind" || strings.HasSuffix(words[0], "/agentrewind"):
			words[0] = "agentrewind"
		default:
			continue
		}
		out = append(out, command{line, words})
	}
	return out
}

// commentStart is where a shell comment starts in s: a # at the start or after a blank.
func commentStart(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t') {
			return i
		}
	}
	return -1
}

var commandWord = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

var targetWord = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// makeArgs are the targets of a make command: its arguments up to the first that is not a plain word
// (a VAR=value, a flag).
func makeArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if !targetWord.MatchString(a) {
			break
		}
		out = append(out, a)
	}
	return out
}

var ruleLine = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_.-]*(?:\s+[A-Za-z0-9][A-Za-z0-9_.-]*)*)\s*:([^=]|$)`)

// makeTargets lists the explicit rules of a Makefile.
func makeTargets(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := ruleLine.FindStringSubmatch(sc.Text()); m != nil {
			for _, t := range strings.Fields(m[1]) {
				out[t] = true
			}
		}
	}
	return out, sc.Err()
}

var (
	mdLink  = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	htmlSrc = regexp.MustCompile(`(?:src|href)="([^"]+)"`)
)

// links finds the relative link targets of a document outside code: Markdown links and images, and
// src/href attributes of HTML; links with a scheme are left out.
func links(doc string) []link {
	var out []link
	for _, p := range prose(doc) {
		text := inlineCode.ReplaceAllStringFunc(p.text, func(code string) string {
			return strings.Repeat("\n", strings.Count(code, "\n")) // keep the line count
		})
		var found [][]int
		found = append(found, mdLink.FindAllStringSubmatchIndex(text, -1)...)
		found = append(found, htmlSrc.FindAllStringSubmatchIndex(text, -1)...)
		sort.Slice(found, func(i, j int) bool { return found[i][0] < found[j][0] })
		for _, m := range found {
			tg := text[m[2]:m[3]]
			if hasScheme.MatchString(tg) {
				continue
			}
			out = append(out, link{p.line + strings.Count(text[:m[0]], "\n"), tg})
		}
	}
	return out
}

var hasScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)

// headingAnchors are the anchors GitHub gives a document's headings: lower case, spaces to hyphens,
// punctuation dropped, a repeated one suffixed -1, -2 ...
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '·' && r != '–' && r != '—':
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := count[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}

// commandTree resolves command paths against the binary's own help, one level at a time.
type commandTree struct {
	bin      string
	children map[string][]string // command path -> its subcommands
}

func (c *commandTree) subcommands(path []string) ([]string, error) {
	key := strings.Join(path, " ")
	if s, ok := c.children[key]; ok {
		return s, nil
	}
	out, err := exec.Command(c.bin, append(append([]string{}, path...), "--help")...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s %s --help: %v\n%s", filepath.Base(c.bin), key, err, out)
	}
	var subs []string
	in := false
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "Available Commands:"):
			in = true
		case in && strings.HasPrefix(l, "  "):
			subs = append(subs, strings.Fields(l)[0])
		case in:
			in = false
		}
	}
	sort.Strings(subs)
	c.children[key] = subs
	return subs, nil
}

// check walks path down the tree: each word must be a subcommand as long as the command it follows
// has subcommands; the words after a command without any, or from the first word that cannot name a
// command on (a flag, a path, a <placeholder>), are its arguments.
func (c *commandTree) check(path []string) error {
	for i, w := range path {
		if !commandWord.MatchString(w) {
			return nil // a flag, a path, a <placeholder>: the command's arguments start here
		}
		subs, err := c.subcommands(path[:i])
		if err != nil {
			return err
		}
		if len(subs) == 0 {
			return nil
		}
		if !contains(subs, w) {
			return fmt.Errorf("%s has no subcommand %q (it has %s)", strings.Join(append([]string{filepath.Base(c.bin)}, path[:i]...), " "), w, strings.Join(subs, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
