package session

import (
	"bytes"
	"testing"
)

// TestPlainRunStopsAtEveryByteStrMustSee puts each byte str must look at (a quote, a backslash, the
// lead and continuation bytes of a character, and U+007F and a control byte, which it must not stop
// at) at every position of a run of ASCII, so that each lane of the eight-byte step is tried.
func TestPlainRunStopsAtEveryByteStrMustSee(t *testing.T) {
	for _, special := range []struct {
		b    byte
		stop bool
	}{{'"', true}, {'\\', true}, {0xc3, true}, {0x80, true}, {0xff, true}, {0x7f, false}, {0x01, false}, {0x21, false}, {0x5b, false}} {
		for n := range 24 {
			for at := range n {
				src := bytes.Repeat([]byte("a"), n)
				src[at] = special.b
				for from := range at + 1 {
					want := n
					if special.stop {
						want = at
					}
					if got := plainRun(src, from); got != want {
						t.Fatalf("byte %#x at %d of %d, from %d: plainRun = %d, want %d", special.b, at, n, from, got, want)
					}
				}
			}
		}
	}
}
