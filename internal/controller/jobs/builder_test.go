package jobs

import (
	"strings"
	"testing"
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
