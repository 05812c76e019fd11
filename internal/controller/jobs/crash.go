package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Crash is a container of a running Job's pod that failed and is (or will be) started again: a native
// sidecar such as the rewind proxy restarts whatever its exit, so a proxy that cannot serve leaves the
// Job running, doing nothing, until its deadline.
type Crash struct {
	Pod, Container string
	// ExitCode and Reason are its last exit's (Reason is the kubelet's: Error, OOMKilled ...).
	ExitCode int32
	Reason   string
	// Restarts is how often the kubelet started it again; BackOff is set while it waits to.
	Restarts int32
	BackOff  bool
	// LastLine is the last line of its termination message: what it wrote to its termination log, or
	// the end of its log where its policy says so. It is the container's own text: quote it only for a
	// container that holds no secret of the user's.
	LastLine string
}

func (c *Crash) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %s of pod %s exited %d", c.Container, c.Pod, c.ExitCode)
	if c.Reason != "" {
		fmt.Fprintf(&b, " (%s)", c.Reason)
	}
	switch {
	case c.BackOff:
		fmt.Fprintf(&b, " and is in CrashLoopBackOff after %d restarts", c.Restarts)
	case c.Restarts == 1:
		b.WriteString(" and was restarted once")
	case c.Restarts > 1:
		fmt.Fprintf(&b, " and was restarted %d times", c.Restarts)
	default:
		b.WriteString(" and is started again")
	}
	return b.String()
}

// CrashOf finds a crashing container in a pod that still runs: one waiting in CrashLoopBackOff, one
// the kubelet restarted after a non-zero exit, or a native sidecar that just exited non-zero while the
// pod's main containers run (it is started again). A container that exited non-zero and is not
// restarted ends the pod, and with it the Job, which reports that itself. nil when none crashes.
func CrashOf(pod *corev1.Pod) *Crash {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil // stopping or over: the Job says how it ended
	}
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	mainEnded := len(pod.Status.ContainerStatuses) > 0
	for _, cs := range pod.Status.ContainerStatuses {
		mainEnded = mainEnded && cs.State.Terminated != nil
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		last := cs.LastTerminationState.Terminated
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff":
			c := &Crash{Pod: pod.Name, Container: cs.Name, Restarts: cs.RestartCount, BackOff: true}
			if last != nil {
				c.ExitCode, c.Reason, c.LastLine = last.ExitCode, last.Reason, LastLine(last.Message)
			}
			return c
		case cs.RestartCount > 0 && last != nil && last.ExitCode != 0:
			return &Crash{Pod: pod.Name, Container: cs.Name, ExitCode: last.ExitCode, Reason: last.Reason, Restarts: cs.RestartCount,
				LastLine: LastLine(last.Message)}
		case sidecars[cs.Name] && !mainEnded && cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			t := cs.State.Terminated
			return &Crash{Pod: pod.Name, Container: cs.Name, ExitCode: t.ExitCode, Reason: t.Reason, Restarts: cs.RestartCount,
				LastLine: LastLine(t.Message)}
		}
	}
	return nil
}

// Crashing is CrashOf the running Job's pods.
func Crashing(ctx context.Context, pods client.Reader, job *batchv1.Job) (*Crash, error) {
	var list corev1.PodList
	if err := pods.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{LabelJobUID: string(job.UID)}); err != nil {
		return nil, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	for i := range list.Items {
		if c := CrashOf(&list.Items[i]); c != nil {
			return c, nil
		}
	}
	return nil, nil
}

// maxLastLine bounds a quoted line: a condition message holds several.
const maxLastLine = 1024

// LastLine is the last non-blank line of a termination message, cut to maxLastLine bytes on a rune
// boundary.
func LastLine(msg string) string {
	lines := strings.Split(strings.TrimRight(msg, " \t\r\n"), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	if len(line) <= maxLastLine {
		return line
	}
	cut := maxLastLine
	for cut > 0 && line[cut]&0xC0 == 0x80 {
		cut--
	}
	return line[:cut] + "..."
}
