package controller

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// TestAForkWhosePatchDoesNotApplyFailsNamingIt runs a Fork whose request patch addresses a path the
// live request does not have through the real proxy: nothing goes upstream, the agent is refused, and
// the ForkRun fails as an invalid spec whose message names the patch and the live request (step and
// call site), where it used to end "Completed ... but the agent container failed".
func TestAForkWhosePatchDoesNotApplyFailsNamingIt(t *testing.T) {
	e := newEnv(t)
	e.recordThroughProxy("golden", hiThere, "hello")
	e.forkSecrets()
	e.startForkManager(nil)
	e.readySession("golden")
	fr := newFork("bad-patch", "golden", 1)
	fr.Spec.Fork.Overrides = v1alpha1.ForkOverrides{RequestPatches: []v1alpha1.JSONPatchOperation{
		{Op: "replace", Path: "/no/such/path", Value: &apiextensionsv1.JSON{Raw: []byte(`1`)}}}}
	e.create(fr)
	job := e.waitJob(fr.Name, "fork")
	fake, upstream := fakeLLM(t, hiThere)
	if code, out := e.runForkPod(job, askAgent("hello"), "--anthropic-upstream", upstream); code == 0 {
		t.Fatalf("the agent was answered though the fork's patch does not apply:\n%s", out)
	}
	if n := fake.Requests(); n != 0 {
		t.Errorf("%d requests went upstream, want none: the request must not go out unpatched", n)
	}
	got := e.waitForkRun(fr.Name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
	if got.Status.Outcome != v1alpha1.OutcomeFailed {
		t.Errorf("outcome %s, want Failed", got.Status.Outcome)
	}
	msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled).Message
	for _, want := range []string{job.Name, `request patch 0 (replace /no/such/path): replace: "no" does not exist`,
		"the live request at step 1", "call site anthropic.messages"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled message does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "Completed") {
		t.Errorf("Stalled message still calls the run Completed:\n%s", msg)
	}
}
