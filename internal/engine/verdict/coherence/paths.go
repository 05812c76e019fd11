package coherence

import (
	"regexp"
	"slices"
	"strings"
)

// NormPath makes `src\x.go`, `./src/x.go` and `src//x.go` one path. Case is left alone: folding it
// would merge two paths, and a merge is the direction that manufactures false attributions.
func NormPath(p string) string {
	p = strings.ReplaceAll(p, `\`, "/")
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	return strings.TrimRight(p, "/")
}

func basename(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// primaryStem is the name before the first dot, not the last: store.test.go and store.go both stem to
// "store". Splitting on the last dot would leave "store.test", which matches nothing, and every test
// file written beside planned work would count as unplanned.
func primaryStem(p string) string {
	b := basename(p)
	if i := strings.Index(b, "."); i > 0 {
		return b[:i]
	}
	return b
}

// pathToken finds path-shaped tokens in prose. It is deliberately loose ("node.js" in a sentence counts
// as a path): it feeds attribution, where failing open costs nothing and failing shut invents drift.
// A bare name may have several dots: store.test.go is that file, not "store.test".
var pathToken = regexp.MustCompile(`[A-Za-z0-9_.-]+(?:[/\\][A-Za-z0-9_.-]+)+|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.[A-Za-z][A-Za-z0-9]{0,7}`)

var trailingPunct = regexp.MustCompile("[.,;:)\"'`]+$")

// minStem is where a name starts identifying something: two characters ("db", "js") are noise.
const minStem = 3

// Targets is everything a step names that can be matched against a real path.
type Targets struct {
	Paths     []string
	Basenames []string
	Stems     map[string]bool
	Words     map[string]bool
}

// StepTargets extracts the paths, basenames, stems and significant words a step's text names.
func StepTargets(text string) Targets {
	t := Targets{Stems: map[string]bool{}, Words: significantWords(text)}
	for _, raw := range pathToken.FindAllString(text, -1) {
		p := NormPath(trailingPunct.ReplaceAllString(raw, ""))
		if p == "" {
			continue
		}
		if !slices.Contains(t.Paths, p) {
			t.Paths = append(t.Paths, p)
		}
		if b := basename(p); b != "" && !slices.Contains(t.Basenames, b) {
			t.Basenames = append(t.Basenames, b)
		}
		if st := strings.ToLower(primaryStem(p)); len(st) >= minStem {
			t.Stems[st] = true
		}
	}
	return t
}

// Strength is how a path was attributed to a step.
type Strength string

const (
	StrengthExact    Strength = "exact"
	StrengthBasename Strength = "basename"
	StrengthStem     Strength = "stem"
	StrengthSegment  Strength = "segment"
)

// Strengths lists the attribution strengths strongest first; the order is the contract.
var Strengths = []Strength{StrengthExact, StrengthBasename, StrengthStem, StrengthSegment}

func (t Targets) matches(path string, s Strength) bool {
	switch s {
	case StrengthExact:
		return slices.ContainsFunc(t.Paths, func(p string) bool {
			return p == path || strings.HasSuffix(path, "/"+p) || strings.HasSuffix(p, "/"+path)
		})
	case StrengthBasename:
		return slices.Contains(t.Basenames, basename(path))
	case StrengthStem:
		st := strings.ToLower(primaryStem(path))
		return len(st) >= minStem && (t.Words[st] || t.Stems[st])
	case StrengthSegment:
		segs := strings.Split(path, "/")
		return slices.ContainsFunc(segs[:len(segs)-1], func(seg string) bool {
			seg = strings.ToLower(seg)
			return len(seg) >= minStem && !genericSegments[seg] && t.Words[seg]
		})
	}
	return false
}

// Attribution is the step a path belongs to and how strongly.
type Attribution struct {
	StepID   string   `json:"step"`
	Strength Strength `json:"strength"`
}

// Attribute finds the step a changed path belongs to, trying every step at one strength before any
// step at the next. Strength-ordered, not plan-ordered: lib/store.go belongs to "write lib/store.go"
// even when an earlier step says "add store tests".
func Attribute(path string, steps []Step) (Attribution, bool) {
	p := NormPath(path)
	if p == "" {
		return Attribution{}, false
	}
	targets := make([]Targets, len(steps))
	for i, s := range steps {
		targets[i] = StepTargets(s.Text)
	}
	for _, strength := range Strengths {
		for i, s := range steps {
			if s.ID != "" && targets[i].matches(p, strength) {
				return Attribution{StepID: s.ID, Strength: strength}, true
			}
		}
	}
	return Attribution{}, false
}
