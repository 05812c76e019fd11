package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// LabelSession is on every Checkpoint the operator mints: the name of its AgentSession (cut with a
// hash when the name is longer than a label value may be).
const LabelSession = "agentrewind.io/session"

// Bounds of the names the operator derives from a session's.
const (
	maxObjectName = 253
	maxLabelValue = 63
	nameHash      = 8
)

// CheckpointName is the deterministic name of the Checkpoint of a session's anchor at step:
// <session>-step-<step>, the session's name cut to fit (and then followed by a hash of it, so two long
// names sharing a prefix never share a Checkpoint).
func CheckpointName(session string, step int64) string {
	suffix := "-step-" + strconv.FormatInt(step, 10)
	if len(session)+len(suffix) <= maxObjectName {
		return session + suffix
	}
	return cutWithHash(session, maxObjectName-len(suffix)) + suffix
}

// sessionLabel is the value of LabelSession for a session.
func sessionLabel(session string) string {
	if len(session) <= maxLabelValue {
		return session
	}
	return cutWithHash(session, maxLabelValue)
}

// cutWithHash cuts s to at most n characters, the last of them a hash of the whole of s.
func cutWithHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:nameHash]
	return strings.TrimRight(s[:n-nameHash-1], "-.") + "-" + h
}

// checkpointsFor are the Checkpoints a verified session's anchors call for, one per anchor the verify
// result lists, in log order. Only the anchor the run is parked at (the latest one, ending a log the
// recorder has not closed) asks for a snapshot of the session's workspace: the workspace as it is now
// is that step's workspace only while the run stands still there. Any earlier anchor's workspace is
// gone, so its Checkpoint is an anchor only rather than a snapshot that would lie about its step.
func checkpointsFor(s *v1alpha1.AgentSession, v *task.VerifyResult) []v1alpha1.Checkpoint {
	parked, isParked := v.ParkedAt()
	out := make([]v1alpha1.Checkpoint, 0, len(v.Anchors))
	for _, a := range v.Anchors {
		ck := v1alpha1.Checkpoint{
			ObjectMeta: metav1.ObjectMeta{Name: CheckpointName(s.Name, a.Step), Namespace: s.Namespace,
				Labels: map[string]string{LabelSession: sessionLabel(s.Name)}},
			Spec: v1alpha1.CheckpointSpec{
				SessionRef:       v1alpha1.LocalObjectReference{Name: s.Name},
				Step:             new(a.Step),
				TurnIndex:        new(int32(a.TurnIndex)),
				TranscriptDigest: a.TranscriptDigest,
			},
		}
		if isParked && a == parked && s.Spec.Agent.Workspace.ClaimName != "" {
			ck.Spec.Workspace = v1alpha1.WorkspaceSnapshotSpec{Volume: s.Spec.Agent.Workspace}
		}
		out = append(out, ck)
	}
	return out
}

// sameAnchor says whether two Checkpoint specs anchor the same point of the same session.
func sameAnchor(a, b v1alpha1.CheckpointSpec) bool {
	return a.SessionRef == b.SessionRef && a.TranscriptDigest == b.TranscriptDigest &&
		a.Step != nil && b.Step != nil && *a.Step == *b.Step && a.TurnIndex != nil && b.TurnIndex != nil && *a.TurnIndex == *b.TurnIndex
}

// mintCheckpoints creates the Checkpoints of a verified session's anchors that do not exist yet, owned
// by the session. One that exists is left as it is (its spec is immutable); one of that name anchoring
// something else is reported, not replaced: its own controller stalls it as AnchorMismatch.
func (r *AgentSessionReconciler) mintCheckpoints(ctx context.Context, s *v1alpha1.AgentSession, v *task.VerifyResult) error {
	var created []string
	for _, ck := range checkpointsFor(s, v) {
		var existing v1alpha1.Checkpoint
		err := r.Get(ctx, client.ObjectKeyFromObject(&ck), &existing)
		switch {
		case err == nil:
			if !sameAnchor(existing.Spec, ck.Spec) {
				r.Recorder.Eventf(s, &existing, corev1.EventTypeWarning, ReasonAnchorMismatch, "Mint",
					"Checkpoint %s exists but does not anchor step %d of this session (turn %d); it was left as it is", ck.Name, *ck.Spec.Step, *ck.Spec.TurnIndex)
			}
			continue
		case !apierrors.IsNotFound(err):
			return err
		}
		if err := controllerutil.SetControllerReference(s, &ck, r.Scheme); err != nil {
			return err
		}
		if err := r.Create(ctx, &ck); err != nil {
			if apierrors.IsAlreadyExists(err) { // the cache lagged behind an earlier pass's create
				continue
			}
			return fmt.Errorf("creating Checkpoint %s: %w", ck.Name, err)
		}
		created = append(created, ck.Name)
	}
	if len(created) > 0 {
		ctrl.LoggerFrom(ctx).Info("Created Checkpoints for the session's anchors", "checkpoints", created, "anchors", v.TotalAnchors)
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "CheckpointsCreated", "Mint", "Created %d Checkpoints for the recorder's anchors, the latest %s",
			len(created), created[len(created)-1])
	}
	return nil
}
