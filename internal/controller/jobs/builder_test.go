package jobs

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestNamesAreDeterministicBoundedAndChangeWithTheInputs(t *testing.T) {
	long := strings.Repeat("a-very-long-session-name.", 10)
	cases := []struct{ parent, purpose string }{{"run-1", "verify"}, {long, "resume-plan"}, {"x", "verify"}}
	for _, c := range cases {
		a, b := Name(c.parent, c.purpose, "1", "s"), Name(c.parent, c.purpose, "1", "s")
		if a != b {
			t.Errorf("Name(%q) is not deterministic: %s, %s", c.parent, a, b)
		}
		if len(a) > 63 || strings.HasSuffix(a, "-") || !strings.Contains(a, "-"+c.purpose+"-") {
			t.Errorf("Name(%q, %q) = %q (%d chars)", c.parent, c.purpose, a, len(a))
		}
		if Name(c.parent, c.purpose, "2", "s") == a {
			t.Errorf("Name(%q) ignores a change of generation", c.parent)
		}
	}
	// The inputs are length-prefixed: moving a boundary between two inputs changes the name.
	if Name("p", "verify", "ab", "c") == Name("p", "verify", "a", "bc") {
		t.Error("inputs that concatenate alike give the same name")
	}
}

func TestACommandReplacesTheEngineTaskBeforeTheArgs(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "run-1", Namespace: "ns", UID: "u"}}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		command, want []string
	}{
		{nil, []string{"engine", "verify", "--store", "s3://b"}},
		{[]string{"proxy", "--mode", "record"}, []string{"proxy", "--mode", "record", "--store", "s3://b"}},
	} {
		job, err := Build(Spec{Owner: owner, Purpose: "verify", Command: c.command, Args: []string{"--store", "s3://b"}}, scheme)
		if err != nil {
			t.Fatal(err)
		}
		if got := job.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, c.want) {
			t.Errorf("command %v: args %v, want %v", c.command, got, c.want)
		}
	}
}
