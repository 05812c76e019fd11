package session

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"

	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
	"github.com/agentrewind/agentrewind/internal/fsutil"
)

// Writer records a session into a directory. Events are appended to events.jsonl as they are
// written, so a crash leaves a readable prefix; Close writes meta.json last, which commits the session.
// A Writer is safe for concurrent use.
type Writer struct {
	mu        sync.Mutex
	dir       string
	meta      Meta
	threshold int
	file      *os.File
	buf       *bufio.Writer
	hash      hash.Hash
	events    int64
	vaultHash string
	blobs     map[string]bool
	defs      *interner
	parent    map[int64]*Event // the forked session's events before the fork step, by step
	inherited []StepRange
	lastStep  int64
	closed    bool
	// unsynced are the blobs written and not yet synced to disk. A blob is written on the recording's
	// request path, where an fsync each (milliseconds) would cost more than the rest of the call; the
	// session is committed by Close alone, which syncs them before meta.json: a crash before leaves an
	// uncommitted session, and a committed one names no blob that is not on disk.
	unsynced []string
}

// WriterOptions tune a Writer.
type WriterOptions struct {
	// BlobThreshold overrides the size above which fields become blobs (default BlobThreshold).
	BlobThreshold int
	// Parent, for a fork (meta.Parent and meta.ForkedAtStep set), are the logical events of the
	// session it forks. A step before the fork step that the fork served from the parent (its event is
	// the parent's but for its time, latency and provenance "recorded") is written as the parent's
	// event, time included, so that the two logs share the line byte for byte, and with it the
	// segments the store keeps (copy-on-write forks); meta.json's inheritedSteps gives those events
	// their provenance back when they are read.
	Parent []Event
}

// Create starts a session in dir, creating it if needed. It refuses a directory that already holds a
// committed session or an events log, so nothing recorded is ever overwritten.
func Create(dir string, meta Meta, opts WriterOptions) (*Writer, error) {
	if meta.ID == "" {
		return nil, errors.New("session: meta.ID is required")
	}
	if dir == "" {
		return nil, errors.New("session: a directory to record into is required")
	}
	if err := checkOutsideSessions(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, BlobsDir), 0o755); err != nil {
		return nil, fmt.Errorf("session: creating %s: %w", dir, err)
	}
	for _, name := range []string{MetaFile, EventsFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return nil, fmt.Errorf("session: %s already holds %s; record into an empty directory", dir, name)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	threshold := opts.BlobThreshold
	if threshold <= 0 {
		threshold = BlobThreshold
	}
	meta.SchemaVersion = CurrentSchemaVersion
	w := &Writer{dir: dir, meta: meta, threshold: threshold, file: f, buf: bufio.NewWriter(f),
		hash: sha256.New(), blobs: map[string]bool{}}
	w.defs = newInterner(threshold, w.putBlobLocked)
	if meta.Parent != "" && meta.ForkedAtStep != nil {
		w.parent = map[int64]*Event{}
		for i := range opts.Parent {
			if p := &opts.Parent[i]; p.Step > 0 && p.Step < *meta.ForkedAtStep {
				w.parent[p.Step] = p
			}
		}
	}
	return w, nil
}

// checkOutsideSessions refuses a dir that lies inside a session directory, symbolic links and ".."
// resolved: a fork recorded into its parent's blobs/ would break the parent. The dir itself holding
// a session is refused by Create's own check. The part of dir that does not exist yet is taken as
// written.
func checkOutsideSessions(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("session: resolving %s: %w", dir, err)
	}
	existing, rest := abs, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return fmt.Errorf("session: resolving %s: %w", dir, err)
	}
	resolved = filepath.Join(resolved, rest)
	for a := filepath.Dir(resolved); ; a = filepath.Dir(a) {
		if holdsSession(a) {
			return &InsideSessionError{Dir: dir, Resolved: resolved, Session: a}
		}
		if filepath.Dir(a) == a {
			return nil
		}
	}
}

// holdsSession reports whether dir is a session directory: committed (meta.json and events.jsonl) or
// being recorded (events.jsonl and blobs/). Either file alone may be anything's.
func holdsSession(dir string) bool {
	exists := func(name string) (os.FileInfo, bool) {
		fi, err := os.Stat(filepath.Join(dir, name))
		return fi, err == nil
	}
	if _, ok := exists(EventsFile); !ok {
		return false
	}
	if _, ok := exists(MetaFile); ok {
		return true
	}
	fi, ok := exists(BlobsDir)
	return ok && fi.IsDir()
}

// Dir is the session directory.
func (w *Writer) Dir() string { return w.dir }

// Append writes ev as the next line of events.jsonl in its stored form: content the log already
// holds is referred to (dedup.go), a stream's text is kept once (streamtext.go), and any field still
// large is externalised to a blob. The caller owns ordering: events are written in the order Append is
// called.
func (w *Writer) Append(ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errors.New("session: append after close")
	}
	ev.SchemaVersion = CurrentSchemaVersion
	if ev.Author == "" {
		ev.Author = DefaultAuthor(ev.Kind)
	}
	if ev.Defs != nil || ev.Joins != nil || ev.Lists != nil || ev.Refs != nil || ev.StreamText != nil {
		return fmt.Errorf("session: the event at step %d carries stored-form fields (defs, joins, lists, refs, streamText); append the event as the reader returns it", ev.Step)
	}
	if err := w.defs.checkText(&ev); err != nil {
		return fmt.Errorf("session: the event at step %d cannot be stored as it is: %w", ev.Step, err)
	}
	// Nothing of a line that fails before it is written may stay: not its definitions, not its
	// inherited step.
	undo, inherited := w.defs.begin(), slices.Clone(w.inherited)
	line, err := w.storedLine(ev)
	if err != nil {
		undo()
		w.inherited = inherited
		return err
	}
	line = append(line, '\n')
	if _, err := w.buf.Write(line); err != nil {
		return fmt.Errorf("session: writing %s: %w", EventsFile, err)
	}
	w.hash.Write(line)
	w.events++
	w.lastStep = ev.Step
	return nil
}

// storedLine is ev's line in its stored form, without its newline.
func (w *Writer) storedLine(ev Event) ([]byte, error) {
	ev = w.inherit(ev)
	ev.DefBlobs = nil // the reader's list of what the line it read defined; this line defines its own
	var err error
	if ev.Stream, ev.StreamText, err = spliceStream(ev.Stream, ev.Response); err != nil {
		return nil, fmt.Errorf("session: storing the stream at step %d: %w", ev.Step, err)
	}
	if err := w.defs.intern(&ev); err != nil {
		return nil, fmt.Errorf("session: storing step %d: %w", ev.Step, err)
	}
	if err := w.externalize(&ev); err != nil {
		return nil, err
	}
	// Never repaired: a string field that is not UTF-8 (a note, a tool name) is refused, not recorded
	// as something else.
	line, err := jsonscan.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("session: encoding event at step %d: %w", ev.Step, err)
	}
	if n := int64(len(line)) + 1; n > lineLimit { // a reader would refuse it
		return nil, fmt.Errorf("session: the event at step %d: %w", ev.Step, &TooLargeError{What: "its line", Size: n, Limit: lineLimit})
	}
	return line, nil
}

// inherit returns the parent's event in place of ev when ev is the parent's step served again (see
// WriterOptions.Parent), and ev otherwise.
func (w *Writer) inherit(ev Event) Event {
	p := w.parent[ev.Step]
	if p == nil || ev.Kind == KindSessionStart || p.Provenance != "" && p.Provenance != ProvenanceRecorded ||
		ev.Provenance != "" && ev.Provenance != ProvenanceRecorded || ev.Kind.IsBoundary() != (ev.Provenance == ProvenanceRecorded) {
		return ev
	}
	same := ev
	same.TS, same.LatencyMs, same.Provenance, same.Blobs, same.DefBlobs = p.TS, p.LatencyMs, p.Provenance, p.Blobs, p.DefBlobs
	if p.Author != "" && same.Author == "" {
		same.Author = p.Author
	}
	if !reflect.DeepEqual(same, *p) {
		return ev
	}
	stored := *p
	stored.Provenance, stored.Blobs, stored.DefBlobs = "", nil, nil
	stored.SchemaVersion, stored.Author = ev.SchemaVersion, ev.Author
	if n := len(w.inherited); n > 0 && w.inherited[n-1].To == w.lastStep {
		w.inherited[n-1].To = ev.Step
	} else {
		w.inherited = append(w.inherited, StepRange{From: ev.Step, To: ev.Step})
	}
	return stored
}

// PutBlob stores data as a content-addressed blob and returns its hash.
func (w *Writer) PutBlob(data []byte) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.putBlobLocked(data)
}

func (w *Writer) putBlobLocked(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	if int64(len(data)) > blobLimit { // a reader would refuse it
		return "", fmt.Errorf("session: storing blob %s: %w", h, &TooLargeError{What: "the blob", Size: int64(len(data)), Limit: blobLimit})
	}
	if w.blobs[h] {
		return h, nil
	}
	path := filepath.Join(w.dir, BlobsDir, h)
	if err := writeFile(path, data, false); err != nil {
		return "", fmt.Errorf("session: storing blob %s: %w", h, err)
	}
	w.blobs[h] = true
	w.unsynced = append(w.unsynced, path)
	return h, nil
}

// syncBlobs makes the blobs written so far, and then their names in the blobs directory, durable. The
// files are synced several at a time: the file system commits concurrent syncs together, where one
// after the other each waits for a commit of its own.
func (w *Writer) syncBlobs() error {
	if len(w.unsynced) == 0 {
		return nil
	}
	paths := make(chan string)
	errs := make([]error, blobSyncers)
	var wg sync.WaitGroup
	for i := range blobSyncers {
		wg.Go(func() {
			for path := range paths {
				if err := syncPath(path); err != nil && errs[i] == nil {
					errs[i] = fmt.Errorf("session: syncing %s: %w", path, err)
				}
			}
		})
	}
	for _, path := range w.unsynced {
		paths <- path
	}
	close(paths)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := syncPath(filepath.Join(w.dir, BlobsDir)); err != nil {
		return fmt.Errorf("session: syncing %s: %w", BlobsDir, err)
	}
	w.unsynced = nil
	return nil
}

// blobSyncers is how many blobs Close syncs at once.
const blobSyncers = 16

// syncPath fsyncs a file or directory.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = fsync(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// externalize moves every field of ev whose encoding exceeds the threshold into a blob.
func (w *Writer) externalize(ev *Event) error {
	for _, f := range blobFields {
		data, err := f.get(ev)
		if err != nil {
			return fmt.Errorf("session: encoding %s at step %d: %w", f.name, ev.Step, err)
		}
		if len(data) <= w.threshold {
			continue
		}
		h, err := w.putBlobLocked(data)
		if err != nil {
			return err
		}
		if ev.Blobs == nil {
			ev.Blobs = map[string]string{}
		}
		ev.Blobs[f.name] = h
		f.clear(ev)
	}
	return nil
}

// SetVault stores the sealed vault and records its hash for meta.json. Bundles never carry it; the
// object store keeps it beside the session, still sealed, its key held elsewhere.
func (w *Writer) SetVault(sealed []byte) error {
	if err := writeFileAtomic(filepath.Join(w.dir, VaultFile), sealed); err != nil {
		return err
	}
	sum := sha256.Sum256(sealed)
	w.mu.Lock()
	w.vaultHash = hex.EncodeToString(sum[:])
	w.mu.Unlock()
	return nil
}

// Abort closes the events log without committing: the directory keeps what was written, and readers
// see an uncommitted session.
func (w *Writer) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	_ = w.buf.Flush()
	_ = w.file.Close()
}

// Close flushes events.jsonl, then writes meta.json with the events hash and count. Until Close
// returns nil the session is not committed.
func (w *Writer) Close(update func(*Meta)) (Meta, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.meta, errors.New("session: closed twice")
	}
	w.closed = true
	if err := w.buf.Flush(); err != nil {
		w.file.Close()
		return w.meta, fmt.Errorf("session: flushing %s: %w", EventsFile, err)
	}
	if err := w.file.Sync(); err != nil {
		w.file.Close()
		return w.meta, fmt.Errorf("session: syncing %s: %w", EventsFile, err)
	}
	if err := w.syncBlobs(); err != nil {
		w.file.Close()
		return w.meta, err
	}
	// The names events.jsonl and blobs/ are entries of the session directory: they too must be on
	// disk before meta.json says the session is whole, or a crash could keep the commit and lose them.
	if err := syncPath(w.dir); err != nil {
		w.file.Close()
		return w.meta, fmt.Errorf("session: syncing %s: %w", w.dir, err)
	}
	if err := w.file.Close(); err != nil {
		return w.meta, fmt.Errorf("session: closing %s: %w", EventsFile, err)
	}
	if update != nil {
		update(&w.meta)
	}
	w.meta.EventsHash = hex.EncodeToString(w.hash.Sum(nil))
	w.meta.Events = w.events
	w.meta.VaultHash = w.vaultHash
	w.meta.InheritedSteps = w.inherited
	w.meta.SchemaVersion = CurrentSchemaVersion
	data, err := json.MarshalIndent(w.meta, "", "  ")
	if err != nil {
		return w.meta, err
	}
	// The commit marker the reader would refuse (an update that drops the fork step before the
	// inherited steps, an unknown fingerprint mode...) would commit a session that never opens.
	path := filepath.Join(w.dir, MetaFile)
	if int64(len(data)) > metaLimit {
		return w.meta, fmt.Errorf("session: not committing: %w", &TooLargeError{What: MetaFile, Size: int64(len(data)), Limit: metaLimit})
	}
	if _, err := DecodeMeta(data, path); err != nil {
		return w.meta, fmt.Errorf("session: not committing: %w", err)
	}
	if err := writeFileAtomic(path, append(data, '\n')); err != nil {
		return w.meta, fmt.Errorf("session: committing %s: %w", MetaFile, err)
	}
	return w.meta, nil
}

// fsync makes a file's data durable; a test watches the calls.
var fsync = (*os.File).Sync

// writeFileAtomic writes data to a temporary file, syncs it and renames it into place, so a reader sees
// either nothing or the whole file.
func writeFileAtomic(path string, data []byte) error { return writeFile(path, data, true) }

// writeFile writes data to a temporary file and renames it into place, syncing it first when sync is set.
func writeFile(path string, data []byte, sync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if sync {
		if err := fsync(tmp); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return fsutil.RenameOverFile(tmp.Name(), path)
}
