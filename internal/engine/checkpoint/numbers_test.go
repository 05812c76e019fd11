package checkpoint

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestAManifestWithImpossibleByteCountsIsRefused: listing and pruning add up the sizes and the
// incremental bytes manifests claim. A stored manifest claiming more incremental bytes than its files
// hold, a negative count, or sizes adding up past 2^63-1 wrapped those sums (a byte quota that a
// negative total always fit, a list showing negative bytes); such a manifest is refused as corrupt
// like any other tampering, and the store's other checkpoints still load.
func TestAManifestWithImpossibleByteCountsIsRefused(t *testing.T) {
	file := func(p string, size int64) Entry {
		return Entry{Path: p, Type: TypeFile, Mode: 0o644, Size: size, Hash: strings.Repeat("a", 64)}
	}
	link := Entry{Path: "l", Type: TypeSymlink, Target: "four"}
	for name, m := range map[string]*Manifest{
		"incremental bytes past 2^63-1 of a small file": {Files: []Entry{file("a", 3)}, IncrementalBytes: math.MaxInt64},
		"negative incremental bytes":                    {Files: []Entry{file("a", 3)}, IncrementalBytes: math.MinInt64},
		"more incremental bytes than the files hold":    {Files: []Entry{file("a", 3), link}, IncrementalBytes: 8},
		"sizes adding up past 2^63-1":                   {Files: []Entry{file("a", math.MaxInt64/2+1), file("b", math.MaxInt64/2+1)}},
		"incremental bytes without a file":              {Files: []Entry{}, IncrementalBytes: 1},
	} {
		t.Run(name, func(t *testing.T) {
			m.SchemaVersion, m.Reason = SchemaVersion, "capture"
			var me *ManifestError
			if err := m.Validate(); !errors.As(err, &me) {
				t.Fatalf("Validate: %v, want a ManifestError", err)
			}
			st := OpenStore(t.TempDir())
			id, data, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Manifests.Put(ctx, id, data); err != nil {
				t.Fatal(err)
			}
			if list, bad, err := st.Scan(ctx); err != nil || len(list) != 0 || len(bad) != 1 {
				t.Fatalf("Scan: %v %v %v, want the manifest unreadable", list, bad, err)
			}
		})
	}
	ok := &Manifest{SchemaVersion: SchemaVersion, Files: []Entry{file("a", 3), link}, IncrementalBytes: 7}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a manifest whose incremental bytes are its file and link target: %v", err)
	}
}

// TestPruneSumsBytesPastTwoToThe63: the kept bytes are summed without wrapping. A total past 2^63-1
// used to turn negative, fit every quota and delete nothing.
func TestPruneSumsBytesPastTwoToThe63(t *testing.T) {
	list := []Summary{sum("big", "s1", 3, math.MaxInt64-1), sum("old", "s1", 2, 10), sum("other", "s2", 1, 10)}
	plan := Prune(list, PrunePolicy{MaxBytes: 100})
	if len(plan.Delete) != 1 || plan.Delete[0].ID != "old" || plan.Delete[0].Rule != RuleMaxBytes {
		t.Fatalf("deleted %+v, want only the older capture of s1 by maxBytes", plan.Delete)
	}
	if plan.KeptBytes != math.MaxInt64 || !plan.OverQuota {
		t.Fatalf("kept %d bytes, over quota %v; want 2^63-1 (saturated) and over quota", plan.KeptBytes, plan.OverQuota)
	}
	// Below the limit the sum is exact.
	if plan := Prune([]Summary{sum("a", "s1", 2, 40), sum("b", "s1", 1, 70)}, PrunePolicy{MaxBytes: 100}); plan.KeptBytes != 40 || len(plan.Delete) != 1 || plan.OverQuota {
		t.Fatalf("exact sum: %+v", plan)
	}
}
