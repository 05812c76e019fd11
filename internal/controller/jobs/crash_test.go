package jobs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// agentPod is a Job's pod of an agent beside the proxy sidecar, with the given container statuses.
func agentPod(phase corev1.PodPhase, proxy, agent corev1.ContainerStatus) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	proxy.Name, agent.Name = SidecarContainerName, "agent"
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "run-fork-abc-x1"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "restore"}, {Name: SidecarContainerName, RestartPolicy: &always}},
			Containers: []corev1.Container{{Name: "agent"}}},
		Status: corev1.PodStatus{Phase: phase, InitContainerStatuses: []corev1.ContainerStatus{{Name: "restore",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}, proxy},
			ContainerStatuses: []corev1.ContainerStatus{agent}}}
}

func terminated(code int32, msg string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: msg}}
}

var (
	running      = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	initializing = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	backOff      = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}}
)

// TestCrashOfFindsEveryContainerThatFailsAndIsStartedAgain: a container in CrashLoopBackOff, one the
// kubelet restarted after a non-zero exit, a sidecar that just exited non-zero before the agent ended
// (it is started again) are crashes, with the last line of their termination message; a container that
// exited 0, a sidecar stopped after the agent ended, a pod that is over or being deleted, and a
// container that is not restarted (its exit ends the pod and the Job) are not.
func TestCrashOfFindsEveryContainerThatFailsAndIsStartedAgain(t *testing.T) {
	providerErr := "pulling session s-1\nError: --provider anthropic: session s-1 records openai; leave --provider out to replay it as recorded\n"
	cases := []struct {
		name string
		pod  *corev1.Pod
		want *Crash
	}{
		{"a sidecar in CrashLoopBackOff", agentPod(corev1.PodPending,
			corev1.ContainerStatus{State: backOff, RestartCount: 3, LastTerminationState: terminated(1, providerErr)},
			corev1.ContainerStatus{State: initializing}),
			&Crash{Pod: "run-fork-abc-x1", Container: SidecarContainerName, ExitCode: 1, Reason: "Error", Restarts: 3, BackOff: true,
				LastLine: "Error: --provider anthropic: session s-1 records openai; leave --provider out to replay it as recorded"}},
		{"a sidecar restarted once after a non-zero exit, running again", agentPod(corev1.PodRunning,
			corev1.ContainerStatus{State: running, RestartCount: 1, LastTerminationState: terminated(2, "panic: boom")},
			corev1.ContainerStatus{State: running}),
			&Crash{Pod: "run-fork-abc-x1", Container: SidecarContainerName, ExitCode: 2, Reason: "Error", Restarts: 1, LastLine: "panic: boom"}},
		{"a sidecar that just exited non-zero before the agent started", agentPod(corev1.PodPending,
			corev1.ContainerStatus{State: terminated(1, providerErr)}, corev1.ContainerStatus{State: initializing}),
			&Crash{Pod: "run-fork-abc-x1", Container: SidecarContainerName, ExitCode: 1, Reason: "Error",
				LastLine: "Error: --provider anthropic: session s-1 records openai; leave --provider out to replay it as recorded"}},
		{"CrashLoopBackOff of a container with no recorded exit", agentPod(corev1.PodPending,
			corev1.ContainerStatus{State: backOff, RestartCount: 5}, corev1.ContainerStatus{State: initializing}),
			&Crash{Pod: "run-fork-abc-x1", Container: SidecarContainerName, Restarts: 5, BackOff: true}},
		{"a sidecar restarted after exiting 0 is not a crash", agentPod(corev1.PodRunning,
			corev1.ContainerStatus{State: running, RestartCount: 1, LastTerminationState: terminated(0, "")},
			corev1.ContainerStatus{State: running}), nil},
		{"a sidecar stopped non-zero after the agent ended is the pod ending", agentPod(corev1.PodRunning,
			corev1.ContainerStatus{State: terminated(1, "push failed")}, corev1.ContainerStatus{State: terminated(0, "")}), nil},
		{"an agent that exited non-zero ends the pod", agentPod(corev1.PodRunning,
			corev1.ContainerStatus{State: running}, corev1.ContainerStatus{State: terminated(1, "drift")}), nil},
		{"a pod that failed is over", agentPod(corev1.PodFailed,
			corev1.ContainerStatus{State: backOff, RestartCount: 3, LastTerminationState: terminated(1, providerErr)},
			corev1.ContainerStatus{State: initializing}), nil},
		{"a healthy pod", agentPod(corev1.PodRunning, corev1.ContainerStatus{State: running}, corev1.ContainerStatus{State: running}), nil},
	}
	deleting := agentPod(corev1.PodRunning, corev1.ContainerStatus{State: backOff, RestartCount: 3}, corev1.ContainerStatus{State: initializing})
	deleting.DeletionTimestamp = &metav1.Time{}
	cases = append(cases, struct {
		name string
		pod  *corev1.Pod
		want *Crash
	}{"a pod being deleted", deleting, nil})
	engine := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "verify-x"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: backOff, RestartCount: 2,
			LastTerminationState: terminated(3, "bad input")}}}}
	cases = append(cases, struct {
		name string
		pod  *corev1.Pod
		want *Crash
	}{"any container in CrashLoopBackOff", engine, &Crash{Pod: "verify-x", Container: ContainerName, ExitCode: 3, Reason: "Error", Restarts: 2, BackOff: true, LastLine: "bad input"}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, CrashOf(tc.pod)); d != "" {
				t.Errorf("CrashOf (-want +got):\n%s", d)
			}
		})
	}
}

func TestLastLineIsTheLastNonBlankLineCutOnARune(t *testing.T) {
	long := strings.Repeat("é", maxLastLine) // 2 bytes a rune: the cut falls inside one
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"one", "one"},
		{"first\nsecond\n\n  \n", "second"},
		{"  indented  \r\n", "indented"},
		{"x\n" + long, strings.Repeat("é", maxLastLine/2) + "..."},
	} {
		if got := LastLine(tc.in); got != tc.want {
			t.Errorf("LastLine(%.40q) = %.60q, want %.60q", tc.in, got, tc.want)
		}
	}
}

func TestACrashSaysWhatHappened(t *testing.T) {
	for _, tc := range []struct {
		c    Crash
		want string
	}{
		{Crash{Pod: "p", Container: "proxy", ExitCode: 1, Reason: "Error", Restarts: 3, BackOff: true}, "container proxy of pod p exited 1 (Error) and is in CrashLoopBackOff after 3 restarts"},
		{Crash{Pod: "p", Container: "proxy", ExitCode: 2, Restarts: 1}, "container proxy of pod p exited 2 and was restarted once"},
		{Crash{Pod: "p", Container: "proxy", ExitCode: 1}, "container proxy of pod p exited 1 and is started again"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
