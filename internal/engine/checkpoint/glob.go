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
//   - a backslash escapes the next character, as in gitignore: `\*` is a star, `\?` a question mark,
//     `\\` a backslash (a Linux name may hold one), `\#` a hash; `\/` is a `/`. A pattern ending in a
//     lone backslash, like an empty one, matches nothing.
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
		raw, ok := splitPattern(p)
		if !ok {
			continue
		}
		var g globPattern
		for len(raw) > 1 && raw[len(raw)-1] == "" { // trailing slashes
			g.dirOnly = true
			raw = raw[:len(raw)-1]
		}
		anchored := len(raw) > 1 // a slash before the end
		var segs []string
		for _, s := range raw {
			if s == "" || (s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**") {
				continue // "a//b" is "a/b"; "**/**" is "**"
			}
			segs = append(segs, s)
		}
		if len(segs) == 0 {
			continue
		}
		if !anchored && segs[0] != "**" {
			segs = append([]string{"**"}, segs...)
		}
		g.segs = segs
		ex.patterns = append(ex.patterns, g)
	}
	return ex
}

// splitPattern cuts a pattern at every `/` that no backslash escapes; an escaped `/` cuts too (a name
// cannot hold one). Other escapes stay in their segment, for matchSegment. ok is false for a pattern
// ending in a lone backslash, which gitignore declares invalid.
func splitPattern(p string) (segs []string, ok bool) {
	var cur strings.Builder
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '\\' && i+1 == len(p):
			return nil, false
		case p[i] == '\\' && p[i+1] == '/', p[i] == '/':
			if p[i] == '\\' {
				i++
			}
			segs = append(segs, cur.String())
			cur.Reset()
		case p[i] == '\\':
			_, w := utf8.DecodeRuneInString(p[i+1:])
			cur.WriteString(p[i : i+1+w])
			i += w
		default:
			cur.WriteByte(p[i])
		}
	}
	return append(segs, cur.String()), true
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
		// An escaped character is a literal: it takes the backslash and the character.
		lit, lw := p, 0
		if p < len(pat) && pat[p] == '\\' && p+1 < len(pat) {
			lit, lw = p+1, 1
		}
		switch {
		case lw == 0 && p < len(pat) && pat[p] == '*':
			starP, starN = p, n
			p++
		case lw == 0 && p < len(pat) && pat[p] == '?':
			p++
			n += w
		case p < len(pat) && strings.HasPrefix(pat[lit:], name[n:n+w]):
			p += lw + w
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
