package apimap

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

func TestCheckpointSnapshotNamesThePreviousCheckpointOnlyWhenDeduplicated(t *testing.T) {
	digest := strings.Repeat("e", 64)
	res := &task.CheckpointResult{ManifestHash: digest, Files: 3, Bytes: 120, IncrementalBytes: 40}
	cases := []struct {
		name         string
		deduplicated bool
		want         v1alpha1.WorkspaceSnapshot
	}{
		{"a new manifest", false, v1alpha1.WorkspaceSnapshot{ManifestDigest: digest, Files: new(int64(3)), TotalBytes: new(int64(120)), IncrementalBytes: new(int64(40))}},
		{"deduplicated", true, v1alpha1.WorkspaceSnapshot{ManifestDigest: digest, Files: new(int64(3)), TotalBytes: new(int64(120)), IncrementalBytes: new(int64(40)),
			PreviousRef: v1alpha1.LocalObjectReference{Name: "run-1-step-4"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := *res
			r.Deduplicated = c.deduplicated
			got, err := CheckpointSnapshot(&r, "run-1-step-4")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("snapshot (-want +got):\n%s", d)
			}
		})
	}
}

func TestACheckpointResultTheCRDWouldRefuseIsAnError(t *testing.T) {
	for _, r := range []task.CheckpointResult{
		{ManifestHash: "run-42-t3"},
		{ManifestHash: strings.Repeat("E", 64)},
		{ManifestHash: strings.Repeat("e", 64), IncrementalBytes: -1},
	} {
		if _, err := CheckpointSnapshot(&r, ""); err == nil {
			t.Errorf("%+v mapped to a snapshot", r)
		}
	}
}
