package session

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Session is a committed recording loaded into memory, verified and migrated to the current schema.
type Session struct {
	Dir    string
	Meta   Meta
	Events []Event
}

// BlobSource reads a blob by hash. The directory reader and the object store both provide one; the
// session package verifies what they return.
type BlobSource interface {
	ReadBlob(hash string) ([]byte, error)
}

// dirBlobs reads blobs from a session directory.
type dirBlobs string

func (d dirBlobs) ReadBlob(hash string) ([]byte, error) {
	return readCapped(filepath.Join(string(d), BlobsDir, hash), "blob "+hash, blobLimit)
}

// readCapped reads the file at path, refusing one over limit bytes (*TooLargeError) before reading
// it, or as soon as it grows past it.
func readCapped(path, what string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, &TooLargeError{What: what, Size: fi.Size(), Limit: limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{What: what, Partial: true, Limit: limit}
	}
	return data, nil
}

// Open loads the committed session in dir and checks it: meta.json (DecodeMeta, and against the log:
// session_start's meta and every line's schema version, *CorruptMetaError naming the field), the events
// hash and every blob's hash (*DigestMismatchError), every line's text and shape and the log's
// structure (*CorruptEventError naming the line, byte offset and field; see StructureChecker), and
// that every referenced blob is there (*MissingError) and decodes (*BlobRefError). It fails with
// ErrNotCommitted when meta.json is missing. A log without session_end is accepted — a crashed run is
// still worth resuming — and Session.CheckComplete tells it apart from a finished one.
func Open(dir string) (*Session, error) {
	meta, err := ReadMeta(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, EventsFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &MissingError{Object: path, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", dir, err)
	}
	defer f.Close()
	metaPath := filepath.Join(dir, MetaFile)
	check := NewStructureChecker(path)
	events, err := readLog(f, meta.EventsHash, path, func(ev *Event, written, line int, offset int64) error {
		if err := check.Add(ev, line, offset); err != nil {
			return err
		}
		return checkWrittenSchema(meta, metaPath, path, written, line)
	})
	if err != nil {
		return nil, err
	}
	if err := check.Finish(meta, metaPath); err != nil {
		return nil, err
	}
	if err := checkMetaAgainstStart(meta, events[0].Meta, metaPath); err != nil {
		return nil, err
	}
	if err := resolveAll(events, dirBlobs(dir), path); err != nil {
		return nil, err
	}
	for i := range events {
		meta.RestoreProvenance(&events[i])
	}
	return &Session{Dir: dir, Meta: meta, Events: events}, nil
}

// CheckComplete returns nil when the session's log ends with session_end, and an error wrapping
// ErrIncomplete when the run stopped before it was framed.
func (s *Session) CheckComplete() error {
	if n := len(s.Events); n > 0 && s.Events[n-1].Kind == KindSessionEnd {
		return nil
	}
	return fmt.Errorf("session %s: %w", s.Meta.ID, ErrIncomplete)
}

// ReadMeta reads and checks meta.json.
func ReadMeta(dir string) (Meta, error) {
	path := filepath.Join(dir, MetaFile)
	data, err := readCapped(path, path, metaLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, fmt.Errorf("%s: %w", dir, ErrNotCommitted)
	}
	if err != nil {
		return Meta{}, err
	}
	return DecodeMeta(data, path)
}

// ReadEvents decodes an events.jsonl stream, verifying that its bytes hash to wantHash (skipped when
// wantHash is empty) and resolving externalised fields and references through blobs (see Expander).
// When blobs is nil the events are returned in their stored form: enough to list the blobs they need
// (Blobs), not to replay.
// name labels errors. Each line is checked on its own; the log's structure is not (Open checks it,
// and a caller reading lines one at a time can use a StructureChecker).
func ReadEvents(r io.Reader, wantHash string, blobs BlobSource, name string) ([]Event, error) {
	events, err := readLog(r, wantHash, name, nil)
	if err != nil {
		return nil, err
	}
	if blobs != nil {
		if err := resolveAll(events, blobs, name); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// readLog decodes every line of r, passing each event to visit (when set) with the schema version
// it was written at, its line and its offset.
// After the first bad line it still reads to the end, so that a log edited after it was committed is
// reported as such rather than by the first line the edit broke.
func readLog(r io.Reader, wantHash, name string, visit func(ev *Event, written, line int, offset int64) error) ([]Event, error) {
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(r, h), 64<<10)
	fast := newFastDecoder()
	var long []byte // a line longer than br's buffer, put together
	var events []Event
	var offset int64
	var firstErr error
	for lineNo := 1; firstErr == nil; lineNo++ {
		// The line is only valid until the next read: decoding copies what an event keeps.
		line, err := br.ReadSlice('\n')
		var over int64 // the bytes of a line past lineLimit, skipped rather than held
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				if over > 0 || int64(len(long)+len(line)) > lineLimit {
					over += int64(len(line))
					continue
				}
				if cap(long)-len(long) < len(line) {
					// Doubling, where append grows a large slice by a quarter: the copies of a line
					// then add up to twice it, not five times.
					long = slices.Grow(long, max(len(line), cap(long)))
				}
				long = append(long, line...)
			}
			line = long
		}
		switch {
		case over > 0 || int64(len(line)) > lineLimit:
			firstErr = tooLongLine(name, lineNo, offset)
			offset += int64(len(line)) + over
		case len(line) > 0:
			firstErr = decodeLine(fast, line, lineNo, offset, name, visit, &events)
			offset += int64(len(line))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading at byte offset %d: %w", name, offset, err)
		}
	}
	if firstErr != nil {
		if _, err := io.Copy(io.Discard, br); err != nil {
			return nil, fmt.Errorf("%s: reading at byte offset %d: %w", name, offset, err)
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); wantHash != "" && got != wantHash {
		return nil, &DigestMismatchError{Object: name, Want: wantHash, Got: got}
	}
	return events, firstErr
}

func decodeLine(fast *fastDecoder, line []byte, lineNo int, offset int64, name string, visit func(*Event, int, int, int64) error, events *[]Event) error {
	if line[len(line)-1] != '\n' {
		return &CorruptEventError{File: name, Line: lineNo, Offset: offset, Err: errors.New("truncated: the last line has no newline")}
	}
	ev, written, err := fast.decode(line[:len(line)-1])
	if err != nil {
		return &CorruptEventError{File: name, Line: lineNo, Offset: offset, Field: fieldOf(err), Err: err}
	}
	if visit != nil {
		if err := visit(&ev, written, lineNo, offset); err != nil {
			return err
		}
	}
	*events = append(*events, ev)
	return nil
}

// fieldOf names the event field a decoding error is about, when it says.
func fieldOf(err error) string {
	var te *TextError
	if errors.As(err, &te) {
		field, _, _ := strings.Cut(te.Path, ".")
		field, _, _ = strings.Cut(field, "[")
		return field
	}
	var ue *json.UnmarshalTypeError
	if errors.As(err, &ue) {
		return ue.Field
	}
	return ""
}

func resolveAll(events []Event, blobs BlobSource, name string) error {
	x := NewExpander(blobs, name)
	for i := range events {
		if err := x.Resolve(&events[i]); err != nil {
			return err
		}
	}
	return nil
}

// ResolveBlobs loads every externalised field of ev from blobs, verifying each blob's hash and text.
// A blob the source reports as not existing is a *MissingError; a bad reference or undecodable content
// a *BlobRefError.
func ResolveBlobs(ev *Event, blobs BlobSource) error {
	for _, field := range slices.Sorted(maps.Keys(ev.Blobs)) {
		h := ev.Blobs[field]
		fail := func(err error) error { return &BlobRefError{Step: ev.Step, Field: field, Hash: h, Err: err} }
		f, ok := blobFieldByName(field)
		if !ok {
			return fail(errors.New("not a field that can be stored as a blob"))
		}
		if !ValidBlobHash(h) {
			return fail(errors.New("the reference is not a sha256 hex digest"))
		}
		if inline, err := f.get(ev); err != nil || inline != nil {
			return fail(errors.New("the field is also stored inline; a blob replaces it"))
		}
		data, err := blobs.ReadBlob(h)
		if errors.Is(err, fs.ErrNotExist) {
			return &MissingError{Object: BlobPath(h), Step: ev.Step, Field: field, Err: err}
		}
		if err != nil {
			return fmt.Errorf("step %d: reading blob %s for %s: %w", ev.Step, h, field, err)
		}
		if int64(len(data)) > blobLimit { // a source that does not cap what it reads
			return fail(&TooLargeError{What: "the blob", Size: int64(len(data)), Limit: blobLimit})
		}
		if err := VerifyBlob(h, data); err != nil {
			return err
		}
		if !json.Valid(data) {
			return fail(errors.New("the content is not JSON"))
		}
		if err := checkJSONText(data, blobTypes[field]); err != nil {
			return fail(err)
		}
		if err := f.set(ev, data); err != nil {
			return fail(err)
		}
	}
	return nil
}

// blobTypes are the Go types blob fields decode into, for checkJSONText; args and result are raw JSON.
var blobTypes = map[string]reflect.Type{
	"request":  reflect.TypeFor[Request](),
	"response": reflect.TypeFor[Response](),
	"stream":   reflect.TypeFor[[]Chunk](),
}

// VerifyBlob checks that data hashes to its name.
func VerifyBlob(hash string, data []byte) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != hash {
		return &DigestMismatchError{Object: BlobPath(hash), Want: hash, Got: got}
	}
	return nil
}

// Blobs returns the hashes of every blob the events reference (fields and definitions), sorted and
// without duplicates.
func Blobs(events []Event) []string {
	seen := map[string]bool{}
	var out []string
	add := func(h string) {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for _, ev := range events {
		for _, h := range ev.Blobs {
			add(h)
		}
		for _, h := range ev.DefBlobs {
			add(h)
		}
	}
	slices.Sort(out)
	return out
}
