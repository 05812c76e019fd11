package argocd

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// wrongValues are what a field of an object may hold instead of what the CRD says: nothing, every
// other JSON type, a number past 2^53, and text that is not UTF-8 or looks like Lua.
var wrongValues = []any{
	nil, "x", "", "\xff\xfe]]..error('boom')--%s", int64(-1), 1e300, true,
	map[string]any{}, map[string]any{"type": "Ready"}, []any{}, []any{"Ready", 1.0, nil},
}

// paths lists the path of every value inside v (v's own path is prefix).
func paths(v any, prefix []any) [][]any {
	out := [][]any{prefix}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			out = append(out, paths(e, append(slices.Clone(prefix), k))...)
		}
	case []any:
		for i, e := range v {
			out = append(out, paths(e, append(slices.Clone(prefix), i))...)
		}
	}
	return out
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// withValue is a copy of obj with the value at path replaced by value (removed when value is nil).
func withValue(obj map[string]any, path []any, value any) map[string]any {
	root := deepCopy(obj).(map[string]any)
	var parent any = root
	for i, step := range path {
		last := i == len(path)-1
		switch p := parent.(type) {
		case map[string]any:
			k := step.(string)
			if last {
				if value == nil {
					delete(p, k)
				} else {
					p[k] = value
				}
			}
			parent = p[k]
		case []any:
			if last {
				p[step.(int)] = value
			}
			parent = p[step.(int)]
		}
	}
	return root
}

// TestTheChecksAnswerMalformedObjects: whatever an object holds, every check returns a health Argo CD
// knows, never a Lua error (which Argo CD shows as an error, not a health). Each fixture the
// controllers wrote is taken apart: every value in it, the object's own sections included, is
// replaced in turn by nothing, by each other JSON type, by a number past 2^53 and by text that is not
// UTF-8 or looks like Lua.
func TestTheChecksAnswerMalformedObjects(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			script, err := Script(kind)
			if err != nil {
				t.Fatal(err)
			}
			var tests HealthTests
			readYAML(t, filepath.Join(Dir(kind), "health_test.yaml"), &tests)
			failures := 0
			for _, tc := range tests.Tests {
				var obj map[string]any
				readYAML(t, filepath.Join(Dir(kind), tc.InputPath), &obj)
				for _, path := range paths(obj, nil)[1:] {
					if path[0] == "spec" {
						continue // no check reads the spec
					}
					for _, v := range wrongValues {
						if _, err := Evaluate(script, withValue(obj, path, v)); err != nil && failures < 10 {
							failures++
							t.Errorf("%s with %v = %#v: %v", tc.InputPath, path, v, strings.SplitN(err.Error(), "\n", 2)[0])
						}
					}
				}
			}
			for i, obj := range []map[string]any{{}, {"status": map[string]any{}}, {"metadata": nil, "status": nil}} {
				if _, err := Evaluate(script, obj); err != nil {
					t.Errorf("object %d %v: %v", i, obj, err)
				}
			}
		})
	}
}

// TestTheChecksReadMalformedFieldsAsAbsent pins what a malformed status means: a field of the wrong
// type is read as absent, a generation written as a string as the number it spells, and a condition
// without a reason is named by its type.
func TestTheChecksReadMalformedFieldsAsAbsent(t *testing.T) {
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Verified", "message": "ok"}
	many := make([]any, 0, 10001)
	for i := range 10000 {
		many = append(many, map[string]any{"type": fmt.Sprint("Other", i), "status": "True", "reason": "R", "message": "m"})
	}
	many = append(many, ready)
	cases := []struct {
		name string
		obj  map[string]any
		want Health
	}{
		{"no metadata", map[string]any{"status": map[string]any{"conditions": []any{ready}}}, Health{"Healthy", "Verified: ok"}},
		{"conditions not a list", map[string]any{"status": map[string]any{"conditions": "Ready"}},
			Health{"Progressing", "Waiting for the operator to report status"}},
		{"conditions that are not objects", map[string]any{"status": map[string]any{"conditions": []any{"Ready", 1.0, ready}}},
			Health{"Healthy", "Verified: ok"}},
		{"generations written as strings compare as numbers", map[string]any{"metadata": map[string]any{"generation": "10"},
			"status": map[string]any{"observedGeneration": "9", "conditions": []any{ready}}},
			Health{"Progressing", "Generation 10 is not observed yet (status is of generation 9)"}},
		{"a generation that is no number is absent", map[string]any{"metadata": map[string]any{"generation": true},
			"status": map[string]any{"observedGeneration": map[string]any{}, "conditions": []any{ready}}}, Health{"Healthy", "Verified: ok"}},
		{"an observedGeneration past 2^53", map[string]any{"metadata": map[string]any{"generation": int64(2)},
			"status": map[string]any{"observedGeneration": 1e300, "conditions": []any{ready}}}, Health{"Healthy", "Verified: ok"}},
		{"a condition without a reason is named by its type", map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Stalled", "status": "True", "message": "broken"}}}}, Health{"Degraded", "Stalled: broken"}},
		{"a reason and message of the wrong type", map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Stalled", "status": "True", "reason": map[string]any{}, "message": []any{"x"}}}}}, Health{"Degraded", "Stalled"}},
		{"10,000 conditions before Ready", map[string]any{"status": map[string]any{"conditions": many}}, Health{"Healthy", "Verified: ok"}},
		{"text that is not UTF-8 or looks like Lua is passed on as it is", map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Stalled", "status": "True", "reason": "R", "message": "\xff]]..error('x')--"}}}}, Health{"Degraded", "R: \xff]]..error('x')--"}},
	}
	for _, kind := range Kinds {
		script, err := Script(kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				want := tc.want
				if kind == "ResumePlan" && want.Status == "Healthy" {
					want.Status = "Progressing" // Ready without a verdict
				}
				got, err := Evaluate(script, tc.obj)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
			})
		}
	}
}

// TestTheResumePlanCheckReadsAMalformedVerdictAsAbsent: the verdict, reason and message of a
// ResumePlan of the wrong type do not break the check.
func TestTheResumePlanCheckReadsAMalformedVerdictAsAbsent(t *testing.T) {
	script, err := Script("ResumePlan")
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Judged"}
	for _, tc := range []struct {
		status map[string]any
		want   Health
	}{
		{map[string]any{"verdict": map[string]any{}, "conditions": []any{ready}}, Health{"Progressing", "Judged"}},
		{map[string]any{"verdict": "Resumable", "reason": []any{}, "message": true, "conditions": []any{ready}}, Health{"Suspended", "Resumable: true"}},
		{map[string]any{"verdict": "", "conditions": []any{ready}}, Health{"Progressing", "Judged"}},
	} {
		got, err := Evaluate(script, map[string]any{"status": tc.status})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%v (-want +got):\n%s", tc.status, d)
		}
	}
}
