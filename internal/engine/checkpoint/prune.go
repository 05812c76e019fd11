package checkpoint

import (
	"math"
	"math/bits"
	"sort"
)

// PrunePolicy bounds how many checkpoints are kept (seed D7/D9). Zero disables a rule. Guards are a
// class of their own: they never count against the captures a session keeps.
type PrunePolicy struct {
	// KeepPerSession keeps the newest N captures of each session, and apart from them its newest N
	// guards.
	KeepPerSession int `json:"keepPerSession,omitempty"`
	// MaxBytes bounds the sum of the incremental bytes of the kept checkpoints. Guards go first. It is
	// a soft quota: the newest capture of a session is never deleted, even when it alone exceeds it.
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// PruneRule names the rule a deletion is attributed to.
type PruneRule string

const (
	RuleKeepPerSession PruneRule = "keepPerSession"
	RuleMaxBytes       PruneRule = "maxBytes"
)

// Deletion is one checkpoint the plan deletes and the rule that caused it.
type Deletion struct {
	ID               string    `json:"id"`
	Session          string    `json:"session,omitempty"`
	Guard            bool      `json:"guard,omitempty"`
	Rule             PruneRule `json:"rule"`
	IncrementalBytes int64     `json:"incrementalBytes"`
	// GitCommit is a git checkpoint's commit: deleting the checkpoint leaves its ref to DropGitRef.
	GitCommit string `json:"gitCommit,omitempty"`
}

// PrunePlan is the outcome of Prune: deletions oldest first, and what is kept.
type PrunePlan struct {
	Delete    []Deletion `json:"delete"`
	KeptBytes int64      `json:"keptBytes"`
	// OverQuota is true when the kept newest-per-session captures alone exceed MaxBytes.
	OverQuota bool `json:"overQuota,omitempty"`
}

// pruneClass groups checkpoints that are ranked together: a session's captures, or its guards.
type pruneClass struct {
	session string
	guard   bool
}

// Prune plans which checkpoints to delete, without I/O: first each session's captures and guards
// beyond KeepPerSession, then, oldest first across sessions, guards and after them captures until the
// kept incremental bytes fit MaxBytes. The newest capture of every session is never deleted.
func Prune(list []Summary, p PrunePolicy) PrunePlan {
	sorted := append([]Summary(nil), list...)
	SortNewestFirst(sorted)
	rank := map[string]int{} // position within its class, 0 = newest
	perClass := map[pruneClass]int{}
	for _, s := range sorted {
		c := pruneClass{s.Anchor.Session, s.Guard}
		rank[s.ID] = perClass[c]
		perClass[c]++
	}
	var plan PrunePlan
	var keptBytes byteSum
	var kept []Summary // newest first
	for _, s := range sorted {
		if p.KeepPerSession > 0 && rank[s.ID] >= p.KeepPerSession {
			plan.Delete = append(plan.Delete, Deletion{ID: s.ID, Session: s.Anchor.Session, Guard: s.Guard, Rule: RuleKeepPerSession, IncrementalBytes: s.IncrementalBytes, GitCommit: s.GitCommit})
			continue
		}
		kept = append(kept, s)
		keptBytes.add(s.IncrementalBytes)
	}
	if p.MaxBytes > 0 {
		for _, guards := range []bool{true, false} {
			for i := len(kept) - 1; i >= 0 && keptBytes.over(p.MaxBytes); i-- {
				s := kept[i]
				if s.Guard != guards || (!s.Guard && rank[s.ID] == 0) {
					continue
				}
				plan.Delete = append(plan.Delete, Deletion{ID: s.ID, Session: s.Anchor.Session, Guard: s.Guard, Rule: RuleMaxBytes, IncrementalBytes: s.IncrementalBytes, GitCommit: s.GitCommit})
				keptBytes.sub(s.IncrementalBytes)
			}
		}
		plan.OverQuota = keptBytes.over(p.MaxBytes)
	}
	plan.KeptBytes = keptBytes.int64()
	order := map[string]int{}
	for i, s := range sorted {
		order[s.ID] = i
	}
	sort.SliceStable(plan.Delete, func(i, j int) bool { return order[plan.Delete[i].ID] > order[plan.Delete[j].ID] })
	return plan
}

// byteSum adds up incremental bytes without overflowing: 128 bits, a negative count taken as none.
// An int64 total wrapped past 2^63-1 to a negative number that fit any quota, so nothing was pruned.
type byteSum struct{ hi, lo uint64 }

func (s *byteSum) add(n int64) {
	var c uint64
	s.lo, c = bits.Add64(s.lo, uint64(max(n, 0)), 0)
	s.hi += c
}

func (s *byteSum) sub(n int64) {
	var b uint64
	s.lo, b = bits.Sub64(s.lo, uint64(max(n, 0)), 0)
	s.hi -= b
}

// over reports whether the sum exceeds limit.
func (s byteSum) over(limit int64) bool { return s.hi > 0 || s.lo > uint64(max(limit, 0)) }

// int64 is the sum, 2^63-1 when it is larger.
func (s byteSum) int64() int64 {
	if s.hi > 0 || s.lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(s.lo)
}
