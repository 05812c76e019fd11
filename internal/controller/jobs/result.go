package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// State is where a Job stands.
type State int

const (
	// Running: the Job has not finished.
	Running State = iota
	// Succeeded: the Job's pod exited 0.
	Succeeded
	// Failed: the Job failed (its pod exited non-zero, was evicted, or ran past its deadline).
	Failed
)

// StateOf reads a Job's terminal conditions.
func StateOf(job *batchv1.Job) State {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Succeeded
		case batchv1.JobFailed:
			return Failed
		}
	}
	return Running
}

// FailedMessage is what a failed Job's condition says, such as "Job has reached the specified backoff limit".
func FailedMessage(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// ResultStore is where engine Jobs write their results.
type ResultStore interface {
	GetResult(ctx context.Context, uid string) ([]byte, error)
}

// Report is what a finished Job left behind: its full result from the store, or only the summary of
// its termination message, or neither (Problem says why nothing can be read).
type Report struct {
	Result  *task.Result
	Summary *task.Summary
	// ProblemReason and Problem are set when no usable report exists (ReasonResultMissing or
	// ReasonResultCorrupt of package conditions); the caller stalls, never guesses.
	ProblemReason, Problem string
}

// Read reads what a finished Job reported for the task want: results/<job-uid>.json from the store,
// else the termination message of its pod. An error is transient (the store or the API server could
// not be reached) and worth a retry; a missing or undecodable result is a Report with a Problem.
func Read(ctx context.Context, pods client.Reader, store ResultStore, job *batchv1.Job, want task.Name) (Report, error) {
	uid := string(job.UID)
	data, err := store.GetResult(ctx, uid)
	switch {
	case err == nil:
		res, err := task.Decode(data)
		if err != nil {
			return Report{ProblemReason: conditions.ReasonResultCorrupt, Problem: fmt.Sprintf("the result of Job %s in the store cannot be read: %v", job.Name, err)}, nil
		}
		if res.Task != want || res.JobUID != uid {
			return Report{ProblemReason: conditions.ReasonResultCorrupt, Problem: fmt.Sprintf("the result at results/%s.json is a %s result of Job UID %s, not the %s result of Job %s",
				uid, res.Task, res.JobUID, want, job.Name)}, nil
		}
		return Report{Result: res}, nil
	case !errors.Is(err, blobstore.ErrNotFound):
		return Report{}, fmt.Errorf("reading the result of Job %s: %w", job.Name, err)
	}
	msg, err := terminationMessage(ctx, pods, job)
	if err != nil {
		return Report{}, err
	}
	if msg == "" {
		return Report{ProblemReason: conditions.ReasonResultMissing, Problem: fmt.Sprintf("Job %s finished without a result at results/%s.json and without a termination message", job.Name, uid)}, nil
	}
	s, err := task.DecodeSummary([]byte(msg))
	if err != nil && !strings.HasPrefix(strings.TrimSpace(msg), "{") {
		// Not a summary but the end of the engine's log, which the kubelet keeps for a container that
		// failed before it wrote one (a proxy that could not start): its last line says why.
		return Report{ProblemReason: conditions.ReasonResultMissing, Problem: fmt.Sprintf("Job %s finished without a result at results/%s.json; its engine's log ends: %s",
			job.Name, uid, LastLine(msg))}, nil
	}
	if err != nil {
		return Report{ProblemReason: conditions.ReasonResultCorrupt, Problem: fmt.Sprintf("Job %s left no result in the store and its termination message cannot be read: %v", job.Name, err)}, nil
	}
	if s.Task != want || (s.JobUID != "" && s.JobUID != uid) {
		return Report{ProblemReason: conditions.ReasonResultCorrupt, Problem: fmt.Sprintf("the termination message of Job %s is a %s summary of Job UID %s", job.Name, s.Task, s.JobUID)}, nil
	}
	if s.Outcome == task.Succeeded {
		// A summary holds a headline, not the counts and verdicts a status is made of.
		return Report{Summary: s, ProblemReason: conditions.ReasonResultMissing, Problem: fmt.Sprintf("Job %s reported %q but its result is not at results/%s.json in the store", job.Name, s.Headline, uid)}, nil
	}
	return Report{Summary: s}, nil
}

// terminationMessage is the termination message of the Job's engine: its engine container, or the
// engine running as the proxy sidecar beside an agent (an init container); "" when no pod has one.
func terminationMessage(ctx context.Context, pods client.Reader, job *batchv1.Job) (string, error) {
	ts, err := Terminations(ctx, pods, job)
	if err != nil {
		return "", err
	}
	for _, t := range ts {
		if (t.Container == ContainerName || t.Container == SidecarContainerName) && t.Message != "" {
			return t.Message, nil
		}
	}
	return "", nil
}

// Termination is how one container of a Job's pod ended.
type Termination struct {
	Container string
	ExitCode  int32
	// Reason is the kubelet's, such as Error or OOMKilled.
	Reason string
	// Message is the container's termination message: what it wrote to its termination log, or the
	// tail of its log where its policy says so.
	Message string
}

// Terminations lists how the containers of a finished Job's pods ended, init containers (a native
// sidecar) included, in the pod's order; containers that did not terminate are left out.
func Terminations(ctx context.Context, pods client.Reader, job *batchv1.Job) ([]Termination, error) {
	var list corev1.PodList
	if err := pods.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{LabelJobUID: string(job.UID)}); err != nil {
		return nil, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	var out []Termination
	for _, pod := range list.Items {
		for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			if t := cs.State.Terminated; t != nil {
				out = append(out, Termination{Container: cs.Name, ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message})
			}
		}
	}
	return out, nil
}

// stuckReasons are the reasons a container waits that only a user's fix ends: a Secret or key the pod
// reads is missing, its image cannot be pulled. The kubelet retries, so the Job runs on, doing nothing,
// until its deadline.
var stuckReasons = map[string]bool{
	"CreateContainerConfigError": true, "CreateContainerError": true, "ErrImagePull": true,
	"ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
}

// Stuck says why a running Job's pod cannot start a container, "" when none is stuck: the first
// container waiting for one of stuckReasons, with the kubelet's message (which names the Secret and
// key or the image, never a value).
func Stuck(ctx context.Context, pods client.Reader, job *batchv1.Job) (string, error) {
	var list corev1.PodList
	if err := pods.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{LabelJobUID: string(job.UID)}); err != nil {
		return "", fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	for _, pod := range list.Items {
		for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
			if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
				return fmt.Sprintf("container %s of pod %s cannot start: %s: %s", cs.Name, pod.Name, w.Reason, w.Message), nil
			}
		}
	}
	return "", nil
}
