package apimap

import (
	"fmt"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// CheckpointSnapshot is a checkpoint result in the API's terms: the manifest the capture stored (or,
// deduplicated, the one it equalled), its files and bytes, and what it added to storage. previous names
// the Checkpoint of the same session holding that manifest, when the capture was deduplicated against
// one; it is ignored otherwise. A manifest digest the CRD would refuse is an error, not a guess.
func CheckpointSnapshot(r *task.CheckpointResult, previous string) (v1alpha1.WorkspaceSnapshot, error) {
	if !session.ValidBlobHash(r.ManifestHash) {
		return v1alpha1.WorkspaceSnapshot{}, fmt.Errorf("the checkpoint result's manifest hash %q is not a SHA-256 digest", cutString(r.ManifestHash, 80))
	}
	if r.Files < 0 || r.Bytes < 0 || r.IncrementalBytes < 0 {
		return v1alpha1.WorkspaceSnapshot{}, fmt.Errorf("the checkpoint result counts %d files, %d bytes, %d incremental bytes", r.Files, r.Bytes, r.IncrementalBytes)
	}
	snap := v1alpha1.WorkspaceSnapshot{
		ManifestDigest:   r.ManifestHash,
		Files:            new(r.Files),
		TotalBytes:       new(r.Bytes),
		IncrementalBytes: new(r.IncrementalBytes),
	}
	if r.Deduplicated && previous != "" {
		snap.PreviousRef = v1alpha1.LocalObjectReference{Name: previous}
	}
	return snap, nil
}
