package gc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

func ledgerState() ledger.State { return ledger.State{} }

// world is a generated population with the blobs each session and checkpoint references.
type world struct {
	pop        Population
	policy     Policy
	now        time.Time
	sessionRef map[string][]string // session -> blob hashes
	ckptRef    map[string][]string // checkpoint -> blob hashes
	blobs      []Blob              // every blob in the store, orphans included
}

func hashOf(i int) string {
	s := sha256.Sum256([]byte(fmt.Sprint("blob", i)))
	return hex.EncodeToString(s[:])
}

// generate makes a random population: verdicts of every kind (and none), ages on both sides of the
// grace, pins, recordings, fork readers, fork trees (and the odd parent cycle), checkpoints retained
// or not, and a pool of blobs shared between sessions and checkpoints, with orphans old and young.
func generate(rng *rand.Rand) world {
	w := world{now: t0, policy: Policy{Grace: time.Duration(rng.IntN(72)) * time.Hour},
		sessionRef: map[string][]string{}, ckptRef: map[string][]string{}}
	verdicts := []*resume.ReachabilityVerdict{nil, complete, complete, unresumable, unresumable, resumable, diverged, newerSchema,
		verdict(resume.Unresumable, resume.ReasonUnsoundFold), verdict("SOMETHING-NEW", "")}
	ledgers := []Ledger{LedgerOK, LedgerOK, LedgerOK, LedgerOK, LedgerUnreadable, LedgerUnsound}
	pool := 5 + rng.IntN(60)
	pick := func() []string {
		var out []string
		for range rng.IntN(6) {
			out = append(out, hashOf(rng.IntN(pool)))
		}
		return out
	}
	n := 1 + rng.IntN(40)
	for i := range n {
		s := Session{ID: fmt.Sprint("s", i), Verdict: verdicts[rng.IntN(len(verdicts))],
			Pinned: rng.IntN(8) == 0, Recording: rng.IntN(10) == 0, Ledger: ledgers[rng.IntN(len(ledgers))]}
		if rng.IntN(8) == 0 {
			s.UnfinishedForkReaders = 1 + rng.IntN(3)
		}
		if rng.IntN(10) != 0 { // an unknown age now and then
			s.CollectibleSince = w.now.Add(-time.Duration(rng.IntN(24*10)) * time.Hour).Add(time.Duration(rng.IntN(3)) * time.Hour)
		}
		if rng.IntN(4) == 0 {
			s.Grace = dur(time.Duration(rng.IntN(100)-10) * time.Hour)
		}
		switch r := rng.IntN(10); {
		case r < 4 && i > 0:
			s.Parent = fmt.Sprint("s", rng.IntN(i))
		case r == 4:
			s.Parent = fmt.Sprint("s", rng.IntN(n)) // possibly later, possibly itself: cycles
		case r == 5:
			s.Parent = "gone" // a parent no longer in the population
		}
		w.pop.Sessions = append(w.pop.Sessions, s)
		w.sessionRef[s.ID] = pick()
	}
	for i := range rng.IntN(12) {
		c := Checkpoint{ID: fmt.Sprint("c", i), Session: fmt.Sprint("s", rng.IntN(n)), Retained: rng.IntN(3) == 0}
		w.pop.Checkpoints = append(w.pop.Checkpoints, c)
		w.ckptRef[c.ID] = pick()
	}
	for i := range pool + rng.IntN(10) { // hashes past the pool are orphans nobody ever referenced
		w.blobs = append(w.blobs, Blob{Key: "blobs/sha256/" + hashOf(i)[:2] + "/" + hashOf(i), Hash: hashOf(i), Size: int64(1 + rng.IntN(1000)),
			LastModified: w.now.Add(-time.Duration(rng.IntN(48*60)) * time.Minute)})
	}
	return w
}

// keptByOracle is the reachability rule restated independently of Collect: a session is kept when
// something keeps it directly, or when it is an ancestor of a session kept directly.
func keptByOracle(w world) map[string]bool {
	byID := map[string]Session{}
	for _, s := range w.pop.Sessions {
		byID[s.ID] = s
	}
	anchored := map[string]bool{}
	for _, c := range w.pop.Checkpoints {
		anchored[c.Session] = anchored[c.Session] || c.Retained
	}
	direct := func(s Session) bool {
		return s.Pinned || s.Recording || s.UnfinishedForkReaders > 0 || anchored[s.ID] || s.Ledger != LedgerOK ||
			s.Verdict == nil || s.Verdict.Reachability != resume.Collectible
	}
	kept := map[string]bool{}
	for _, s := range w.pop.Sessions {
		if !direct(s) {
			continue
		}
		kept[s.ID] = true
		seen := map[string]bool{s.ID: true}
		for p, ok := byID[s.Parent]; ok && !seen[p.ID]; p, ok = byID[p.Parent] {
			seen[p.ID] = true
			kept[p.ID] = true
		}
	}
	return kept
}

func TestCollectAndSweepPropertiesOverGeneratedPopulations(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 2026))
	var deletedSessions, keptSessions, deletedBlobs int
	for iter := range 3000 {
		w := generate(rng)
		plan := Collect(w.pop, w.policy, w.now)
		kept := keptByOracle(w)
		if len(plan.Decisions) != len(w.pop.Sessions) {
			t.Fatalf("population %d: %d decisions for %d sessions", iter, len(plan.Decisions), len(w.pop.Sessions))
		}
		deleted := map[string]bool{}
		for i, d := range plan.Decisions {
			s := w.pop.Sessions[i]
			if d.Session != s.ID {
				t.Fatalf("population %d: decision %d is about %s, want %s", iter, i, d.Session, s.ID)
			}
			grace := w.policy.Grace
			if s.Grace != nil {
				grace = *s.Grace
			}
			pastGrace := !s.CollectibleSince.IsZero() && !w.now.Before(s.CollectibleSince.Add(max(grace, 0)))
			switch {
			case kept[s.ID] && (d.Delete || d.Reachability != resume.Reachable):
				t.Fatalf("population %d: %s is reachable by the rule but decided %+v", iter, s.ID, d)
			case !kept[s.ID] && d.Reachability != resume.Collectible:
				t.Fatalf("population %d: %s is collectible by the rule but decided %+v", iter, s.ID, d)
			case !kept[s.ID] && d.Delete != pastGrace:
				t.Fatalf("population %d: %s collectible, past its grace %v, but Delete=%v", iter, s.ID, pastGrace, d.Delete)
			case d.Reachability == resume.Reachable && (d.Reason == "" || len(d.Roots) == 0 || d.Roots[0] != d.Reason):
				t.Fatalf("population %d: %s kept without naming its root: %+v", iter, s.ID, d)
			}
			if d.Delete {
				deleted[s.ID] = true
				deletedSessions++
			} else {
				keptSessions++
			}
		}

		// The blob sweep after the GC pass: every blob a retained session or checkpoint references is
		// marked. Checkpoints of deleted sessions go with them, unless retained for their own sake.
		marked := Marked{}
		needed := map[string]bool{}
		for _, s := range w.pop.Sessions {
			if !deleted[s.ID] {
				for _, h := range w.sessionRef[s.ID] {
					marked.Add(h)
					needed[h] = true
				}
			}
		}
		for _, c := range w.pop.Checkpoints {
			if c.Retained || !deleted[c.Session] {
				for _, h := range w.ckptRef[c.ID] {
					marked.Add(h)
					needed[h] = true
				}
			}
		}
		margin := time.Duration(rng.IntN(24*60)) * time.Minute
		start := w.now
		sp := Sweep(marked, w.blobs, margin, start)
		gone := map[string]bool{}
		for _, d := range sp.Unreferenced {
			if d.Delete {
				gone[d.Hash] = true
				deletedBlobs++
			}
		}
		for _, b := range w.blobs {
			young := !b.LastModified.Before(start.Add(-margin))
			oldEnough := b.LastModified.Before(Cutoff(start, margin)) // the margin, at a listing's whole seconds
			switch {
			case gone[b.Hash] && needed[b.Hash]:
				t.Fatalf("population %d: blob %s is referenced by a retained session or checkpoint but deleted", iter, b.Hash)
			case gone[b.Hash] && young:
				t.Fatalf("population %d: blob %s is younger than the margin (%s) but deleted", iter, b.Hash, b.LastModified)
			case !gone[b.Hash] && !needed[b.Hash] && oldEnough:
				t.Fatalf("population %d: blob %s is unreferenced and older than the margin but kept", iter, b.Hash)
			}
		}
		if sp.Referenced+sp.Candidates != int64(len(w.blobs)) || sp.Young+sp.Delete != sp.Candidates {
			t.Fatalf("population %d: counts do not add up: %+v over %d blobs", iter, sp, len(w.blobs))
		}
	}
	// The generator must exercise both sides, or the properties above hold vacuously.
	if deletedSessions < 1000 || keptSessions < 1000 || deletedBlobs < 1000 {
		t.Fatalf("generator too narrow: %d sessions deleted, %d kept, %d blobs deleted", deletedSessions, keptSessions, deletedBlobs)
	}
	t.Logf("%d sessions deleted, %d kept, %d blobs deleted", deletedSessions, keptSessions, deletedBlobs)
}
