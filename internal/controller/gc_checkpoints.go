package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
)

// pruneCheckpoints is what prune deletes: the Checkpoints of the sessions deleted in this pass, and
// for every other session the Checkpoints checkpoint.Prune drops (keep-N, a byte quota, never the
// newest). A Checkpoint retained for its own sake (gather) is never pruned and does not count.
func pruneCheckpoints(objs gcObjects, deleted map[string]bool, policy checkpoint.PrunePolicy) map[string]checkpoint.PruneRule {
	retained := map[string]bool{}
	for _, c := range gather(gcObjects{forkRuns: objs.forkRuns, checkpoints: objs.checkpoints}).Checkpoints {
		retained[c.ID] = c.Retained
	}
	doomed := map[string]checkpoint.PruneRule{}
	perSession := map[string][]checkpoint.Summary{}
	for i := range objs.checkpoints {
		ck := &objs.checkpoints[i]
		k, session := gcKey(ck.Namespace, ck.Name), gcKey(ck.Namespace, ck.Spec.SessionRef.Name)
		if retained[k] || !ck.DeletionTimestamp.IsZero() {
			continue
		}
		if deleted[session] {
			doomed[k] = "sessionDeleted"
			continue
		}
		if ck.Status.Snapshot.ManifestDigest == "" || ck.Spec.Step == nil {
			continue // nothing stored to bound
		}
		var incremental int64
		if b := ck.Status.Snapshot.IncrementalBytes; b != nil {
			incremental = *b
		}
		perSession[session] = append(perSession[session], checkpoint.Summary{ID: k, CreatedAt: ck.CreationTimestamp.Time,
			Anchor: checkpoint.Anchor{Session: session, Step: *ck.Spec.Step}, IncrementalBytes: incremental})
	}
	if policy.KeepPerSession == 0 && policy.MaxBytes == 0 {
		return doomed
	}
	for _, list := range perSession {
		for _, d := range checkpoint.Prune(list, policy).Delete {
			doomed[d.ID] = d.Rule
		}
	}
	return doomed
}

// prune deletes the Checkpoints pruneCheckpoints chose, each after its manifest when no Checkpoint
// that stays shares it (a capture deduplicated against an earlier one stores no manifest of its own).
// The manifest goes first: a Checkpoint whose deletion failed is found again by the next pass, a
// manifest left behind would keep its blobs from the sweep for ever.
func (g *GarbageCollector) prune(ctx context.Context, objs gcObjects, deleted map[string]bool) ([]string, error) {
	doomed := pruneCheckpoints(objs, deleted, checkpoint.PrunePolicy{KeepPerSession: g.Options.CheckpointKeep, MaxBytes: g.Options.CheckpointMaxBytes})
	if len(doomed) == 0 {
		return nil, nil
	}
	sessions := map[string]*v1alpha1.AgentSession{}
	for i := range objs.sessions {
		s := &objs.sessions[i]
		sessions[gcKey(s.Namespace, s.Name)] = s
	}
	// Manifests still referenced by a Checkpoint that stays, per store location.
	kept := map[string]bool{}
	for i := range objs.checkpoints {
		ck := &objs.checkpoints[i]
		if _, gone := doomed[gcKey(ck.Namespace, ck.Name)]; gone {
			continue
		}
		if s := sessions[gcKey(ck.Namespace, ck.Spec.SessionRef.Name)]; s != nil && ck.Status.Snapshot.ManifestDigest != "" {
			kept[g.Stores.LocationOf(s).String()+"#"+ck.Status.Snapshot.ManifestDigest] = true
		}
	}
	var pruned []string
	var errs []error
	for i := range objs.checkpoints {
		ck := &objs.checkpoints[i]
		k := gcKey(ck.Namespace, ck.Name)
		rule, ok := doomed[k]
		if !ok {
			continue
		}
		s := sessions[gcKey(ck.Namespace, ck.Spec.SessionRef.Name)]
		if g.Options.DryRun {
			if s != nil {
				g.Recorder.Eventf(s, ck, corev1.EventTypeNormal, ReasonCheckpointWouldPrune, "GarbageCollect", "Would delete Checkpoint %s (dry run): %s", ck.Name, rule)
			}
			pruned = append(pruned, k)
			continue
		}
		if digest := ck.Status.Snapshot.ManifestDigest; digest != "" && s != nil {
			loc := g.Stores.LocationOf(s)
			if !kept[loc.String()+"#"+digest] {
				if err := g.deleteManifest(ctx, loc, digest); err != nil {
					errs = append(errs, fmt.Errorf("deleting the manifest of Checkpoint %s: %w", k, err))
					continue
				}
			}
		}
		uid := ck.UID
		if err := g.Delete(ctx, ck, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Checkpoint %s: %w", k, err))
			continue
		}
		pruned = append(pruned, k)
		ctrl.LoggerFrom(ctx).Info("Deleted Checkpoint", "checkpoint", k, "rule", rule)
		if s != nil {
			g.Recorder.Eventf(s, ck, corev1.EventTypeNormal, ReasonCheckpointPruned, "GarbageCollect", "Deleted Checkpoint %s: %s", ck.Name, rule)
		}
	}
	return pruned, errors.Join(errs...)
}

func (g *GarbageCollector) deleteManifest(ctx context.Context, loc Location, digest string) error {
	st, err := g.Stores.Open(ctx, loc)
	if err != nil {
		return err
	}
	return st.sessions.Checkpoints().Delete(ctx, digest)
}
