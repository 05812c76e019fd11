package controller

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// envtest has no kubelet and no Job controller, so Jobs never run. The tests play both: runJob runs
// the Job's engine container as the kubelet would (the built binary with the container's args and the
// environment the kubelet resolves: downward-API labels and Secret keys), then finishJob records the
// pod with its termination message and marks the Job finished, as the Job controller would.

// runJob runs a Job's engine container and finishes the Job with its exit status; it returns the
// engine's output.
func (e *env) runJob(job *batchv1.Job) string {
	e.t.Helper()
	c := job.Spec.Template.Spec.Containers[0]
	termLog := filepath.Join(e.t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o644); err != nil { // the kubelet creates the file
		e.t.Fatal(err)
	}
	cmd := exec.Command(engineBin, append(append([]string{}, c.Args...), "--termination-log", termLog)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.t.TempDir()}, e.resolveEnv(job, c.Env)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		e.t.Fatalf("running %v: %v", c.Args, err)
	}
	msg, _ := os.ReadFile(termLog)
	e.finishJob(job, err == nil, string(msg))
	return string(out)
}

// resolveEnv is the environment the kubelet gives the container.
func (e *env) resolveEnv(job *batchv1.Job, vars []corev1.EnvVar) []string {
	e.t.Helper()
	var out []string
	for _, v := range vars {
		val := v.Value
		switch src := v.ValueFrom; {
		case src == nil:
		case src.FieldRef != nil:
			path := src.FieldRef.FieldPath
			label, ok := strings.CutPrefix(path, "metadata.labels['")
			if !ok {
				e.t.Fatalf("env %s: field %s is not a label", v.Name, path)
			}
			val = job.Spec.Template.Labels[strings.TrimSuffix(label, "']")]
		case src.SecretKeyRef != nil:
			var s corev1.Secret
			err := e.c.Get(e.ctx, client.ObjectKey{Namespace: job.Namespace, Name: src.SecretKeyRef.Name}, &s)
			if err != nil && !(src.SecretKeyRef.Optional != nil && *src.SecretKeyRef.Optional) {
				e.t.Fatalf("env %s: %v", v.Name, err)
			}
			val = string(s.Data[src.SecretKeyRef.Key])
		default:
			e.t.Fatalf("env %s: a source the test kubelet does not know", v.Name)
		}
		out = append(out, v.Name+"="+val)
	}
	return out
}

// finishJob records the Job's pod with message as its engine container's termination message (no pod
// when message is ""), then marks the Job complete or failed.
func (e *env) finishJob(job *batchv1.Job, succeeded bool, message string) {
	e.t.Helper()
	if message != "" {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-pod", Namespace: job.Namespace, Labels: job.Spec.Template.Labels},
			Spec: *job.Spec.Template.Spec.DeepCopy()}
		e.create(pod)
		exit, phase := int32(0), corev1.PodSucceeded
		if !succeeded {
			exit, phase = 1, corev1.PodFailed
		}
		pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: job.Spec.Template.Spec.Containers[0].Name,
			Image: job.Spec.Template.Spec.Containers[0].Image, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message}}}}}
		if err := e.c.Status().Update(e.ctx, pod); err != nil {
			e.t.Fatal(err)
		}
	}
	var j batchv1.Job
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(job), &j); err != nil {
		e.t.Fatal(err)
	}
	now := metav1.Now()
	j.Status.StartTime = &now
	cond := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now}
	}
	if succeeded {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)}
	} else {
		j.Status.Failed = 1
		f := cond(batchv1.JobFailed)
		f.Reason, f.Message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget), f}
	}
	if err := e.c.Status().Update(e.ctx, &j); err != nil {
		e.t.Fatalf("marking Job %s finished: %v", j.Name, err)
	}
}
