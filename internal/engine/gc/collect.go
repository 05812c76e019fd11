package gc

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// Reason is the machine-readable cause of a session's reachability: the root that keeps a reachable
// session, or why a collectible one is collectible. Reasons taken from a resume verdict keep the
// resume package's codes (ResumableRetained, DivergedRetained, CompleteCollectible, ...).
type Reason string

// The roots that keep a session whatever its resume verdict, in the order Decision.Reason picks
// from when several apply.
const (
	// ReasonPinned: the session's retention pins it.
	ReasonPinned Reason = "Pinned"
	// ReasonRecording: the session is still being recorded.
	ReasonRecording Reason = "Recording"
	// ReasonReadByForkRun: a ForkRun that has not finished reads the session.
	ReasonReadByForkRun Reason = "ReadByUnfinishedForkRun"
	// ReasonCheckpointAnchor: a retained Checkpoint is anchored in the session.
	ReasonCheckpointAnchor Reason = "AnchorOfRetainedCheckpoint"
	// ReasonLedgerUnreadable: the session's ledger could not be read, so no verdict can be trusted.
	ReasonLedgerUnreadable Reason = "LedgerUnreadable"
	// ReasonLedgerUnsound: the session's ledger folded unsoundly (corrupt or untagged records).
	ReasonLedgerUnsound Reason = "LedgerUnsound"
	// ReasonVerdictPending: no resume verdict has been computed for the session yet.
	ReasonVerdictPending Reason = "VerdictPending"
	// ReasonParentOfRetainedFork: a fork of the session (or of one of its forks) is retained; its
	// prefix is served from this session's log.
	ReasonParentOfRetainedFork Reason = "ParentOfRetainedFork"
)

// Ledger is what the gatherer could make of a session's intent ledger.
type Ledger string

const (
	// LedgerOK: the ledger was read and folded; the verdict rests on it.
	LedgerOK Ledger = ""
	// LedgerUnreadable: the ledger could not be read (a newer schema, a missing or damaged object).
	LedgerUnreadable Ledger = "Unreadable"
	// LedgerUnsound: the ledger was read but its fold is unsound.
	LedgerUnsound Ledger = "Unsound"
)

// Session is what the GC knows about one session.
type Session struct {
	ID string
	// Verdict is the session's reachability verdict (resume.Reach over its ResumePlan); nil when none
	// has been computed yet.
	Verdict *resume.ReachabilityVerdict
	// CollectibleSince is when the session's verdict became collectible (the ResumePlan's evaluation
	// time). The grace runs from it; a zero time means unknown, and an unknown age never elapses.
	CollectibleSince time.Time
	// Pinned is the retention policy's pin (a label or spec.retention.pin).
	Pinned bool
	// Grace overrides Policy.Grace for this session (spec.retention.gracePeriod); a negative one is
	// taken as zero.
	Grace *time.Duration
	// Recording is true while the session is being recorded.
	Recording bool
	// UnfinishedForkReaders counts the ForkRuns that read the session and have not finished.
	UnfinishedForkReaders int
	// Parent is the session this one was forked from ("" for a recorded run).
	Parent string
	// Ledger says whether the ledger the verdict rests on could be read and folded soundly.
	Ledger Ledger
}

// Checkpoint is a Checkpoint as the GC sees it.
type Checkpoint struct {
	ID string
	// Session is the session the checkpoint is anchored in.
	Session string
	// Retained is true when the checkpoint is kept for a reason of its own (pinned, being restored,
	// the anchor of a ResumePlan's rewind), not merely because the prune plan has not removed it yet:
	// a checkpoint that is only waiting for pruning goes with its session.
	Retained bool
}

// Population is every session and checkpoint the GC pass looks at.
type Population struct {
	Sessions    []Session
	Checkpoints []Checkpoint
}

// Policy is the GC's configuration.
type Policy struct {
	// Grace is how long a session stays after it became collectible (--gc-grace); negative is zero.
	Grace time.Duration
}

// Decision is the GC's word on one session.
type Decision struct {
	Session      string              `json:"session"`
	Reachability resume.Reachability `json:"reachability"`
	// Reason is the root that keeps a reachable session (the first of Roots), or why a collectible
	// one is collectible.
	Reason Reason `json:"reason"`
	// Roots are every root that keeps a reachable session, in precedence order; empty when collectible.
	Roots   []Reason `json:"roots,omitempty"`
	Message string   `json:"message"`
	// Delete is true when the session is collectible and its grace is over: the GC deletes it now.
	// It is never true for a reachable session.
	Delete bool `json:"delete"`
	// DeleteAt is when a collectible session's grace ends (zero when its age is unknown).
	DeleteAt time.Time `json:"deleteAt,omitzero"`
}

// Plan is the outcome of Collect: one decision per session, in the population's order.
type Plan struct {
	Decisions   []Decision `json:"decisions"`
	Reachable   int        `json:"reachable"`
	Collectible int        `json:"collectible"`
	Deleted     int        `json:"deleted"`
}

// Collect decides, without I/O, which sessions are reachable and which are deleted now. A session is
// collectible only when its resume verdict is collectible (resume.Reach: COMPLETE, or UNRESUMABLE for a
// reason this build trusts) and no root keeps it: a pin, a recording in progress, an unfinished
// ForkRun reading it, a retained Checkpoint anchored in it, an unreadable or unsound ledger, a
// verdict not yet computed, or a retained fork descending from it. A collectible session is deleted
// once its grace (the session's own, else the policy's) has passed since it became collectible. A
// reachable session is never deleted, however old.
func Collect(pop Population, policy Policy, now time.Time) Plan {
	direct := make([][]Reason, len(pop.Sessions))
	index := make(map[string]int, len(pop.Sessions))
	for i, s := range pop.Sessions {
		index[s.ID] = i
	}
	anchored := map[string]bool{}
	for _, c := range pop.Checkpoints {
		if c.Retained {
			anchored[c.Session] = true
		}
	}
	for i, s := range pop.Sessions {
		direct[i] = roots(s, anchored[s.ID])
	}
	// A retained fork keeps its parent, and so every ancestor: walk up from each retained session.
	// visited guards against a cycle of parent references, which a damaged population could hold.
	viaFork := make([]bool, len(pop.Sessions))
	for i := range pop.Sessions {
		if len(direct[i]) == 0 {
			continue
		}
		visited := map[int]bool{i: true}
		for p, ok := index[pop.Sessions[i].Parent]; ok && !visited[p]; p, ok = index[pop.Sessions[p].Parent] {
			visited[p] = true
			viaFork[p] = true
		}
	}
	plan := Plan{Decisions: make([]Decision, 0, len(pop.Sessions))}
	for i, s := range pop.Sessions {
		rs := direct[i]
		if viaFork[i] {
			rs = append(rs, ReasonParentOfRetainedFork)
		}
		d := Decision{Session: s.ID}
		if len(rs) > 0 {
			d.Reachability, d.Reason, d.Roots = resume.Reachable, rs[0], rs
			d.Message = reachableMessage(s, rs)
			plan.Reachable++
		} else {
			d = collectible(s, policy, now)
			plan.Collectible++
			if d.Delete {
				plan.Deleted++
			}
		}
		plan.Decisions = append(plan.Decisions, d)
	}
	return plan
}

// roots lists what keeps s, before forks are considered, in precedence order.
func roots(s Session, anchored bool) []Reason {
	var rs []Reason
	add := func(ok bool, r Reason) {
		if ok {
			rs = append(rs, r)
		}
	}
	add(s.Pinned, ReasonPinned)
	add(s.Recording, ReasonRecording)
	add(s.UnfinishedForkReaders > 0, ReasonReadByForkRun)
	add(anchored, ReasonCheckpointAnchor)
	add(s.Ledger == LedgerUnreadable, ReasonLedgerUnreadable)
	add(s.Ledger == LedgerUnsound, ReasonLedgerUnsound)
	// Any ledger state this build does not know is as good as unreadable: fail closed.
	add(s.Ledger != LedgerOK && s.Ledger != LedgerUnreadable && s.Ledger != LedgerUnsound, ReasonLedgerUnreadable)
	switch {
	case s.Verdict == nil:
		rs = append(rs, ReasonVerdictPending)
	case !s.Verdict.Collectible():
		rs = append(rs, Reason(s.Verdict.Reason))
	}
	return rs
}

func reachableMessage(s Session, rs []Reason) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		switch r {
		case ReasonPinned:
			parts = append(parts, "pinned by its retention policy")
		case ReasonRecording:
			parts = append(parts, "still recording")
		case ReasonReadByForkRun:
			parts = append(parts, fmt.Sprintf("read by %d unfinished ForkRun(s)", s.UnfinishedForkReaders))
		case ReasonCheckpointAnchor:
			parts = append(parts, "the anchor of a retained Checkpoint")
		case ReasonLedgerUnreadable:
			parts = append(parts, "its ledger cannot be read")
		case ReasonLedgerUnsound:
			parts = append(parts, "its ledger is unsound")
		case ReasonVerdictPending:
			parts = append(parts, "no resume verdict yet")
		case ReasonParentOfRetainedFork:
			parts = append(parts, "a retained fork descends from it")
		default:
			parts = append(parts, s.Verdict.Message)
		}
	}
	return "retained regardless of age: " + strings.Join(parts, "; ")
}

func collectible(s Session, policy Policy, now time.Time) Decision {
	d := Decision{Session: s.ID, Reachability: resume.Collectible, Reason: Reason(s.Verdict.Reason)}
	grace := policy.Grace
	if s.Grace != nil {
		grace = *s.Grace
	}
	grace = max(grace, 0)
	if s.CollectibleSince.IsZero() {
		d.Message = s.Verdict.Message + "; not deleted: when it became collectible is unknown"
		return d
	}
	d.DeleteAt = s.CollectibleSince.Add(grace)
	d.Delete = !now.Before(d.DeleteAt)
	if d.Delete {
		d.Message = fmt.Sprintf("%s; collectible since %s, past its grace of %s", s.Verdict.Message, s.CollectibleSince.UTC().Format(time.RFC3339), grace)
	} else {
		d.Message = fmt.Sprintf("%s; deleted after %s, when its grace of %s ends", s.Verdict.Message, d.DeleteAt.UTC().Format(time.RFC3339), grace)
	}
	return d
}

// DeletedSessions returns the ids of the sessions the plan deletes, sorted.
func (p Plan) DeletedSessions() []string {
	var ids []string
	for _, d := range p.Decisions {
		if d.Delete {
			ids = append(ids, d.Session)
		}
	}
	slices.Sort(ids)
	return ids
}
