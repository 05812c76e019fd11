package checkpoint

import (
	"strings"
	"unicode/utf8"
)

// Excludes is a compiled list of exclusion globs (seed D14):
//   - `*` matches any run of characters within a segment, `?` one character, and a whole `**` segment
//     any number of segments (zero included);
//   - a pattern without `/` matches a segment name at any depth ("node_modules", "*.log");
//   - a pattern with `/` matches the path from the workspace root ("src/gen", "docs/**/*.tmp"),
//     a leading `/` only anchors it;
//   - a trailing `/` restricts a pattern to directories, and a directory that matches excludes its
//     whole subtree (gitignore semantics);
//   - backslashes are read as `/`; empty patterns match nothing.
//
// Matching is segment-wise with single-star backtracking at both levels, so its cost is bounded by
// the product of the pattern and path lengths: no input can make it blow up.
type Excludes struct {
	patterns []globPattern
	raw      []string
}

type globPattern struct {
	segs    []string
	dirOnly bool
}

// CompileExcludes compiles patterns; it never fails.
func CompileExcludes(patterns []string) Excludes {
	ex := Excludes{raw: append([]string(nil), patterns...)}
	for _, p := range patterns {
		p = strings.ReplaceAll(p, "\\", "/")
		var g globPattern
		if strings.HasSuffix(p, "/") {
			g.dirOnly = true
			p = strings.TrimRight(p, "/")
		}
		anchored := strings.Contains(p, "/")
		p = strings.TrimLeft(p, "/")
		if p == "" {
			continue
		}
		var segs []string
		for _, s := range strings.Split(p, "/") {
			if s == "" || (s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**") {
				continue // "a//b" is "a/b"; "**/**" is "**"
			}
			segs = append(segs, s)
		}
		if !anchored && segs[0] != "**" {
			segs = append([]string{"**"}, segs...)
		}
		g.segs = segs
		ex.patterns = append(ex.patterns, g)
	}
	return ex
}

// Patterns are the patterns as given.
func (e Excludes) Patterns() []string { return e.raw }

// Match reports whether the slash-separated relative path rel (a directory when isDir) matches a
// pattern itself, without looking at its ancestors. A walker that skips matched directories uses it.
func (e Excludes) Match(rel string, isDir bool) bool {
	var budget int
	return e.match(strings.Split(rel, "/"), isDir, &budget)
}

// Excluded reports whether rel or any directory above it matches a pattern.
func (e Excludes) Excluded(rel string, isDir bool) bool {
	segs := strings.Split(rel, "/")
	var budget int
	for i := 1; i <= len(segs); i++ {
		if e.match(segs[:i], i < len(segs) || isDir, &budget) {
			return true
		}
	}
	return false
}

func (e Excludes) match(segs []string, isDir bool, steps *int) bool {
	for _, p := range e.patterns {
		if p.dirOnly && !isDir {
			continue
		}
		if matchSegments(p.segs, segs, steps) {
			return true
		}
	}
	return false
}

// matchSegments matches path segments against pattern segments, where "**" stands for any number of
// segments and every other pattern segment matches exactly one path segment. Greedy matching with a
// single backtrack point is exact for this shape and costs at most len(pat)*len(segs) segment matches.
func matchSegments(pat, segs []string, steps *int) bool {
	p, s := 0, 0
	starP, starS := -1, 0
	for s < len(segs) {
		*steps++
		switch {
		case p < len(pat) && pat[p] == "**":
			starP, starS = p, s
			p++
		case p < len(pat) && matchSegment(pat[p], segs[s], steps):
			p++
			s++
		case starP >= 0:
			starS++
			p, s = starP+1, starS
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == "**" {
		p++
	}
	return p == len(pat)
}

// matchSegment matches one segment against a pattern of literal characters, `*` and `?`, by the same
// single-backtrack-point method, in at most len(pat)*len(name) steps.
func matchSegment(pat, name string, steps *int) bool {
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		*steps++
		_, w := utf8.DecodeRuneInString(name[n:])
		switch {
		case p < len(pat) && pat[p] == '*':
			starP, starN = p, n
			p++
		case p < len(pat) && pat[p] == '?':
			p++
			n += w
		case p < len(pat) && strings.HasPrefix(pat[p:], name[n:n+w]):
			p += w
			n += w
		case starP >= 0:
			_, sw := utf8.DecodeRuneInString(name[starN:])
			starN += sw
			p, n = starP+1, starN
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}
