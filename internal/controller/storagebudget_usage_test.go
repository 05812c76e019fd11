package controller

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

func TestSumStorageAddsWhatEachObjectReportsAndCountsTheRest(t *testing.T) {
	sessions := []v1alpha1.AgentSession{{}, {}, {}}
	sessions[0].Status.Recording.Bytes = ptrTo[int64](100)
	sessions[1].Status.Recording.Bytes = ptrTo[int64](math.MaxInt64 - 50)
	// sessions[2] is still recording: no bytes yet.
	checkpoints := []v1alpha1.Checkpoint{{}, {}}
	checkpoints[0].Status.Snapshot.IncrementalBytes = ptrTo[int64](7)
	checkpoints[0].Status.Snapshot.TotalBytes = ptrTo[int64](1000) // shared files: not what it added
	got := sumStorage(sessions, checkpoints)
	want := namespaceStorage{sessions: storageUsage{bytes: math.MaxInt64, objects: 3}, checkpoints: storageUsage{bytes: 7, objects: 2}}
	if got != want {
		t.Errorf("sumStorage = %+v, want %+v (saturated, not wrapped)", got, want)
	}
}

func TestSumStorageCountsAForkWhatItAddsWhileItsParentIsThere(t *testing.T) {
	session := func(name, parent string, bytes, added *int64) v1alpha1.AgentSession {
		s := v1alpha1.AgentSession{}
		s.Name, s.Spec.ParentRef.Name = name, parent
		s.Status.Recording.Bytes, s.Status.Recording.AddedBytes = bytes, added
		return s
	}
	parent := session("run", "", ptrTo[int64](1000), ptrTo[int64](1000))
	fork := session("run-fix", "run", ptrTo[int64](1100), ptrTo[int64](150)) // 950 bytes are the parent's blobs
	forkOfFork := session("run-fix-2", "run-fix", ptrTo[int64](1200), ptrTo[int64](120))
	orphan := session("gone-fix", "gone", ptrTo[int64](900), ptrTo[int64](40)) // its parent was deleted: it alone keeps them
	older := session("old-fix", "run", ptrTo[int64](1050), nil)                // a result from before addedBytes
	for _, c := range []struct {
		what     string
		sessions []v1alpha1.AgentSession
		want     int64
	}{
		{"parent and fork", []v1alpha1.AgentSession{parent, fork}, 1000 + 150},
		{"a chain of forks", []v1alpha1.AgentSession{parent, fork, forkOfFork}, 1000 + 150 + 120},
		{"a fork without its parent", []v1alpha1.AgentSession{orphan}, 900},
		{"a fork whose parent went, under a fork that stays", []v1alpha1.AgentSession{fork, forkOfFork}, 1100 + 120},
		{"a fork without addedBytes", []v1alpha1.AgentSession{parent, older}, 1000 + 1050},
	} {
		if got := sumStorage(c.sessions, nil).sessions.bytes; got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.what, got, c.want)
		}
	}
}

func TestEvaluateBudgetSaysWhichKindIsOverItsLimit(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	usage := namespaceStorage{sessions: storageUsage{bytes: 2 << 30, objects: 4}, checkpoints: storageUsage{bytes: 500 << 20, objects: 9}}
	for _, tc := range []struct {
		name     string
		spec     v1alpha1.StorageBudgetSpec
		over     bool
		reason   string
		message  string
		sessions *int64
	}{
		{"both within", v1alpha1.StorageBudgetSpec{Sessions: q("2Gi"), Checkpoints: q("1Gi")}, false, v1alpha1.ReasonWithinBudget,
			"sessions keep 2147483648 bytes, checkpoints added 524288000", ptrTo[int64](2 << 30)},
		{"sessions over by one byte", v1alpha1.StorageBudgetSpec{Sessions: q("2147483647"), Checkpoints: q("1Gi")}, true, v1alpha1.ReasonSessionsOverBudget,
			"sessions keep 2147483648 bytes, over their limit of 2147483647", ptrTo[int64](2<<30 - 1)},
		{"checkpoints over, sessions unlimited", v1alpha1.StorageBudgetSpec{Checkpoints: q("100Mi")}, true, v1alpha1.ReasonCheckpointsOverBudget,
			"checkpoints added 524288000 bytes, over their limit of 104857600", nil},
		{"both over", v1alpha1.StorageBudgetSpec{Sessions: q("1Gi"), Checkpoints: q("0")}, true, v1alpha1.ReasonOverBudget,
			"sessions keep 2147483648 bytes, over their limit of 1073741824; checkpoints added 524288000 bytes, over their limit of 0", ptrTo[int64](1 << 30)},
		{"a decimal limit is rounded up to a byte", v1alpha1.StorageBudgetSpec{Sessions: q("2.5G")}, false, v1alpha1.ReasonWithinBudget,
			"sessions keep 2147483648 bytes, checkpoints added 524288000", ptrTo[int64](2500000000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := evaluateBudget(tc.spec, usage)
			if st.over != tc.over || st.reason != tc.reason || st.message != tc.message {
				t.Errorf("over %v, reason %q, message %q; want %v, %q, %q", st.over, st.reason, st.message, tc.over, tc.reason, tc.message)
			}
			if d := cmp.Diff(tc.sessions, st.sessions.LimitBytes); d != "" {
				t.Errorf("sessions limit (-want +got):\n%s", d)
			}
			if *st.sessions.UsedBytes != 2<<30 || *st.sessions.Objects != 4 || *st.checkpoints.UsedBytes != 500<<20 || *st.checkpoints.Objects != 9 {
				t.Errorf("usage not reported as counted: %+v %+v", st.sessions, st.checkpoints)
			}
		})
	}
}
