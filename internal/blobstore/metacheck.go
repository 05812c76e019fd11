package blobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// meta.json is verified like every other object: a push stores its SHA-256 as the record
// meta.json.<sha256>.sha256 (sha256sum's format) just before meta.json itself, and every read checks
// that the meta.json it got has a record. A bit flip in meta.json, in transit or at rest, names a
// hash no record has, which fails the check instead of being written out. Older agentrewinds wrote
// one record, meta.json.sha256, that holds the hash; it is still read.

// ErrMetaUnverified is wrapped when a stored meta.json cannot be checked: its meta.json.sha256 is
// missing (a push by an older agentrewind) or is not a SHA-256 record.
var ErrMetaUnverified = errors.New("meta.json cannot be verified")

// verifyReads is how many times an object whose bytes do not match their hash is fetched before
// the damage is taken to be in the store rather than on the way.
const verifyReads = 3

// maxMetaSumSize bounds a meta.json.sha256 read: the record is 76 bytes.
const maxMetaSumSize = 1 << 10

// metaSumRecord is the meta.json.sha256 record of meta, as sha256sum writes it.
func metaSumRecord(meta []byte) []byte {
	return []byte(sha256Hex(meta) + "  " + session.MetaFile + "\n")
}

// parseMetaSum reads a meta.json.sha256 record; any byte other than sha256sum's is damage.
func parseMetaSum(data []byte) (string, bool) {
	h, rest, ok := strings.Cut(string(data), "  ")
	if !ok || rest != session.MetaFile+"\n" || !session.ValidBlobHash(h) {
		return "", false
	}
	return h, true
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// storedMeta is one reading of a session's meta.json and the records that verify it.
type storedMeta struct {
	data []byte // meta.json; nil when the store has none
	// sums are the SHA-256s the session's records vouch for: one when meta.json's own was found, all
	// of them otherwise (a push that lost a race for the id leaves one of its own until it cleans up).
	sums   []string
	sumErr error // why sums is empty: wraps ErrNotFound when there is no record
	// sumKey names the record meta.json should have, for messages.
	sumKey string
}

func (m storedMeta) verified() bool { return m.data != nil && m.vouches(sha256Hex(m.data)) }

// vouches says whether a record names the meta.json whose SHA-256 is h.
func (m storedMeta) vouches(h string) bool { return slices.Contains(m.sums, h) }

// readStoredMeta reads meta.json and looks for its record. While meta.json has none but other
// records exist it reads it again, up to verifyReads times in all, since a flip on the way goes away
// when fetched again and one at rest does not; done may end the reading early. It returns the last
// reading and how many were made; an error only when the store could not be read. A verified read
// costs a GET and a HEAD.
func (s *SessionStore) readStoredMeta(ctx context.Context, id string, done func(storedMeta) bool) (storedMeta, int, error) {
	metaKey := s.layout.SessionMeta(id)
	for n := 1; ; n++ {
		var m storedMeta
		data, err := s.readSmall(ctx, metaKey, maxMetaSize)
		if errors.Is(err, ErrNotFound) {
			return m, n, nil
		}
		if err != nil {
			return m, n, err
		}
		m.data = data
		h := sha256Hex(data)
		m.sumKey = s.layout.SessionMetaSum(id, h)
		_, err = s.objects.Stat(ctx, m.sumKey)
		switch {
		case err == nil:
			m.sums = []string{h}
			return m, n, nil
		case !errors.Is(err, ErrNotFound):
			return m, n, err
		}
		if m.sums, m.sumErr, err = s.listMetaSums(ctx, id); err != nil {
			return m, n, err
		}
		if m.verified() || errors.Is(m.sumErr, ErrNotFound) || (done != nil && done(m)) || n >= verifyReads {
			return m, n, nil
		}
	}
}

// listMetaSums lists the records of session id and returns the hashes they vouch for, reading the
// legacy record's bytes; sumErr says why there are none.
func (s *SessionStore) listMetaSums(ctx context.Context, id string) (sums []string, sumErr, err error) {
	objs, err := s.objects.List(ctx, s.layout.SessionMetaSumsPrefix(id))
	if err != nil {
		return nil, nil, err
	}
	for _, o := range objs {
		h, legacy, ok := s.layout.MetaSumFromKey(id, o.Key)
		switch {
		case !ok:
			continue
		case !legacy:
			sums = append(sums, h)
			continue
		}
		rec, err := s.readSmall(ctx, o.Key, maxMetaSumSize)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // removed since the listing
		case err != nil:
			return nil, nil, err
		}
		if h, ok := parseMetaSum(rec); ok {
			sums = append(sums, h)
		} else {
			sumErr = fmt.Errorf("%s is not a SHA-256 record of %s: it is damaged", s.name(o.Key), session.MetaFile)
		}
	}
	switch {
	case len(sums) > 0:
		return sums, nil, nil
	case sumErr != nil:
		return nil, sumErr, nil
	}
	return nil, fmt.Errorf("no record of %s under %s*: %w", session.MetaFile, s.name(s.layout.SessionMetaSumsPrefix(id)), ErrNotFound), nil
}

// checkStoredMeta turns a reading into the verified meta.json, or says why it is not.
func (s *SessionStore) checkStoredMeta(id string, m storedMeta, reads int) (session.Meta, error) {
	metaKey := s.layout.SessionMeta(id)
	switch {
	case errors.Is(m.sumErr, ErrNotFound):
		return session.Meta{}, fmt.Errorf("session %s in the store: %w: %s is missing (a push by an older agentrewind, or one interrupted just before its commit): push the session again from a machine that has it to add it",
			id, ErrMetaUnverified, s.name(m.sumKey))
	case m.sumErr != nil:
		return session.Meta{}, fmt.Errorf("session %s in the store: %w: %w (read %d times); push the session again from a machine that has it to repair it", id, ErrMetaUnverified, m.sumErr, reads)
	case !m.verified():
		return session.Meta{}, fmt.Errorf("%w (read %d times, never matching: the stored object is damaged, not just its transfer)",
			&session.DigestMismatchError{Object: s.name(metaKey), Want: strings.Join(m.sums, " or "), Got: sha256Hex(m.data)}, reads)
	}
	meta, err := session.DecodeMeta(m.data, s.name(metaKey))
	if err != nil {
		return session.Meta{}, err
	}
	if meta.ID != id {
		return session.Meta{}, fmt.Errorf("%s names session %q, not %q: the store is inconsistent; push the session again", s.name(metaKey), meta.ID, id)
	}
	return meta, nil
}

// decodeMetaStrict decodes meta.json with session.DecodeMeta, the one strict decoder every reader
// shares: unknown, missing, case-variant and repeated keys, trailing data and impossible values are
// a *session.CorruptMetaError naming the field.
func decodeMetaStrict(data []byte, name string) (session.Meta, error) {
	return session.DecodeMeta(data, name)
}
