package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// LabelSynced is on every AgentSession the store sync created.
const LabelSynced = "agentrewind.io/synced"

// ReasonSyncNameTaken: the store sync found a committed session whose AgentSession name is taken by an
// AgentSession recording another session, and left both as they are.
const ReasonSyncNameTaken = "SyncNameTaken"

// StoreSync makes sessions committed to the operator's default store from outside the cluster
// (agentrewind push, a proxy elsewhere) appear as AgentSessions in one namespace, as Velero's backup
// sync does: every Interval it lists the sessions under that namespace's prefix and creates an
// AgentSession for each committed one (meta.json stored) that no AgentSession of the namespace records.
// It never updates or deletes an AgentSession. It runs on the leader only.
type StoreSync struct {
	// Client lists the namespace's AgentSessions (the manager's cache) and creates the missing ones.
	Client   client.Client
	Stores   *Stores
	Recorder events.EventRecorder // nil sends no events
	Metrics  *Metrics
	// Namespace is where the AgentSessions are made; its prefix of the default store is listed.
	Namespace string
	// Interval is the time between two passes; the first pass runs at Start.
	Interval time.Duration
	Clock    clock.WithTicker
}

// Store sync: creates AgentSessions, never updates or deletes one.
// +kubebuilder:rbac:groups=agentrewind.io,resources=agentsessions,verbs=get;list;watch;create

// SyncResult is what one pass did.
type SyncResult struct {
	// Created names the AgentSessions created, in the order of their session ids.
	Created []string
	// Skipped names the session ids that were committed and unrecorded but got no AgentSession, with why.
	Skipped map[string]string
}

// NeedLeaderElection keeps the sync to the leader: two replicas would race to create the same objects.
func (s *StoreSync) NeedLeaderElection() bool { return true }

// Start runs a pass, then one every Interval, until ctx ends. A failed pass is logged and the next
// one tries again.
func (s *StoreSync) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("store-sync").WithValues("namespace", s.Namespace)
	ctx = ctrl.LoggerInto(ctx, log)
	ticker := s.Clock.NewTicker(s.Interval)
	defer ticker.Stop()
	for {
		if _, err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Store sync pass failed; the next pass tries again", "interval", s.Interval.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// Sync is one pass: list the committed sessions, create the AgentSessions that are missing.
func (s *StoreSync) Sync(ctx context.Context) (SyncResult, error) {
	res := SyncResult{Skipped: map[string]string{}}
	loc := s.Stores.LocationOf(&v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace}})
	store, err := s.Stores.Open(ctx, loc)
	if err != nil {
		return res, fmt.Errorf("opening %s: %w", loc, err)
	}
	ids, err := store.committedSessions(ctx)
	if err != nil {
		return res, fmt.Errorf("listing the sessions in %s: %w", loc, err)
	}
	var list v1alpha1.AgentSessionList
	if err := s.Client.List(ctx, &list, client.InNamespace(s.Namespace)); err != nil {
		return res, err
	}
	recorded, byName := map[string]string{}, map[string]*v1alpha1.AgentSession{}
	for i := range list.Items {
		as := &list.Items[i]
		byName[as.Name] = as
		if as.Spec.Storage.Bucket == "" {
			recorded[as.Spec.SessionID] = as.Name
		}
	}
	log := ctrl.LoggerFrom(ctx)
	defer func() { s.Metrics.sessionsCreated(len(res.Created)) }()
	for _, id := range ids {
		if _, ok := recorded[id]; ok {
			continue
		}
		name := syncName(id)
		if other, ok := byName[name]; ok {
			msg := fmt.Sprintf("session %s committed to %s gets no AgentSession: %s records session %s", id, loc, name, other.Spec.SessionID)
			res.Skipped[id] = msg
			log.Info("Skipped a committed session: its AgentSession name is taken", "sessionID", id, "agentSession", name, "records", other.Spec.SessionID)
			if s.Recorder != nil {
				s.Recorder.Eventf(other, nil, corev1.EventTypeWarning, ReasonSyncNameTaken, "Sync", "%s", msg)
			}
			continue
		}
		as, err := s.sessionFor(ctx, store, id, name, recorded)
		if err != nil {
			return res, err
		}
		if as == nil {
			continue // deleted since the listing
		}
		if err := s.Client.Create(ctx, as); err != nil {
			switch {
			case apierrors.IsAlreadyExists(err): // the cache lagged: the next pass sees it and decides
				continue
			case apierrors.IsInvalid(err):
				res.Skipped[id] = err.Error()
				log.Info("Skipped a committed session the API does not admit as an AgentSession", "sessionID", id, "error", err.Error())
				continue
			}
			return res, fmt.Errorf("creating AgentSession %s for session %s: %w", name, id, err)
		}
		res.Created = append(res.Created, name)
		recorded[id], byName[name] = name, as
		if s.Recorder != nil {
			s.Recorder.Eventf(as, nil, corev1.EventTypeNormal, "Synced", "Sync", "Created for session %s committed to %s", id, loc)
		}
	}
	if len(res.Created) > 0 {
		log.Info("Created AgentSessions for sessions committed to the store", "store", loc.String(), "agentSessions", res.Created)
	}
	return res, nil
}

// sessionFor is the AgentSession a committed session gets: its lineage from meta.json when it is a
// fork (the ForkRun that made it adopts it if the sync came first), none when meta.json cannot be
// decoded (its verification then says why); nil when the session was deleted since the listing. A
// store that fails is an error.
func (s *StoreSync) sessionFor(ctx context.Context, store *Store, id, name string, recorded map[string]string) (*v1alpha1.AgentSession, error) {
	as := &v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: map[string]string{LabelSynced: "true"}},
		Spec:       v1alpha1.AgentSessionSpec{SessionID: id},
	}
	meta, err := store.sessions.ReadMeta(ctx, id)
	var op *blobstore.OpError
	switch {
	case errors.Is(err, blobstore.ErrSessionNotFound), errors.Is(err, session.ErrNotCommitted):
		return nil, nil
	case errors.As(err, &op), err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("reading the meta.json of session %s: %w", id, err)
	case err != nil:
		return as, nil
	}
	if meta.Parent != "" && meta.ForkedAtStep != nil {
		parent, ok := recorded[meta.Parent]
		if !ok {
			parent = syncName(meta.Parent)
		}
		as.Spec.ParentRef, as.Spec.ForkedAtStep = v1alpha1.LocalObjectReference{Name: parent}, new(*meta.ForkedAtStep)
	}
	return as, nil
}

// committedSessions lists the ids of the sessions whose meta.json is stored, from one listing of
// keys (no meta.json is read), sorted.
func (st *Store) committedSessions(ctx context.Context) ([]string, error) {
	layout := st.sessions.Layout()
	objs, err := st.objects.List(ctx, layout.SessionsPrefix())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, o := range objs {
		if id, ok := layout.SessionIDFromMetaKey(o.Key); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// syncName is the AgentSession name of a session id: the id itself when it is a DNS label (at most 63
// characters, since the name becomes a label value on the session's Jobs), else the id lowercased,
// every other character a '-', cut to fit and followed by a hash of the id, so two ids never share a
// name.
func syncName(id string) string {
	if len(validation.IsDNS1123Label(id)) == 0 {
		return id
	}
	b := []byte(strings.ToLower(id))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])[:nameHash]
	name := strings.Trim(string(b), "-")
	if room := maxLabelValue - nameHash - 1; len(name) > room {
		name = strings.TrimRight(name[:room], "-")
	}
	if name == "" {
		return "session-" + h
	}
	return name + "-" + h
}
