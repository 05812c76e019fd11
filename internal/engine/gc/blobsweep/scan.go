package blobsweep

import "io"

// scanRefs calls add with every quoted 64-character lowercase hex string in r: every blob reference
// a session's events.jsonl or a checkpoint manifest holds, since both spell references as JSON
// strings of the SHA-256 digest. It is a superset of the references, by design: it needs no
// decoding, so it reads a log of any schema version, a damaged one, or one a newer build wrote,
// and never misses a reference a parser would have failed on. A digest that names no blob (an
// eventsHash, a fingerprint) only costs a set entry. It is also the cheapest correct read: one pass
// over the bytes, no JSON decoding, no blob fetched.
func scanRefs(r io.Reader, add func(hash string)) error {
	buf := make([]byte, 64<<10)
	var tok [64]byte
	n := -1 // hex characters since an opening quote; -1 when not inside a candidate token
	for {
		m, err := r.Read(buf)
		for _, b := range buf[:m] {
			switch {
			case b == '"':
				if n == 64 {
					add(string(tok[:]))
				}
				n = 0 // this quote may open the next token
			case n >= 0 && (b >= '0' && b <= '9' || b >= 'a' && b <= 'f'):
				if n < 64 {
					tok[n] = b
				}
				n++
			default:
				n = -1
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
