package session

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	return os.ReadFile(filepath.Join(string(d), BlobsDir, hash))
}

// Open loads the committed session in dir. It fails with ErrNotCommitted when meta.json is missing,
// with *DigestMismatchError when events.jsonl or a blob does not match its recorded hash, and with
// *CorruptEventError naming the line and byte offset of a line it cannot read.
func Open(dir string) (*Session, error) {
	meta, err := ReadMeta(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", dir, err)
	}
	defer f.Close()
	events, err := ReadEvents(f, meta.EventsHash, dirBlobs(dir), filepath.Join(dir, EventsFile))
	if err != nil {
		return nil, err
	}
	return &Session{Dir: dir, Meta: meta, Events: events}, nil
}

// ReadMeta reads and checks meta.json.
func ReadMeta(dir string) (Meta, error) {
	path := filepath.Join(dir, MetaFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, fmt.Errorf("%s: %w", dir, ErrNotCommitted)
	}
	if err != nil {
		return Meta{}, err
	}
	return DecodeMeta(data, path)
}

// DecodeMeta parses meta.json bytes; name is used in errors.
func DecodeMeta(data []byte, name string) (Meta, error) {
	var meta Meta
	if err := json.Unmarshal(data, &meta); err != nil {
		return Meta{}, fmt.Errorf("%s: %w", name, err)
	}
	if meta.SchemaVersion > CurrentSchemaVersion {
		return Meta{}, fmt.Errorf("%s: %w", name, &MigrationError{From: meta.SchemaVersion, To: CurrentSchemaVersion})
	}
	if !ValidBlobHash(meta.EventsHash) {
		return Meta{}, fmt.Errorf("%s: eventsHash %q is not a sha256 hex digest", name, meta.EventsHash)
	}
	return meta, nil
}

// ReadEvents decodes an events.jsonl stream, verifying that its bytes hash to wantHash (skipped when
// wantHash is empty) and resolving externalised fields through blobs (skipped when blobs is nil).
// name labels errors.
func ReadEvents(r io.Reader, wantHash string, blobs BlobSource, name string) ([]Event, error) {
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(r, h), 64<<10)
	var events []Event
	var offset int64
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				return nil, &CorruptEventError{File: name, Line: lineNo, Offset: offset, Err: errors.New("truncated: the last line has no newline")}
			}
			ev, derr := decodeEvent(bytes.TrimSuffix(line, []byte("\n")))
			if derr != nil {
				return nil, &CorruptEventError{File: name, Line: lineNo, Offset: offset, Err: derr}
			}
			events = append(events, ev)
			offset += int64(len(line))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading at byte offset %d: %w", name, offset, err)
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); wantHash != "" && got != wantHash {
		return nil, &DigestMismatchError{Object: name, Want: wantHash, Got: got}
	}
	if blobs != nil {
		for i := range events {
			if err := ResolveBlobs(&events[i], blobs); err != nil {
				return nil, err
			}
		}
	}
	return events, nil
}

// ResolveBlobs loads every externalised field of ev from blobs, verifying each blob's hash.
func ResolveBlobs(ev *Event, blobs BlobSource) error {
	for field, h := range ev.Blobs {
		f, ok := blobFieldByName(field)
		if !ok {
			return fmt.Errorf("step %d: unknown externalised field %q", ev.Step, field)
		}
		if !ValidBlobHash(h) {
			return fmt.Errorf("step %d: blob reference %q for %s is not a sha256 hex digest", ev.Step, h, field)
		}
		data, err := blobs.ReadBlob(h)
		if err != nil {
			return fmt.Errorf("step %d: reading blob %s for %s: %w", ev.Step, h, field, err)
		}
		if err := VerifyBlob(h, data); err != nil {
			return err
		}
		if err := f.set(ev, data); err != nil {
			return fmt.Errorf("step %d: decoding blob %s for %s: %w", ev.Step, h, field, err)
		}
	}
	return nil
}

// VerifyBlob checks that data hashes to its name.
func VerifyBlob(hash string, data []byte) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != hash {
		return &DigestMismatchError{Object: BlobPath(hash), Want: hash, Got: got}
	}
	return nil
}

// Blobs returns the hashes of every blob the events reference, sorted and without duplicates.
func Blobs(events []Event) []string {
	seen := map[string]bool{}
	var out []string
	for _, ev := range events {
		for _, h := range ev.Blobs {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return out
}
