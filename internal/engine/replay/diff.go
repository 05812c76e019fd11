package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// maxDiffLines bounds a drift explanation: enough to see the change, short enough for a status field.
const maxDiffLines = 8

// diffJSON lists the paths where two JSON documents differ, as "path: old → new" lines, at most
// maxDiffLines of them. It is for people reading a drift report, not for matching.
func diffJSON(recorded, actual []byte) []string {
	var a, b any
	if json.Unmarshal(recorded, &a) != nil || json.Unmarshal(actual, &b) != nil {
		return nil
	}
	var out []string
	walkDiff("", a, b, &out)
	if len(out) > maxDiffLines {
		out = append(out[:maxDiffLines], fmt.Sprintf("… and %d more differences", len(out)-maxDiffLines))
	}
	return out
}

func walkDiff(path string, a, b any, out *[]string) {
	if len(*out) > maxDiffLines {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			x, inA := av[k]
			y, inB := bv[k]
			p := joinPath(path, k)
			switch {
			case !inA:
				*out = append(*out, fmt.Sprintf("%s: added %s", p, brief(y)))
			case !inB:
				*out = append(*out, fmt.Sprintf("%s: removed (was %s)", p, brief(x)))
			default:
				walkDiff(p, x, y, out)
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		n := min(len(av), len(bv))
		for i := 0; i < n; i++ {
			walkDiff(path+"["+strconv.Itoa(i)+"]", av[i], bv[i], out)
		}
		for i := n; i < len(bv); i++ {
			*out = append(*out, fmt.Sprintf("%s[%d]: added %s", path, i, brief(bv[i])))
		}
		for i := n; i < len(av); i++ {
			*out = append(*out, fmt.Sprintf("%s[%d]: removed (was %s)", path, i, brief(av[i])))
		}
		return
	}
	if !jsonEqual(a, b) {
		p := path
		if p == "" {
			p = "(whole value)"
		}
		x, y := briefPair(a, b)
		*out = append(*out, fmt.Sprintf("%s: %s → %s", p, x, y))
	}
}

// briefPair renders two differing values. Two long strings that share a beginning are shown from a
// little before the first difference, so the change is visible rather than cut off.
func briefPair(a, b any) (string, string) {
	x, okA := a.(string)
	y, okB := b.(string)
	if !okA || !okB {
		return brief(a), brief(b)
	}
	rx, ry := []rune(x), []rune(y)
	common := 0
	for common < len(rx) && common < len(ry) && rx[common] == ry[common] {
		common++
	}
	const context = 12
	if common <= context || (len(rx) <= 57 && len(ry) <= 57) {
		return brief(a), brief(b)
	}
	from := common - context
	return "…" + brief(string(rx[from:])), "…" + brief(string(ry[from:]))
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// brief renders a value in at most 60 characters.
func brief(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if r := []rune(s); len(r) > 60 {
		s = string(r[:57]) + "..."
	}
	return s
}
