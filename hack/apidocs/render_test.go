package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

const crdDir = "../../config/crd/bases"

func TestAddedFieldAppearsWithItsValidation(t *testing.T) {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	want := "| `tuning.level` | string | yes | `\"Low\"` | one of `Low`, `High`<br>length 1–8<br>" +
		"level must not change (`self == oldSelf \\|\\| oldSelf == 'Low'`) | how hard to try: a \\| b &lt;c&gt; `x\\|y<z` |"
	before, err := Render(crds)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(before), "tuning.level") {
		t.Fatal("the real CRDs already have spec.tuning.level; pick another name for the test field")
	}

	one, eight := int64(1), int64(8)
	forkRunSpecFields(t, crds)["tuning"] = apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: "tuning of the run.", Required: []string{"level"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"level": {
			Type: "string", Description: "how hard to try:\na | b <c> `x|y<z`",
			Enum:      []apiextensionsv1.JSON{{Raw: []byte(`"Low"`)}, {Raw: []byte(`"High"`)}},
			Default:   &apiextensionsv1.JSON{Raw: []byte(`"Low"`)},
			MinLength: &one, MaxLength: &eight,
			XValidations: apiextensionsv1.ValidationRules{{Rule: "self == oldSelf || oldSelf == 'Low'", Message: "level must not change"}},
		}},
	}
	after, err := Render(crds)
	if err != nil {
		t.Fatal(err)
	}
	section := kindSection(t, string(after), "ForkRun")
	if !strings.Contains(section, "\n"+want+"\n") {
		t.Errorf("the added field's row is missing from the ForkRun section; want\n%s\nin\n%s", want, grepLines(section, "tuning"))
	}
	if !strings.Contains(section, "| `tuning` | object | no |  |  | tuning of the run. |") {
		t.Errorf("the added object's row is missing:\n%s", grepLines(section, "tuning"))
	}
	if strings.Contains(kindSection(t, string(after), "AgentSession"), "tuning") {
		t.Error("a field added to ForkRun appears in AgentSession's section")
	}
}

func TestEveryRowHasSixCells(t *testing.T) {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	forkRunSpecFields(t, crds)["piped"] = apiextensionsv1.JSONSchemaProps{
		Type: "string", Description: "a | b || c, `d | e`, <br> and *not emphasis*",
		Pattern: "^(a|b)$",
	}
	doc, err := Render(crds)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		// GitHub splits a row on every | not escaped by a backslash, code spans included.
		cells := len(strings.Split(strings.ReplaceAll(line, `\|`, ""), "|")) - 2
		if want := 6; strings.Contains(line, "| always |") || strings.Contains(line, "| `-o wide` |") {
			want = 5
			if cells != want {
				t.Errorf("printer column row has %d cells, want %d: %s", cells, want, line)
			}
		} else if cells != want {
			t.Errorf("field row has %d cells, want %d: %s", cells, want, line)
		}
	}
	if rows < 100 {
		t.Errorf("only %d rows rendered from the real CRDs; the walk is broken", rows)
	}
	if !strings.Contains(string(doc), "| `piped` | string | no |  | pattern `^(a\\|b)$` | a \\| b \\|\\| c, `d \\| e`, &lt;br&gt; and \\*not emphasis\\* |") {
		t.Errorf("the escaped row is wrong:\n%s", grepLines(string(doc), "piped"))
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		name, in, cell, prose string
	}{
		{"lines of a paragraph are joined", "one\ntwo", "one two", "one two"},
		{"paragraphs stay apart", "one\n\ntwo", "one<br><br>two", "one\n\ntwo"},
		{"list items stay apart", "items:\n- a\n- b", "items:<br>- a<br>- b", "items:\n- a\n- b"},
		{"pipe and angle brackets", "a|b <i>", `a\|b &lt;i&gt;`, `a\|b &lt;i&gt;`},
		{"code span keeps < and escapes | only in a table", "see `a|b<c>`", "see `a\\|b<c>`", "see `a|b<c>`"},
		{"double-backtick span", "``a`|b``", "``a`\\|b``", "``a`|b``"},
		{"unmatched backtick is text", "it`s <ok>", "it`s &lt;ok&gt;", "it`s &lt;ok&gt;"},
		{"ampersand", "a & b", "a &amp; b", "a &amp; b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cell(tc.in); got != tc.cell {
				t.Errorf("cell(%q) = %q, want %q", tc.in, got, tc.cell)
			}
			if got := paragraph(tc.in); got != tc.prose {
				t.Errorf("paragraph(%q) = %q, want %q", tc.in, got, tc.prose)
			}
		})
	}
}

func TestTypeName(t *testing.T) {
	yes := true
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	for _, tc := range []struct {
		s    apiextensionsv1.JSONSchemaProps
		want string
	}{
		{str, "string"},
		{apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}, "string (date-time)"},
		{apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32"}, "int32"},
		{apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}}, "[]string"},
		{apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}}, "map[string]string"},
		{apiextensionsv1.JSONSchemaProps{XIntOrString: true}, "int or string"},
		{apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}, "any JSON"},
	} {
		if got := typeName(tc.s); got != tc.want {
			t.Errorf("typeName(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestDocsAPIIsCurrent fails when docs/api.md is not what the generator makes of the committed CRDs,
// as `make verify-gen` does in CI.
func TestDocsAPIIsCurrent(t *testing.T) {
	crds, err := loadCRDs(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Render(crds)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("docs/api.md is stale; run 'make manifests' and commit it (-generated +file):\n%s", d)
	}
}

func TestLoadCRDsRefusesAnEmptyDirectory(t *testing.T) {
	_, err := loadCRDs(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no CRD files") {
		t.Fatalf("err = %v, want one saying there are no CRD files", err)
	}
}

// forkRunSpecFields is the properties map of ForkRun's spec in crds: a field stored in it is rendered.
func forkRunSpecFields(t *testing.T, crds []apiextensionsv1.CustomResourceDefinition) map[string]apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, crd := range crds {
		if crd.Spec.Names.Kind == "ForkRun" {
			return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
		}
	}
	t.Fatal("no ForkRun CRD")
	return nil
}

func kindSection(t *testing.T, doc, kind string) string {
	t.Helper()
	start := strings.Index(doc, "\n## "+kind+"\n")
	if start < 0 {
		t.Fatalf("no section for %s", kind)
	}
	rest := doc[start+1:]
	if end := strings.Index(rest[3:], "\n## "); end >= 0 {
		return rest[:end+3]
	}
	return rest
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
