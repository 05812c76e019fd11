package blobsweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The mark cache lets a sweep skip reading the root objects (events.jsonl, manifests) an earlier
// sweep read: sessions and manifests are immutable once stored, so what one references is known
// from its key and ETag. An entry is used only when the listed object has the same non-empty ETag
// and size as when it was read; anything else is read again. A cache that does not verify is
// ignored, never trusted in part. Only a sweep that holds the lock writes it.

// rootRefs is what one root object referenced, as read at one ETag and size.
type rootRefs struct {
	etag   string
	size   int64
	hashes [][32]byte
}

// usable says whether refs describe the object as listed now.
func (r rootRefs) usable(etag string, size int64) bool {
	return r.etag != "" && r.etag == etag && r.size == size
}

var cacheMagic = []byte("agentrewind-gc-marks/v1\n")

// maxCacheBytes bounds the cache read back: 10,000 sessions of 100 blobs take ~33 MB.
const maxCacheBytes = 1 << 30

// encodeCache writes the entries: the magic, a count, then per entry its key, ETag, size and hashes,
// and a SHA-256 of everything before it.
func encodeCache(entries map[string]rootRefs) []byte {
	var b bytes.Buffer
	b.Write(cacheMagic)
	b.Write(binary.AppendUvarint(nil, uint64(len(entries))))
	for key, e := range entries {
		for _, s := range []string{key, e.etag} {
			b.Write(binary.AppendUvarint(nil, uint64(len(s))))
			b.WriteString(s)
		}
		b.Write(binary.AppendUvarint(nil, uint64(e.size)))
		b.Write(binary.AppendUvarint(nil, uint64(len(e.hashes))))
		for _, h := range e.hashes {
			b.Write(h[:])
		}
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

var errBadCache = errors.New("the sweep's mark cache is damaged")

func decodeCache(data []byte) (map[string]rootRefs, error) {
	if len(data) < len(cacheMagic)+sha256.Size || !bytes.HasPrefix(data, cacheMagic) {
		return nil, fmt.Errorf("%w: not a mark cache of this version", errBadCache)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: its checksum does not match", errBadCache)
	}
	r := bytes.NewReader(body[len(cacheMagic):])
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(r.Len()) {
		return nil, fmt.Errorf("%w: bad entry count", errBadCache)
	}
	str := func() (string, error) {
		l, err := binary.ReadUvarint(r)
		if err != nil || l > uint64(r.Len()) {
			return "", errBadCache
		}
		s := make([]byte, l)
		_, err = io.ReadFull(r, s)
		return string(s), err
	}
	out := make(map[string]rootRefs, n)
	for range n {
		key, err := str()
		if err != nil {
			return nil, fmt.Errorf("%w: truncated entry", errBadCache)
		}
		etag, err := str()
		if err != nil {
			return nil, fmt.Errorf("%w: truncated entry", errBadCache)
		}
		size, err1 := binary.ReadUvarint(r)
		count, err2 := binary.ReadUvarint(r)
		if err1 != nil || err2 != nil || count > uint64(r.Len()/32) {
			return nil, fmt.Errorf("%w: truncated entry", errBadCache)
		}
		e := rootRefs{etag: etag, size: int64(size), hashes: make([][32]byte, count)}
		for i := range e.hashes {
			if _, err := io.ReadFull(r, e.hashes[i][:]); err != nil {
				return nil, fmt.Errorf("%w: truncated entry", errBadCache)
			}
		}
		out[key] = e
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errBadCache)
	}
	return out, nil
}
