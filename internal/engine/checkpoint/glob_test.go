package checkpoint

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestExcludesFollowTheSeedSemantics(t *testing.T) {
	cases := []struct {
		name     string
		patterns []string
		path     string
		isDir    bool
		want     bool
	}{
		{"a bare name matches a segment at the root", []string{"node_modules"}, "node_modules", true, true},
		{"a bare name matches a segment at any depth", []string{"node_modules"}, "web/app/node_modules", true, true},
		{"a bare name matches a file anywhere", []string{"node_modules"}, "a/node_modules", false, true},
		{"a bare name is a whole segment, not a substring", []string{"node_modules"}, "my_node_modules", true, false},
		{"a directory hit excludes its subtree", []string{"node_modules"}, "web/node_modules/react/index.js", false, true},
		{"* stays within a segment", []string{"*.log"}, "logs/today.log", false, true},
		{"* does not cross a slash in an anchored pattern", []string{"src/*.go"}, "src/pkg/main.go", false, false},
		{"* in an anchored pattern", []string{"src/*.go"}, "src/main.go", false, true},
		{"? is exactly one character", []string{"file?.txt"}, "file1.txt", false, true},
		{"? is not zero characters", []string{"file?.txt"}, "file.txt", false, false},
		{"? is one character, not one byte", []string{"caf?"}, "café", false, true},
		{"** matches zero segments", []string{"docs/**/*.tmp"}, "docs/a.tmp", false, true},
		{"** matches many segments", []string{"docs/**/*.tmp"}, "docs/x/y/z/a.tmp", false, true},
		{"** is anchored by the rest of the pattern", []string{"docs/**/*.tmp"}, "src/docs/a.tmp", false, false},
		{"a leading **/ matches at any depth", []string{"**/build"}, "a/b/build", true, true},
		{"a trailing /** matches everything below", []string{"out/**"}, "out/x/y", false, true},
		{"a path pattern is relative to the root", []string{"src/gen"}, "src/gen/x.go", false, true},
		{"a path pattern does not float", []string{"src/gen"}, "lib/src/gen/x.go", false, false},
		{"a leading slash anchors", []string{"/build"}, "sub/build", true, false},
		{"a leading slash still matches at the root", []string{"/build"}, "build/x", false, true},
		{"a trailing slash matches directories only", []string{"cache/"}, "cache", false, false},
		{"a trailing slash matches a directory", []string{"cache/"}, "a/cache", true, true},
		{"a trailing slash covers files in that directory", []string{"cache/"}, "a/cache/f", false, true},
		{"a backslash is not a slash", []string{`src\gen`}, "src/gen/x", false, false},
		{"a backslash escapes an ordinary character", []string{`src\gen`}, "srcgen", false, true},
		{"an escaped star is a star", []string{`\*.log`}, "*.log", false, true},
		{"an escaped star matches nothing else", []string{`\*.log`}, "a.log", false, false},
		{"an escaped question mark is one", []string{`why\?`}, "whyx", false, false},
		{"an escaped question mark matches itself", []string{`why\?`}, "why?", false, true},
		{"an escaped backslash matches a backslash in a name", []string{`a\\b`}, `x/a\b`, false, true},
		{"an escaped backslash is not a separator", []string{`a\\b`}, "a/b", false, false},
		{"an escaped hash is a hash", []string{`\#notes`}, "#notes", false, true},
		{"an escaped slash is a slash", []string{`src\/gen`}, "src/gen/x", false, true},
		{"an escaped slash anchors", []string{`src\/gen`}, "lib/src/gen", false, false},
		{"escaped stars are not a globstar", []string{`a/\*\*/b`}, "a/x/b", false, false},
		{"escaped stars match two stars", []string{`a/\*\*/b`}, "a/**/b", false, true},
		{"a trailing lone backslash matches nothing", []string{`build\`}, "build", true, false},
		{"an escape before a multibyte character", []string{`caf\é`}, "café", false, true},
		{"several trailing slashes are one", []string{"cache//"}, "a/cache", true, true},
		{"a star then an escaped star", []string{`*\*`}, "ab*", false, true},
		{"a star then an escaped star needs the star", []string{`*\*`}, "abc", false, false},
		{"an empty pattern matches nothing", []string{""}, "anything", false, false},
		{"a lone slash matches nothing", []string{"/"}, "anything", false, false},
		{"no patterns match nothing", nil, "a/b", false, false},
		{"any of several patterns", []string{"*.o", ".git"}, "x/.git/HEAD", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CompileExcludes(tc.patterns).Excluded(tc.path, tc.isDir); got != tc.want {
				t.Errorf("Excluded(%q, dir=%v) under %q = %v, want %v", tc.path, tc.isDir, tc.patterns, got, tc.want)
			}
		})
	}
}

// oracle translates one compiled pattern to an RE2 regexp (linear time by construction) matching
// the path with a trailing slash: a reference the hand-written matcher must agree with.
func oracle(segs []string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, s := range segs {
		if s == "**" {
			b.WriteString("(?:[^/]+/)*")
			continue
		}
		escaped := false
		for _, r := range s {
			switch {
			case escaped:
				b.WriteString(regexp.QuoteMeta(string(r)))
				escaped = false
			case r == '\\':
				escaped = true
			case r == '*':
				b.WriteString("[^/]*")
			case r == '?':
				b.WriteString("[^/]")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		b.WriteString("/")
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func FuzzMatch(f *testing.F) {
	f.Add("node_modules", "a/node_modules/b")
	f.Add("docs/**/*.tmp", "docs/x/y/a.tmp")
	f.Add("*a*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 400))
	f.Add(strings.Repeat("**/a/", 30)+"b", strings.Repeat("a/", 200)+"c")
	f.Add("?*?*?*?*?*?*x", strings.Repeat("é", 300))
	f.Add("a/**/b/**/c/**/d", strings.Repeat("b/c/", 100)+"e")
	f.Add(`\*\?\\x`, `*?\x`)
	f.Add(`*\**\**\*`, strings.Repeat("*", 300)+"a")
	f.Add(`a\/b/\*\*/c`, "a/b/**/c")
	f.Add(`caf\é\`, "café")
	f.Add(`\`, `\`)
	f.Add(`**/\**/x\`, `a/*b/x`)
	f.Fuzz(func(t *testing.T, pattern, p string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(p) || len(pattern) > 2000 || len(p) > 4000 {
			return
		}
		var segs []string
		for _, s := range strings.Split(p, "/") {
			if s != "" {
				segs = append(segs, s)
			}
		}
		if len(segs) == 0 {
			return
		}
		ex := CompileExcludes([]string{pattern})
		for _, g := range ex.patterns {
			steps := 0
			got := matchSegments(g.segs, segs, &steps)
			// The bound that makes matching safe: at most (pattern bytes+1)*(path bytes+1) steps per
			// segment pairing, and at most pattern*path segment pairings.
			if bound := (len(pattern) + 2) * (len(p) + 2) * (len(g.segs) + 1); steps > bound {
				t.Fatalf("%d steps matching %q against %q exceeds the bound %d", steps, pattern, p, bound)
			}
			if want := oracle(g.segs).MatchString(strings.Join(segs, "/") + "/"); got != want {
				t.Fatalf("match(%q, %q) = %v, the reference says %v", g.segs, segs, got, want)
			}
		}
	})
}
