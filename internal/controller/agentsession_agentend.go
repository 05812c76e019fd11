package controller

import (
	"context"
	"errors"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// signalNames name the signals an agent is commonly ended by, from the exit code 128+n the kubelet
// reports for one; another is SIG<n>.
var signalNames = map[int32]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
	9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}

// agentEndOf says how the agent container of a finished recording Job ended, from the kubelet's
// word on it: ok is false when the agent never terminated (it never started, or its pod was deleted
// first), which says nothing of how it ended. A Job past its deadline outranks the signal that ended
// the agent then, not an exit the agent made on its own.
func agentEndOf(job *batchv1.Job, ts []jobs.Termination) (end v1alpha1.AgentEnd, ok bool) {
	for _, t := range ts {
		if t.Container == AgentContainer {
			end, ok = terminationEnd(t), true
		}
	}
	if ok && end.How == v1alpha1.AgentKilled && jobs.StateOf(job) == jobs.Failed && failedReason(job) == batchv1.JobReasonDeadlineExceeded {
		end.How = v1alpha1.AgentDeadlineExceeded
	}
	return end, ok
}

// maxSignal is the highest signal number: a status of 128+n above it is an exit code, not a signal.
const maxSignal = 64

// terminationEnd reads one container's termination.
func terminationEnd(t jobs.Termination) v1alpha1.AgentEnd {
	end := v1alpha1.AgentEnd{ExitCode: new(t.ExitCode), Reason: t.Reason}
	if len(end.Reason) > 64 {
		end.Reason = end.Reason[:64]
	}
	switch {
	case t.ExitCode < 0 || t.ExitCode > 255:
		end.How, end.ExitCode = v1alpha1.AgentFailed, nil // not a process's exit status
	case t.Reason == "OOMKilled":
		end.How, end.Signal = v1alpha1.AgentKilled, "SIGKILL"
	case t.ExitCode == 0:
		end.How = v1alpha1.AgentFinished
	case t.ExitCode > 128 && t.ExitCode <= 128+maxSignal:
		end.How, end.Signal = v1alpha1.AgentKilled, signalNames[t.ExitCode-128]
		if end.Signal == "" {
			end.Signal = "SIG" + strconv.Itoa(int(t.ExitCode-128))
		}
	default:
		end.How = v1alpha1.AgentFailed
	}
	return end
}

// failedReason is the reason of a Job's Failed condition.
func failedReason(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

// sessionCommitted says whether the session's meta.json is in the store: the proxy committed the
// run, whatever became of the agent.
func (r *AgentSessionReconciler) sessionCommitted(ctx context.Context, s *v1alpha1.AgentSession) (bool, error) {
	st, err := r.Stores.Open(ctx, r.Stores.LocationOf(s))
	if err != nil {
		return false, err
	}
	_, err = st.objects.Stat(ctx, st.sessions.Layout().SessionMeta(s.Spec.SessionID))
	if errors.Is(err, blobstore.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// agentEndWords says how an agent ended, for an event.
func agentEndWords(end v1alpha1.AgentEnd) string {
	words := string(end.How)
	switch {
	case end.Signal != "":
		words += " (" + end.Signal + ")"
	case end.ExitCode != nil:
		words += " (exit code " + strconv.Itoa(int(*end.ExitCode)) + ")"
	}
	return words
}
