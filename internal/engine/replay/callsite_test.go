package replay

import "testing"

func TestTrimFunctionKeepsTheNamedFunction(t *testing.T) {
	for in, want := range map[string]string{
		"example.com/agent.run":                            "run",
		"example.com/agent.run.plan.func2":                 "plan",
		"example.com/agent.TestX.func1":                    "TestX",
		"example.com/agent.recordTriage.triageAgent.func4": "triageAgent",
		"example.com/agent.(*Bot).step.func1":              "(*Bot).step",
		"example.com/agent.Bot.step":                       "step",
		"main.main.gowrap1":                                "main",
	} {
		if got := trimFunction(in); got != want {
			t.Errorf("trimFunction(%q) = %q, want %q", in, got, want)
		}
	}
}
