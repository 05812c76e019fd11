package redact

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxEscapeDepth bounds how many levels of JSON nested in JSON strings are unescaped to look for
// secrets (a tool result holding a JSON body holding a JSON body…).
const maxEscapeDepth = 4

// redactText redacts one string value (after prefix, as context, when prefix is not empty). A string
// holding JSON escapes is also read unescaped (\u0073k-… is sk-…): when a secret can only be read
// that way, the whole string is replaced by its own token, which the vault restores exactly, and the
// secrets found in it are learned (not counted) so that they are redacted wherever they appear bare.
func (r *Redactor) redactText(prefix, v string, found *[]finding) string {
	local := (*found)[:len(*found):len(*found)] // the caller's findings stay visible as minted tokens
	out := v
	if prefix != "" {
		out = r.redactInContext(prefix, out, &local)
	}
	out = r.redact(out, 0, &local)
	if name := r.hiddenByEscapes(prefix, out, &local); name != "" {
		for i := len(*found); i < len(local); i++ {
			local[i].silent = true
		}
		out = Token(v)
		local = append(local, finding{pattern: name, token: out, secret: v, whole: true})
	}
	*found = local
	return out
}

// hiddenByEscapes reports the name of a pattern that matches one of the unescaped views of the
// redacted text red but did not match red itself ("" if none), appending what it found there to found.
func (r *Redactor) hiddenByEscapes(prefix, red string, found *[]finding) string {
	name := ""
	for _, view := range escapedViews(red, maxEscapeDepth) {
		before := len(*found)
		if prefix != "" {
			r.redactInContext(prefix, view, found)
		}
		r.redact(view, 0, found)
		if len(*found) > before && name == "" {
			name = (*found)[before].pattern
		}
	}
	return name
}

// escapedViews returns the successive JSON-unescaped forms of s while it holds a backslash, up to
// depth levels.
func escapedViews(s string, depth int) []string {
	var views []string
	for range depth {
		if strings.IndexByte(s, '\\') < 0 {
			break
		}
		u := unescapeJSON(s)
		if u == s {
			break
		}
		views = append(views, u)
		s = u
	}
	return views
}

// unescapeJSON decodes the JSON string escapes in s leniently, as text to search rather than a value
// to keep: s need not be a whole or valid JSON string (a tool call's partial JSON may stop anywhere),
// an escape it cannot decode is kept as it is, and an unpaired surrogate becomes U+FFFD.
func unescapeJSON(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
			i += 2
		case 'b', 'f', 'n', 'r', 't':
			b.WriteByte(map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[e])
			i += 2
		case 'u':
			r := hex4([]byte(s[i+2 : min(i+6, len(s))]))
			if r < 0 {
				b.WriteByte(c)
				i++
				continue
			}
			i += 6
			if utf16.IsSurrogate(r) && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if r2 := hex4([]byte(s[i+2 : i+6])); r2 >= 0 {
					if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r) // a lone surrogate is written as U+FFFD
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}
