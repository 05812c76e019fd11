package main

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/ui"
)

// clusterSource shows a namespace's AgentSessions with what the cluster says of them: the resume
// verdicts of their ResumePlans, the ForkRuns that made them, their Checkpoints. The recordings are
// read from the store each session lives in, as kubectl rewind inspect reads them.
type clusterSource struct {
	c  client.Client
	ns string
	// store holds the store flags; its --store is the operator's store.
	store storeFlags
	// tmp is where recordings are pulled to be opened (ui.PullAndOpen removes each once opened).
	tmp string
}

func (o *uiOptions) clusterSource() (*clusterSource, error) {
	c, ns, err := o.client()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "agentrewind-ui-*")
	if err != nil {
		return nil, fmt.Errorf("making a directory to read sessions into: %w (set TMPDIR to a writable directory)", err)
	}
	return &clusterSource{c: c, ns: ns, store: o.store, tmp: tmp}, nil
}

func (s *clusterSource) close() { _ = os.RemoveAll(s.tmp) }

// sessionID is the id of the recording an AgentSession stands for.
func sessionID(a *v1alpha1.AgentSession) string { return cmp.Or(a.Spec.SessionID, a.Name) }

func (s *clusterSource) agentSessions(ctx context.Context) ([]v1alpha1.AgentSession, error) {
	var list v1alpha1.AgentSessionList
	if err := s.c.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
		return nil, fmt.Errorf("listing AgentSessions in namespace %s: %w", s.ns, err)
	}
	return list.Items, nil
}

// find is the AgentSession recording session id.
func (s *clusterSource) find(ctx context.Context, id string) (*v1alpha1.AgentSession, error) {
	list, err := s.agentSessions(ctx)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if sessionID(&list[i]) == id {
			return &list[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no AgentSession in namespace %s records session %s", ui.ErrNotFound, s.ns, id)
}

// Sessions lists the namespace's AgentSessions: parent, verdict and readiness from their status, and
// the ForkRun that made each fork.
func (s *clusterSource) Sessions(ctx context.Context) ([]ui.Listing, error) {
	list, err := s.agentSessions(ctx)
	if err != nil {
		return nil, err
	}
	var forks v1alpha1.ForkRunList
	if err := s.c.List(ctx, &forks, client.InNamespace(s.ns)); err != nil {
		return nil, fmt.Errorf("listing ForkRuns in namespace %s: %w", s.ns, err)
	}
	madeBy := map[string]string{}
	for _, fr := range forks.Items {
		if child := fr.Status.ChildSessionRef.Name; child != "" {
			madeBy[child] = fmt.Sprintf("ForkRun %s (%s)", fr.Name, cmp.Or(string(fr.Status.Outcome), "running"))
		}
	}
	ids := map[string]string{}
	for i := range list {
		ids[list[i].Name] = sessionID(&list[i])
	}
	out := make([]ui.Listing, 0, len(list))
	for i := range list {
		a := &list[i]
		l := ui.Listing{ID: sessionID(a), ForkedAtStep: a.Spec.ForkedAtStep, Verdict: string(a.Status.ResumeVerdict),
			Object: "AgentSession " + a.Namespace + "/" + a.Name, ForkRun: madeBy[a.Name]}
		if p := a.Spec.ParentRef.Name; p != "" {
			l.Parent = cmp.Or(ids[p], p)
		}
		if n := a.Status.Recording.Events; n != nil {
			l.Events = *n
		}
		if c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			l.Phase = c.Reason
		}
		l.CreatedAt = a.CreationTimestamp.UnixMilli()
		out = append(out, l)
	}
	return out, nil
}

// Open reads the recording of session id from the store its AgentSession lives in.
func (s *clusterSource) Open(ctx context.Context, id string) (*session.Session, error) {
	a, err := s.find(ctx, id)
	if err != nil {
		return nil, err
	}
	f := s.store // a copy: open fills in defaults
	if f.store == "" {
		f.store = os.Getenv(envStore)
	}
	loc, err := sessionStore(a, f.store)
	if err != nil {
		return nil, err
	}
	f.store = loc
	ctx, cancel := f.context(ctx)
	defer cancel()
	store, _, err := f.open(ctx, nil)
	if err != nil {
		return nil, err
	}
	sess, err := ui.PullAndOpen(ctx, store, id, s.tmp)
	if err != nil {
		return nil, storeAdvice(fmt.Errorf("AgentSession %s, store %s: %w", a.Name, loc, err))
	}
	return sess, nil
}

// StoredPlan is the verdict of the session's ResumePlan; the one the operator made (owned by the
// AgentSession) is preferred over one made by hand.
func (s *clusterSource) StoredPlan(ctx context.Context, id string) (*ui.PlanView, error) {
	a, err := s.find(ctx, id)
	if err != nil {
		return nil, err
	}
	var plans v1alpha1.ResumePlanList
	if err := s.c.List(ctx, &plans, client.InNamespace(s.ns)); err != nil {
		return nil, fmt.Errorf("listing ResumePlans in namespace %s: %w", s.ns, err)
	}
	var best *v1alpha1.ResumePlan
	for i := range plans.Items {
		p := &plans.Items[i]
		if p.Spec.SessionRef.Name != a.Name || p.Status.Verdict == "" {
			continue
		}
		if best == nil || ownedBy(p, a) {
			best = p
		}
	}
	if best == nil {
		return nil, nil
	}
	return planViewOf(best), nil
}

func ownedBy(p *v1alpha1.ResumePlan, a *v1alpha1.AgentSession) bool {
	for _, ref := range p.OwnerReferences {
		if ref.UID == a.UID {
			return true
		}
	}
	return false
}

// planViewOf shows a ResumePlan's status as the page shows the engine's verdict.
func planViewOf(p *v1alpha1.ResumePlan) *ui.PlanView {
	st := p.Status
	v := &ui.PlanView{Source: "ResumePlan " + p.Namespace + "/" + p.Name, Verdict: string(st.Verdict), Reason: string(st.Reason), Message: st.Message,
		ResumeSHA: st.ResumeSHA, Residual: []string{}, Verified: []string{}, Reachability: string(st.Reachability.State),
		ReachabilityReason: st.Reachability.Reason, Convergence: string(st.Convergence.Verdict), Drift: string(st.Drift.Verdict),
		Rewind: ui.RewindView{Decision: string(st.Rewind.Decision), Reason: string(st.Rewind.Reason), Message: st.Rewind.Message,
			NoGoodNote: append([]string{}, st.Rewind.NoGoodNote...)}}
	for _, s := range st.Residual {
		v.Residual = append(v.Residual, s.ID)
	}
	for _, s := range st.Verified {
		v.Verified = append(v.Verified, s.ID+"@"+s.SHA)
	}
	if t := st.Rewind.RewindToTurn; t != nil {
		turn := int64(*t)
		v.Rewind.RewindToTurn = &turn
	}
	if d := st.Rewind.DroppedTurns; d != nil {
		v.Rewind.DroppedTurns = int(*d)
	}
	if t := st.EvaluatedAt; t != nil {
		at := t.Time
		v.EvaluatedAt = &at
	}
	return v
}

// Checkpoints lists the session's Checkpoint objects: anchors the recorder minted, with the workspace
// snapshot each holds.
func (s *clusterSource) Checkpoints(ctx context.Context, id string) ([]ui.CheckpointView, error) {
	a, err := s.find(ctx, id)
	if err != nil {
		return nil, err
	}
	var list v1alpha1.CheckpointList
	if err := s.c.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
		return nil, fmt.Errorf("listing Checkpoints in namespace %s: %w", s.ns, err)
	}
	out := []ui.CheckpointView{}
	for _, cp := range list.Items {
		if cp.Spec.SessionRef.Name != a.Name {
			continue
		}
		created := cp.CreationTimestamp.Time
		v := ui.CheckpointView{ID: cp.Name, Source: "Checkpoint " + cp.Namespace + "/" + cp.Name, Author: string(session.AuthorRecorder),
			AnchorsRewind: true, CreatedAt: &created}
		if cp.Spec.Step != nil {
			v.Step = *cp.Spec.Step
		}
		if cp.Spec.TurnIndex != nil {
			v.Turn = int64(*cp.Spec.TurnIndex)
		}
		snap := cp.Status.Snapshot
		if snap.Files != nil {
			v.Files = int(*snap.Files)
		}
		if snap.TotalBytes != nil {
			v.Bytes = *snap.TotalBytes
		}
		if snap.IncrementalBytes != nil {
			v.IncrementalBytes = *snap.IncrementalBytes
		}
		if c := meta.FindStatusCondition(cp.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status != "True" {
			v.Problem = c.Message
		}
		out = append(out, v)
	}
	return out, nil
}
