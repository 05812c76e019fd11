package controller

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// TestAJobOfAnothersUnderTheJobsNameIsReported: the manager's cache holds only the operator's own Jobs
// (CacheOptions), so a Job someone else made under the name of the verify Job the session needs is not
// taken for the operator's: the session's controller reports it by name, as an event, and leaves it as
// it is. Without the cache's label selector the controller would read that Job as its own verify Job.
func TestAJobOfAnothersUnderTheJobsNameIsReported(t *testing.T) {
	e := newEnv(t)
	push(t, e.storeKey(), recordSession(t, "run-1", "result", false))
	e.create(newSession("run-1", "run-1"))
	s := e.session("run-1")
	deps := scaleDeps(nil)
	spec, err := (&AgentSessionReconciler{Deps: deps}).verifyJob(s, deps.Stores.LocationOf(s))
	if err != nil {
		t.Fatal(err)
	}
	desired, err := jobs.Build(spec, apiServer.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	foreign := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: e.ns, Labels: map[string]string{"app": "someone-elses"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}},
	}
	e.create(foreign)

	e.startManager(nil)
	e.eventually("a JobNameTaken event on run-1", func() (bool, string) {
		msgs := e.eventMessages("run-1")
		return slices.Contains(e.eventReasons("run-1"), ReasonJobNameTaken), strings.Join(msgs, "; ")
	})
	if msgs := strings.Join(e.eventMessages("run-1"), "\n"); !strings.Contains(msgs, "Job "+desired.Name+" exists and was not made by agentrewind") {
		t.Errorf("the event does not name the Job: %s", msgs)
	}
	var got batchv1.Job
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(foreign), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || got.Labels[jobs.LabelManagedBy] != "" || got.Status.Succeeded != 0 {
		t.Errorf("the foreign Job was changed: owners %v, labels %v", got.OwnerReferences, got.Labels)
	}
	if s := e.session("run-1"); s.Status.Recording.EventsHash != "" {
		t.Errorf("the session was judged from a Job the operator did not make: %+v", s.Status.Recording)
	}
}
