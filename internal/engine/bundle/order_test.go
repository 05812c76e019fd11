package bundle

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestUnpackVerdictDoesNotDependOnEntryOrder: a blob whose content does not hash to its name is a
// *BlobHashError wherever it sits — before meta.json, between meta.json and events.jsonl, or after
// both — whether or not an event references it. An unreferenced one after events.jsonl used to be
// skipped unread, and the bundle unpacked with exit 0.
func TestUnpackVerdictDoesNotDependOnEntryOrder(t *testing.T) {
	refMeta, refEvents := minimalSession("expected")
	cases := []struct {
		name string
		rest []entry // a valid session's entries
		bad  entry
	}{
		{"unreferenced", []entry{validMeta, validEvents, validBlob}, file(blobName("claimed"), `"not the claimed bytes"`)},
		{"referenced", []entry{refMeta, refEvents}, file(blobName("expected"), `"tampered"`)},
	}
	for _, tc := range cases {
		for pos := 0; pos <= len(tc.rest); pos++ {
			t.Run(fmt.Sprintf("%s at %d", tc.name, pos), func(t *testing.T) {
				entries := slices.Insert(slices.Clone(tc.rest), pos, tc.bad)
				dest := emptyDir(t)
				_, err := Unpack(context.Background(), bytes.NewReader(bundleOf(t, entries...)), dest, Limits{})
				assertError(t, err, &BlobHashError{Name: tc.bad.hdr.Name, Got: sha(tc.bad.body)})
				if left := readTree(t, dest); len(left) != 0 {
					t.Fatalf("destination not restored, holds %v", keys(left))
				}
			})
		}
	}
	// A well-named unreferenced blob is dropped wherever it sits, with the same summary.
	stray := file(blobName(`"stray"`), `"stray"`)
	var first *PackSummary
	for pos := 0; pos <= 3; pos++ {
		entries := slices.Insert([]entry{validMeta, validEvents, validBlob}, pos, stray)
		sum, err := Unpack(context.Background(), bytes.NewReader(bundleOf(t, entries...)), emptyDir(t), Limits{})
		if err != nil {
			t.Fatalf("a stray blob at %d: %v", pos, err)
		}
		sum.RemovedStale = nil
		if first == nil {
			first = sum
		} else if fmt.Sprint(*sum) != fmt.Sprint(*first) {
			t.Fatalf("a stray blob at %d: summary %+v, at 0: %+v", pos, *sum, *first)
		}
	}
}
