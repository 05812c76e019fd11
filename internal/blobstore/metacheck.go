package blobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// meta.json is verified like every other object: a push stores its SHA-256 in meta.json.sha256
// (sha256sum's format) just before meta.json itself, and every read checks one against the other.
// A bit flip in either, in transit or at rest, fails the check instead of being written out; a
// flip that leaves the record parseable names another hash, which fails it as well.

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

// storedMeta is one reading of a session's meta.json and the record that verifies it.
type storedMeta struct {
	data   []byte // meta.json; nil when the store has none
	sum    string // the SHA-256 meta.json.sha256 names; "" when it is missing or damaged
	sumErr error  // why sum is "": wraps ErrNotFound when there is no record
}

func (m storedMeta) verified() bool {
	return m.data != nil && m.sum != "" && sha256Hex(m.data) == m.sum
}

// readStoredMeta reads meta.json and meta.json.sha256. While both exist and disagree it reads
// them again, up to verifyReads times in all, since a flip on the way goes away when fetched
// again and one at rest does not; done may end the reading early. It returns the last reading and
// how many were made; an error only when the store could not be read.
func (s *SessionStore) readStoredMeta(ctx context.Context, id string, done func(storedMeta) bool) (storedMeta, int, error) {
	metaKey, sumKey := s.layout.SessionMeta(id), s.layout.SessionMetaSum(id)
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
		rec, err := s.readSmall(ctx, sumKey, maxMetaSumSize)
		switch {
		case errors.Is(err, ErrNotFound):
			m.sumErr = err
		case err != nil:
			return m, n, err
		default:
			if h, ok := parseMetaSum(rec); ok {
				m.sum = h
			} else {
				m.sumErr = fmt.Errorf("%s is not a SHA-256 record of %s: it is damaged", s.name(sumKey), session.MetaFile)
			}
		}
		if m.verified() || errors.Is(m.sumErr, ErrNotFound) || (done != nil && done(m)) || n >= verifyReads {
			return m, n, nil
		}
	}
}

// checkStoredMeta turns a reading into the verified meta.json, or says why it is not.
func (s *SessionStore) checkStoredMeta(id string, m storedMeta, reads int) (session.Meta, error) {
	metaKey := s.layout.SessionMeta(id)
	switch {
	case errors.Is(m.sumErr, ErrNotFound):
		return session.Meta{}, fmt.Errorf("session %s in the store: %w: %s is missing (a push by an older agentrewind, or one interrupted just before its commit): push the session again from a machine that has it to add it",
			id, ErrMetaUnverified, s.name(s.layout.SessionMetaSum(id)))
	case m.sumErr != nil:
		return session.Meta{}, fmt.Errorf("session %s in the store: %w: %w (read %d times); push the session again from a machine that has it to repair it", id, ErrMetaUnverified, m.sumErr, reads)
	case !m.verified():
		return session.Meta{}, fmt.Errorf("%w (read %d times, never matching: the stored object is damaged, not just its transfer)",
			&session.DigestMismatchError{Object: s.name(metaKey), Want: m.sum, Got: sha256Hex(m.data)}, reads)
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
