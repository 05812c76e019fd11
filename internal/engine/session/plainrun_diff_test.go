package session

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"
)

// plainRunByByte is plainRun one byte at a time, the definition the word-at-a-time scan must match.
func plainRunByByte(src []byte, j int) int {
	for ; j < len(src); j++ {
		if b := src[j]; b == '"' || b == '\\' || b >= utf8.RuneSelf {
			break
		}
	}
	return j
}

// FuzzPlainRun checks plainRun against the byte-by-byte scan on any input and from any start, past
// the bytes it stops at and with several of them in one word.
func FuzzPlainRun(f *testing.F) {
	f.Add([]byte(`abcdefgh"ijklmnop`), 0)
	f.Add([]byte("abcdefg\\hijklmnop\x80"), 3)
	f.Add([]byte("0123456789abcdef\xc3\xa9"), 1)
	f.Add([]byte("ab\"\\\x7f\x80cdefghijklmnopq\x01\""), 5)
	f.Fuzz(func(t *testing.T, src []byte, j int) {
		if j < 0 || j > len(src) {
			return
		}
		if got, want := plainRun(src, j), plainRunByByte(src, j); got != want {
			t.Fatalf("plainRun(%q, %d) = %d, want %d", src, j, got, want)
		}
	})
}

// TestTextCheckNamesTheByteOfInvalidUTF8AfterAnASCIIRun puts an invalid UTF-8 byte after ASCII runs of
// every length around a word boundary, and a valid two-byte character in its place: the first is
// refused at its exact offset, the second accepted, and a string ending exactly at a word boundary
// reads whole.
func TestTextCheckNamesTheByteOfInvalidUTF8AfterAnASCIIRun(t *testing.T) {
	for n := 0; n <= 24; n++ {
		run := bytes.Repeat([]byte{'x'}, n)
		bad := append(append([]byte(`"`), run...), 0xFF, '"')
		var te *TextError
		if err := checkJSONText(bad, nil); !errors.As(err, &te) || te.Offset != 1+n {
			t.Errorf("run of %d then 0xFF: error %v, want a TextError at byte %d", n, err, 1+n)
		}
		good := append(append([]byte(`"`), run...), 0xC3, 0xA9, '"')
		if err := checkJSONText(good, nil); err != nil {
			t.Errorf("run of %d then é: %v, want no error", n, err)
		}
		c := jsonText{src: append(append([]byte(`"`), run...), '"')}
		s, next, err := c.str(0, true)
		if err != nil || s != string(run) || next != n+2 {
			t.Errorf("run of %d: str = %q, %d, %v; want the run, %d, no error", n, s, next, err, n+2)
		}
		unterminated := jsonText{src: append([]byte(`"`), run...)}
		if _, _, err := unterminated.str(0, true); !errors.As(err, &te) || te.Offset != n+1 {
			t.Errorf("run of %d unterminated: %v, want a TextError at byte %d", n, err, n+1)
		}
	}
}
