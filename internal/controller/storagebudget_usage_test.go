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
