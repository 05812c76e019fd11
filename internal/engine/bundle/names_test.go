package bundle

import (
	"strings"
	"testing"
)

func TestEntryNameRules(t *testing.T) {
	blob := "blobs/" + strings.Repeat("0a", 32)
	tests := []struct {
		name       string
		wantReason string // from nameReason; "" means the path itself is safe
		wantFile   bool   // allowedFile: one of the session files
	}{
		{"meta.json", "", true},
		{"events.jsonl", "", true},
		{blob, "", true},
		{"blobs/", "", false},
		{"", reasonEmpty, false},
		{"meta.json\x00", reasonNULAt(9), false},
		{`blobs\x`, reasonBackslash, false},
		{"/etc/passwd", reasonAbsolute, false},
		{"..", reasonEscapes, false},
		{"blobs/../meta.json", reasonEscapes, false}, // resolves inside, refused anyway: no ".." at all
		{"./meta.json", "", false},
		{"blobs//" + blob[6:], "", false},
		{blob[:len(blob)-1], "", false},
		{blob + "0", "", false},
		{"vault.enc", "", false},
		{"a..b", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nameReason(tt.name); got != tt.wantReason {
				t.Errorf("nameReason(%q) = %q, want %q", tt.name, got, tt.wantReason)
			}
			if got := allowedFile(tt.name); got != tt.wantFile {
				t.Errorf("allowedFile(%q) = %v, want %v", tt.name, got, tt.wantFile)
			}
		})
	}
}
