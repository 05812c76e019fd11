package replay

import (
	"encoding/json"
	"testing"
)

func TestJSONPatchFollowsRFC6902(t *testing.T) {
	doc := `{"n":1,"obj":{"a":1,"b":[1,2]},"list":[10,20,30]}`
	cases := []struct {
		name string
		op   PatchOperation
		want string // result, or "" when the operation must fail
	}{
		{"test compares numbers by value", PatchOperation{Op: "test", Path: "/n", Value: json.RawMessage("1.0")}, doc},
		{"test ignores member order", PatchOperation{Op: "test", Path: "/obj", Value: json.RawMessage(`{"b":[1,2],"a":1e0}`)}, doc},
		{"test fails on a different value", PatchOperation{Op: "test", Path: "/n", Value: json.RawMessage("2")}, ""},
		{"remove ignores a value member", PatchOperation{Op: "remove", Path: "/n", Value: json.RawMessage("1")}, `{"list":[10,20,30],"obj":{"a":1,"b":[1,2]}}`},
		{"add inserts into an array", PatchOperation{Op: "add", Path: "/list/1", Value: json.RawMessage("15")}, `{"list":[10,15,20,30],"n":1,"obj":{"a":1,"b":[1,2]}}`},
		{"add appends with -", PatchOperation{Op: "add", Path: "/list/-", Value: json.RawMessage("40")}, `{"list":[10,20,30,40],"n":1,"obj":{"a":1,"b":[1,2]}}`},
		{"an index with a leading zero is refused", PatchOperation{Op: "replace", Path: "/list/01", Value: json.RawMessage("0")}, ""},
		{"a signed index is refused", PatchOperation{Op: "replace", Path: "/list/+1", Value: json.RawMessage("0")}, ""},
		{"replace of a missing member fails", PatchOperation{Op: "replace", Path: "/nope", Value: json.RawMessage("0")}, ""},
		{"escaped pointer tokens", PatchOperation{Op: "add", Path: "/a~1b~0c", Value: json.RawMessage("true")}, `{"a/b~c":true,"list":[10,20,30],"n":1,"obj":{"a":1,"b":[1,2]}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := applyPatch([]byte(doc), tc.op)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("applied: %s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal([]byte(tc.want), &w)
			if !jsonEqual(g, w) {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
