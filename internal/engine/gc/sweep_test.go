package gc

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSweepSafetyMarginOnAFakeClock(t *testing.T) {
	start := t0 // taken before marking began
	margin := 2 * time.Hour
	referenced := hashOf(0)
	marked := Marked{}
	marked.Add(referenced)
	tests := []struct {
		name     string
		hash     string
		modified time.Time
		want     BlobReason
	}{
		{"referenced and ancient", referenced, start.Add(-1000 * time.Hour), BlobReferenced},
		{"unreferenced, older than the margin", hashOf(1), start.Add(-margin - time.Second), BlobUnreferenced},
		{"unreferenced, exactly the margin old", hashOf(2), start.Add(-margin), BlobYoung},
		{"unreferenced, inside the margin", hashOf(3), start.Add(-time.Minute), BlobYoung},
		{"uploaded after the mark began", hashOf(4), start.Add(time.Minute), BlobYoung},
		{"no modification time", hashOf(5), time.Time{}, BlobAgeUnknown},
	}
	// Listings give whole seconds: with a start 0.6s past a second, a blob listed at the cutoff's
	// second may have been stored after the exact cutoff, so it is kept.
	subsecond := start.Add(600 * time.Millisecond)
	tests = append(tests, []struct {
		name     string
		hash     string
		modified time.Time
		want     BlobReason
	}{
		{"listed in the cutoff's second", hashOf(6), subsecond.Add(-margin).Truncate(time.Second), BlobYoung},
		{"listed the second before the cutoff", hashOf(7), subsecond.Add(-margin - time.Second).Truncate(time.Second), BlobUnreferenced},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := start
			if tt.hash == hashOf(6) || tt.hash == hashOf(7) {
				at = subsecond
			}
			p := Sweep(marked, []Blob{{Hash: tt.hash, Size: 10, LastModified: tt.modified}}, margin, at)
			got := BlobReferenced
			if len(p.Unreferenced) == 1 {
				got = p.Unreferenced[0].Reason
				if p.Unreferenced[0].Delete != (got == BlobUnreferenced) {
					t.Errorf("Delete = %v for reason %s", p.Unreferenced[0].Delete, got)
				}
			}
			if got != tt.want {
				t.Errorf("reason = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSweepCountsAndMerges(t *testing.T) {
	marked := Marked{}
	marked.Add(hashOf(0))
	page1 := []Blob{{Hash: hashOf(0), Size: 5, LastModified: t0.Add(-time.Hour * 100)}, {Hash: hashOf(1), Size: 7, LastModified: t0.Add(-time.Hour * 100)}}
	page2 := []Blob{{Hash: hashOf(2), Size: 11, LastModified: t0}, {Hash: hashOf(3), Size: 13, LastModified: t0.Add(-time.Hour * 100)}}
	p := Sweep(marked, page1, time.Hour, t0)
	p.Merge(Sweep(marked, page2, time.Hour, t0))
	p.Unreferenced = nil
	want := SweepPlan{Referenced: 1, Candidates: 3, Young: 1, Delete: 2, FreedBytes: 20}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

func TestMarkedIgnoresWhatIsNotADigest(t *testing.T) {
	m := Marked{}
	if m.Add("not-a-hash") || m.Add(hashOf(1)[:63]) || len(m) != 0 {
		t.Fatalf("marked a non-digest: %v", m)
	}
	if !m.Add(hashOf(1)) || !m.Has(hashOf(1)) || m.Has(hashOf(2)) {
		t.Fatal("Marked does not hold what was added")
	}
}
