package fingerprint

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// cgj is U+034F COMBINING GRAPHEME JOINER. golang.org/x/text's NFC follows the Stream-Safe Text Format:
// after 30 combining marks in a row it inserts a CGJ, so "a" + 31×U+0300 normalises to the same text as
// "a" + 30×U+0300 + U+034F + U+0300. Two different strings would then share a fingerprint.
const cgj = "\u034f"

// nfc is the NFC form of s, and false when normalising it inserted a CGJ: such a string (a run of more
// than 30 combining marks, which no language writes) is refused rather than made equal to another.
func nfc(s string) (string, bool) {
	out := norm.NFC.String(s)
	if out == s {
		return out, true
	}
	return out, strings.Count(out, cgj) == strings.Count(s, cgj)
}
