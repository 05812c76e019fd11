package blobsweep

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestScanRefsFindsQuotedDigestsOnly(t *testing.T) {
	h1 := strings.Repeat("ab", 32)
	h2 := strings.Repeat("0f", 32)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"an event's blob fields", `{"step":1,"blobs":{"request":"` + h1 + `","result":"` + h2 + `"}}` + "\n", []string{h1, h2}},
		{"a manifest entry", `{"path":"a","type":"file","size":3,"sha256":"` + h1 + `"}`, []string{h1}},
		{"unquoted", h1, nil},
		{"too long", `"` + h1 + `0"`, nil},
		{"too short", `"` + h1[:63] + `"`, nil},
		{"upper case is not a blob name", `"` + strings.ToUpper(h1) + `"`, nil},
		{"inside a longer string", `"x` + h1 + `"`, nil},
		{"adjacent strings", `["` + h1 + `","` + h2 + `"]`, []string{h1, h2}},
		{"a damaged line still yields its references", `{"blobs":{"result":"` + h1 + `"` + "\x00garbage", []string{h1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			// One byte at a time: a digest split across reads is still found.
			if err := scanRefs(iotest.OneByteReader(strings.NewReader(tt.in)), func(h string) { got = append(got, h) }); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("refs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScanRefsReportsAFailedRead(t *testing.T) {
	err := scanRefs(iotest.TimeoutReader(strings.NewReader(strings.Repeat("x", 70<<10))), func(string) {})
	if err == nil || err == io.EOF {
		t.Fatalf("err = %v, want the read failure", err)
	}
}
