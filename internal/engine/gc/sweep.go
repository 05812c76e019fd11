package gc

import (
	"encoding/hex"
	"time"
)

// Marked is the set of blob hashes the mark phase found referenced. Hashes are kept as 32 bytes, so a
// million of them fit in a few tens of MiB.
type Marked map[[32]byte]struct{}

// Add marks the blob with hex digest hash; a string that is not a SHA-256 hex digest is ignored.
func (m Marked) Add(hash string) bool {
	k, ok := blobKey(hash)
	if ok {
		m[k] = struct{}{}
	}
	return ok
}

// Has reports whether the blob with hex digest hash is marked.
func (m Marked) Has(hash string) bool {
	k, ok := blobKey(hash)
	if !ok {
		return false
	}
	_, marked := m[k]
	return marked
}

func blobKey(hash string) ([32]byte, bool) {
	var k [32]byte
	if len(hash) != 64 {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(hash)); err != nil {
		return k, false
	}
	return k, true
}

// Blob is a blob as listed from the store.
type Blob struct {
	Key          string
	Hash         string
	Size         int64
	LastModified time.Time
}

// BlobReason is why a sweep keeps or deletes a blob.
type BlobReason string

const (
	// BlobReferenced: a retained session or checkpoint references the blob; kept.
	BlobReferenced BlobReason = "Referenced"
	// BlobYoung: unreferenced, but stored after the safety margin began; kept, as it may belong to an
	// upload in flight.
	BlobYoung BlobReason = "UnreferencedYoung"
	// BlobAgeUnknown: unreferenced, but the listing gave no modification time; kept.
	BlobAgeUnknown BlobReason = "AgeUnknown"
	// BlobUnreferenced: unreferenced and older than the safety margin; deleted.
	BlobUnreferenced BlobReason = "Unreferenced"
)

// BlobDecision is the sweep's word on one unreferenced blob.
type BlobDecision struct {
	Blob
	Reason BlobReason `json:"reason"`
	Delete bool       `json:"delete"`
}

// SweepPlan is the outcome of Sweep over some listed blobs. Referenced blobs are only counted.
type SweepPlan struct {
	// Unreferenced are the listed blobs no root references, in listing order: deleted or kept young.
	Unreferenced []BlobDecision
	Referenced   int64
	// Candidates counts the unreferenced blobs; Young those the margin keeps; Delete the rest.
	Candidates int64
	Young      int64
	Delete     int64
	// FreedBytes is the size of the blobs deleted.
	FreedBytes int64
}

// Sweep decides, without I/O, which listed blobs a sweep deletes: only those the mark phase did not
// mark and whose last modification is older than margin before start. start must be a time taken
// before the mark phase began: a blob stored after it is younger than the margin whatever the sweep
// took, so an upload that marking could not yet see is never deleted. A negative margin is zero.
// Object stores report modification times truncated to the second, so the cutoff is too: a blob
// listed at second s was stored before s+1s, and only one listed before the cutoff's second is
// certainly older than the margin.
func Sweep(marked Marked, listed []Blob, margin time.Duration, start time.Time) SweepPlan {
	cutoff := Cutoff(start, margin)
	var p SweepPlan
	for _, b := range listed {
		if marked.Has(b.Hash) {
			p.Referenced++
			continue
		}
		d := BlobDecision{Blob: b}
		switch {
		case b.LastModified.IsZero():
			d.Reason = BlobAgeUnknown
		case !b.LastModified.Before(cutoff):
			d.Reason = BlobYoung
		default:
			d.Reason, d.Delete = BlobUnreferenced, true
		}
		p.Candidates++
		if d.Delete {
			p.Delete++
			p.FreedBytes += b.Size
		} else {
			p.Young++
		}
		p.Unreferenced = append(p.Unreferenced, d)
	}
	return p
}

// Cutoff is the modification time before which an unreferenced blob is old enough to delete: margin
// before start, truncated to the second.
func Cutoff(start time.Time, margin time.Duration) time.Time {
	return start.Add(-max(margin, 0)).Truncate(time.Second)
}

// Merge adds another page's plan to p.
func (p *SweepPlan) Merge(q SweepPlan) {
	p.Unreferenced = append(p.Unreferenced, q.Unreferenced...)
	p.Referenced += q.Referenced
	p.Candidates += q.Candidates
	p.Young += q.Young
	p.Delete += q.Delete
	p.FreedBytes += q.FreedBytes
}
