package blobstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
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
	meta, err := decodeMetaStrict(m.data, s.name(metaKey))
	if err != nil {
		return session.Meta{}, err
	}
	if meta.ID != id {
		return session.Meta{}, fmt.Errorf("%s names session %q, not %q: the store is inconsistent; push the session again", s.name(metaKey), meta.ID, id)
	}
	return meta, nil
}

// decodeMetaStrict decodes meta.json refusing what encoding/json lets through: a key session.Meta
// does not have (encoding/json ignores it, and matches keys case-insensitively, so "CreatedAt"
// would pass for "createdAt"), a key it requires that is missing, a key given twice, and anything
// after the object. Keys are compared exactly with Meta's JSON names, so a field another package
// adds to Meta is accepted without a change here. Then session.DecodeMeta checks the values.
func decodeMetaStrict(data []byte, name string) (session.Meta, error) {
	if err := checkKeys(data, reflect.TypeFor[session.Meta](), ""); err != nil {
		return session.Meta{}, fmt.Errorf("%s: %w: it is damaged, or was written by another program", name, err)
	}
	return session.DecodeMeta(data, name)
}

// checkKeys checks that the JSON object raw has exactly the keys struct type t declares: every
// one without omitempty, no other, none twice; nested struct fields are checked the same way.
func checkKeys(raw []byte, t reflect.Type, path string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%sis not a JSON object", where(path))
	}
	fields := jsonFields(t)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s%v", where(path), err)
		}
		key := tok.(string) // an object's keys are strings
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return fmt.Errorf("%s%q: %v", where(path), key, err)
		}
		f, ok := fields[key]
		switch {
		case !ok:
			return fmt.Errorf("%sunknown key %q", where(path), key)
		case seen[key]:
			return fmt.Errorf("%skey %q given twice", where(path), key)
		}
		seen[key] = true
		if ft := derefType(f.typ); ft.Kind() == reflect.Struct && string(value) != "null" {
			if err := checkKeys(value, ft, path+key+"."); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fmt.Errorf("%s%v", where(path), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%sdata after the object", where(path))
	}
	for key, f := range fields {
		if f.required && !seen[key] {
			return fmt.Errorf("%smissing key %q", where(path), key)
		}
	}
	return nil
}

func where(path string) string {
	if path == "" {
		return ""
	}
	return strings.TrimSuffix(path, ".") + ": "
}

type jsonField struct {
	typ      reflect.Type
	required bool
}

// jsonFields maps the JSON names of struct type t's fields to their types; a field without
// omitempty is required.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			omit = omit || o == "omitempty" || o == "omitzero"
		}
		out[name] = jsonField{typ: f.Type, required: !omit}
	}
	return out
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
