package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
)

// DecodeMeta is the one strict decoder of meta.json bytes, shared by every reader (directories,
// bundles, the object store); name is used in errors. It refuses, as a *CorruptMetaError naming the
// field, what encoding/json would let through: a key Meta does not declare (or declares in another
// case), a required key that is missing, a key given twice, anything after the object, invalid text;
// and values no recorder writes: an empty id, a schemaVersion below 1, an unknown fingerprintMode, a
// negative forkedAtStep or one without a parent, a session that is its own parent, an eventsHash that
// is not a sha256 hex digest, a negative event count. A schema newer than this build is a
// *MigrationError.
func DecodeMeta(data []byte, name string) (Meta, error) {
	fail := func(field string, format string, args ...any) (Meta, error) {
		return Meta{}, &CorruptMetaError{File: name, Field: field, Err: fmt.Errorf(format, args...)}
	}
	if err := checkMetaKeys(data, metaType, ""); err != nil {
		return Meta{}, &CorruptMetaError{File: name, Field: err.field, Err: err}
	}
	var meta Meta
	if err := json.Unmarshal(data, &meta); err != nil {
		return Meta{}, &CorruptMetaError{File: name, Err: err}
	}
	if err := checkJSONText(data, metaType); err != nil {
		return Meta{}, &CorruptMetaError{File: name, Err: err}
	}
	switch {
	case meta.SchemaVersion > CurrentSchemaVersion:
		return Meta{}, fmt.Errorf("%s: %w", name, &MigrationError{From: meta.SchemaVersion, To: CurrentSchemaVersion})
	case meta.SchemaVersion < 1:
		return fail("schemaVersion", "%d is not a schema version (1 to %d)", meta.SchemaVersion, CurrentSchemaVersion)
	case meta.ID == "":
		return fail("id", "the session id is empty")
	case !validFingerprintMode(meta.FingerprintMode):
		return fail("fingerprintMode", "%q is not a fingerprint mode (%s or %s)", meta.FingerprintMode, fingerprint.Strict, fingerprint.Structural)
	case meta.ForkedAtStep != nil && *meta.ForkedAtStep < 0:
		return fail("forkedAtStep", "%d is negative", *meta.ForkedAtStep)
	case meta.ForkedAtStep != nil && meta.Parent == "":
		return fail("forkedAtStep", "is set, but the session has no parent")
	case meta.Parent != "" && meta.Parent == meta.ID:
		return fail("parent", "the session %q names itself as its parent", meta.ID)
	case !ValidBlobHash(meta.EventsHash):
		return fail("eventsHash", "%q is not a sha256 hex digest", meta.EventsHash)
	case meta.Events < 0:
		return fail("events", "%d is negative", meta.Events)
	}
	last := int64(0)
	for i, r := range meta.InheritedSteps {
		if meta.ForkedAtStep == nil || r.From <= last || r.To < r.From || r.To >= *meta.ForkedAtStep {
			return fail("inheritedSteps", "[%d] %d to %d: inherited steps are increasing, disjoint ranges after step 0 and before forkedAtStep, in a fork", i, r.From, r.To)
		}
		last = r.To
	}
	return meta, nil
}

var metaType = reflect.TypeFor[Meta]()

// validFingerprintMode reports whether mode is one a recorder writes; empty means strict.
func validFingerprintMode(mode string) bool {
	switch fingerprint.Mode(mode) {
	case "", fingerprint.Strict, fingerprint.Structural:
		return true
	}
	return false
}

// metaKeyError is a key-level problem of meta.json; field is the dotted path of the key at fault.
type metaKeyError struct {
	field string
	msg   string
}

func (e *metaKeyError) Error() string { return e.msg }

// checkMetaKeys checks that the JSON object raw has exactly the keys struct type t declares: every
// one without omitempty, no other (compared exactly: encoding/json would match "CreatedAt" to
// createdAt), none twice, nothing after the object; nested struct fields are checked the same way.
// Keys are Meta's JSON names, so a field added to Meta is accepted without a change here.
func checkMetaKeys(raw []byte, t reflect.Type, path string) *metaKeyError {
	fail := func(key, format string, args ...any) *metaKeyError {
		field := strings.TrimSuffix(path+key, ".")
		msg := fmt.Sprintf(format, args...)
		if path != "" {
			msg = strings.TrimSuffix(path, ".") + ": " + msg
		}
		return &metaKeyError{field: field, msg: msg + ": it is damaged, or was written by another program"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fail("", "is not a JSON object")
	}
	fields := metaFields(t)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail("", "%v", err)
		}
		key := tok.(string) // an object's keys are strings
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return fail(key, "%q: %v", key, err)
		}
		f, ok := fields[key]
		switch {
		case !ok:
			return fail(key, "unknown key %q", key)
		case seen[key]:
			return fail(key, "key %q given twice", key)
		}
		seen[key] = true
		if ft := schemaType(f.typ); ft != nil && ft.Kind() == reflect.Struct && string(value) != "null" {
			if err := checkMetaKeys(value, ft, path+key+"."); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fail("", "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail("", "data after the object")
	}
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		if fields[key].required && !seen[key] {
			return fail(key, "missing key %q", key)
		}
	}
	return nil
}

type metaField struct {
	typ      reflect.Type
	required bool
}

// metaFields maps the JSON names of struct type t's fields to their types; a field without
// omitempty is required.
func metaFields(t reflect.Type) map[string]metaField {
	out := map[string]metaField{}
	for f := range t.Fields() {
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
		for o := range strings.SplitSeq(opts, ",") {
			omit = omit || o == "omitempty" || o == "omitzero"
		}
		out[name] = metaField{typ: f.Type, required: !omit}
	}
	return out
}
