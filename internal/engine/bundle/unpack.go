package bundle

import (
	"archive/tar"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fsutil"
)

// Limits bound what Unpack accepts from an untrusted bundle. A zero (or negative) field means its
// default: 1 GiB per entry, 4 GiB in total, 100000 entries.
type Limits struct {
	MaxEntryBytes int64
	MaxTotalBytes int64
	MaxEntries    int
}

const (
	defaultMaxEntryBytes = 1 << 30
	defaultMaxTotalBytes = 4 << 30
	defaultMaxEntries    = 100000
)

// maxTrailingBytes bounds the zero padding accepted after the end of the tar stream (tar tools pad
// to a 10 KiB record); anything beyond is refused rather than decompressed forever.
const maxTrailingBytes = 1 << 20

func (l Limits) withDefaults() Limits {
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = defaultMaxEntryBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = defaultMaxTotalBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = defaultMaxEntries
	}
	return l
}

// Unpack extracts a .rewind bundle from r into destDir, verifies the session and returns what it
// extracted.
//
// destDir must be empty or absent (its parent must exist), and neither a file nor a symbolic link: a
// destination that is not is a *DestinationError. The bundle is extracted into a new temporary
// directory beside destDir, named as this process's (fsutil.MkdirTemp; the ones killed unpacks into
// destDir left are removed first and listed in the summary's RemovedStale) — every write through an
// os.Root opened on it, so nothing can land outside — then opened with session.Open, and only a
// session that verifies is renamed to destDir. Any entry other than the regular files meta.json,
// events.jsonl and blobs/<64 lowercase hex>, and the directory blobs/, is refused with an
// *UnsafeEntryError, as are vault.enc, duplicates, names holding a NUL byte (which archive/tar would
// cut there), entries over the limits and a blob or meta.json over the session package's caps (from
// its header); a line of events.jsonl over session.MaxLineBytes is refused as it streams in, with a
// *session.CorruptEventError naming the line and its offset. A blob whose content does not hash to
// its name yields a *BlobHashError wherever it sits and whether or not an event references it, a
// bundle without meta.json or events.jsonl a *MissingEntryError, and a session that does not verify
// the session package's error. A bundle is one gzip stream, as Pack writes it: bytes after its end, a
// second stream included, are a *TrailingDataError. Blobs no event references are dropped, never left
// in destDir, and counted in the summary's Unreferenced. On any error the temporary directory is
// removed and destDir is left as it was. Cancelling ctx stops the extraction with ctx's error.
func Unpack(ctx context.Context, r io.Reader, destDir string, limits Limits) (_ *PackSummary, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	existed, err := checkDest(destDir)
	if err != nil {
		return nil, err
	}
	stale := fsutil.RemoveStaleTemps(destDir, tempPurpose, time.Now())
	tmp, err := fsutil.MkdirTemp(destDir, tempPurpose)
	if err != nil {
		return nil, &DestinationError{Dir: destDir, Err: fmt.Errorf("creating a directory beside it: %w", err)}
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp) // ours alone: MkdirTemp made it
		}
	}()
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, fmt.Errorf("bundle: opening %s: %w", tmp, err)
	}
	u := &unpacker{root: root, limits: limits.withDefaults(), seen: map[string]bool{}, sum: newSummary(), tokens: map[string]map[string]int{}}
	err = u.extract(ctx, r)
	if err == nil {
		err = u.dropUnreferenced()
	}
	root.Close()
	if err != nil {
		return nil, err
	}
	if _, err := session.Open(tmp); err != nil {
		return nil, fmt.Errorf("bundle: the unpacked session does not verify: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it 0700
		return nil, &DestinationError{Dir: destDir, Err: err}
	}
	if existed {
		if err := os.Remove(destDir); err != nil { // only while still empty
			return nil, &DestinationError{Dir: destDir, Err: fmt.Errorf("%w (unpack into a new or empty directory)", ErrDestinationNotEmpty)}
		}
	}
	if err := os.Rename(tmp, destDir); err != nil {
		if existed {
			_ = os.Mkdir(destDir, 0o755)
		}
		return nil, &DestinationError{Dir: destDir, Err: fmt.Errorf("moving the verified session into place: %w", err)}
	}
	u.sum.RemovedStale = stale
	return u.sum, nil
}

// tempPurpose names Unpack's temporary directories: .<dest>.unpack-<owner> (see fsutil.MkdirTemp).
const tempPurpose = "unpack"

// checkDest refuses a destination with content, a file and a symbolic link, and reports whether it
// exists (as an empty directory). A link would be replaced by the session renamed over it, and what
// it points to left empty.
func checkDest(destDir string) (existed bool, err error) {
	fail := func(err error) (bool, error) { return false, &DestinationError{Dir: destDir, Err: err} }
	info, err := os.Lstat(destDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return fail(err)
	case info.Mode()&fs.ModeSymlink != 0:
		return fail(errors.New("is a symbolic link: unpack into the directory it points to, or a new path"))
	case !info.IsDir():
		return fail(errors.New("is not a directory: unpack into a new or empty directory"))
	}
	entries, err := os.ReadDir(destDir)
	switch {
	case err != nil:
		return fail(err)
	case len(entries) > 0:
		return fail(fmt.Errorf("%w (unpack into a new or empty directory)", ErrDestinationNotEmpty))
	}
	return true, nil
}

type unpacker struct {
	root    *os.Root
	limits  Limits
	seen    map[string]bool
	blobsOK bool // blobs/ was created
	entries int
	total   int64
	sum     *PackSummary
	// refs are the blobs events.jsonl references, once it has been extracted; nil before.
	refs map[string]bool
	// early are the blobs extracted before events.jsonl, with their size and redaction tokens, kept
	// apart until it says whether they are referenced.
	early  []string
	sizes  map[string]int64
	tokens map[string]map[string]int
}

func (u *unpacker) extract(ctx context.Context, r io.Reader) error {
	gz, err := newGzipStream(ctxReader{ctx, r})
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // the read failed because of the cancellation, not because of the bundle
	}
	if err != nil {
		return fmt.Errorf("bundle: not a gzip-compressed bundle: %w", err)
	}
	tap := &headerTap{r: gz}
	tr := tar.NewReader(tap)
	prev := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		tap.record()
		hdr, err := tr.Next()
		tap.stop()
		if name, at, ok := tap.nulInName(); ok && err != io.EOF {
			// archive/tar cut the name at the NUL: the entry would pass for another, or a duplicate.
			return refuse(name, reasonNULAt(at))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nextError(hdr, err, prev)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
		// The body of a blobs/ entry is not read; the tar reader would skip it inside Next, where the
		// tap expects only the padding before the next header. Its size counted against the limits.
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return nextError(nil, err, hdr.Name)
		}
		prev = hdr.Name
	}
	if err := drainPadding(tap); err != nil {
		return err
	}
	return u.checkRequired()
}

// nextError explains a failure to read the next header. The tar reader never hands out more than an
// entry's declared size, so a body longer than its header claims shows up here, as the header that
// should follow it being garbage.
func nextError(hdr *tar.Header, err error, prev string) error {
	if te, ok := errors.AsType[*TrailingDataError](err); ok {
		return te // the gzip stream ended inside the archive
	}
	if hdr != nil && errors.Is(err, tar.ErrInsecurePath) { // only with GODEBUG=tarinsecurepath=0
		return refuse(hdr.Name, cmp.Or(nameReason(hdr.Name), reasonEscapes))
	}
	if errors.Is(err, tar.ErrHeader) && prev != "" {
		return refuse(prev, reasonLongerBody)
	}
	return fmt.Errorf("bundle: reading archive: %w", err)
}

func (u *unpacker) entry(hdr *tar.Header, body io.Reader) error {
	if err := u.admit(hdr); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeDir {
		return u.ensureBlobsDir()
	}
	return u.writeFile(hdr.Name, hdr.Size, body)
}

// admit applies every check that needs only the header, before a byte of the entry is written.
func (u *unpacker) admit(hdr *tar.Header) error {
	name := hdr.Name
	u.entries++
	if u.entries > u.limits.MaxEntries {
		return refuse(name, fmt.Sprintf("more than %d entries", u.limits.MaxEntries))
	}
	if reason := cmp.Or(nameReason(name), typeReason(hdr)); reason != "" {
		return refuse(name, reason)
	}
	if name == vaultFile {
		return refuse(name, reasonVault)
	}
	if !allowedFile(name) && !isBlobsDir(name) {
		return refuse(name, reasonUnknown)
	}
	key := name
	if isBlobsDir(name) {
		key = blobPrefix // "blobs" and "blobs/" are the same directory
	}
	if u.seen[key] {
		return refuse(name, reasonDuplicate)
	}
	u.seen[key] = true
	// What a reader of the session holds whole in memory is capped: refused here, from the header,
	// before a byte of it is written.
	if isBlobPath(name) && hdr.Size > session.MaxBlobBytes {
		return refuse(name, fmt.Sprintf("size %d exceeds the %d-byte cap on a blob", hdr.Size, session.MaxBlobBytes))
	}
	if name == metaFile && hdr.Size > session.MaxMetaBytes {
		return refuse(name, fmt.Sprintf("size %d exceeds the %d-byte cap on meta.json", hdr.Size, session.MaxMetaBytes))
	}
	return u.admitSize(name, hdr.Size)
}

func (u *unpacker) admitSize(name string, size int64) error {
	if size > u.limits.MaxEntryBytes {
		return refuse(name, fmt.Sprintf("size %d exceeds the %d-byte entry limit", size, u.limits.MaxEntryBytes))
	}
	if size > u.limits.MaxTotalBytes-u.total {
		return refuse(name, fmt.Sprintf("bundle content exceeds the %d-byte total limit", u.limits.MaxTotalBytes))
	}
	u.total += size
	return nil
}

func (u *unpacker) ensureBlobsDir() error {
	if u.blobsOK {
		return nil
	}
	if err := u.root.Mkdir(blobsDir, 0o755); err != nil {
		return fmt.Errorf("bundle: creating blobs/: %w", err)
	}
	u.blobsOK = true
	return nil
}

func (u *unpacker) writeFile(name string, size int64, body io.Reader) error {
	// A blob events.jsonl does not reference is not written, but its body is read and checked as a
	// written one's is: whether events.jsonl came first must not change the verdict on a bundle.
	drop := isBlobPath(name) && u.refs != nil && !u.refs[name[len(blobPrefix):]]
	if isBlobPath(name) && !drop {
		if err := u.ensureBlobsDir(); err != nil {
			return err
		}
	}
	var dst io.WriteCloser = nopCloser{io.Discard}
	if !drop {
		// O_EXCL: the destination started empty, so an existing file means something raced us.
		f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("bundle: extracting %s: %w", name, err)
		}
		dst = f
	}
	tokens := u.sum.RedactionTokens
	early := isBlobPath(name) && u.refs == nil
	switch {
	case drop:
		tokens = map[string]int{} // what a dropped blob reveals is not shipped
	case early:
		tokens = map[string]int{}
		u.early, u.tokens[name] = append(u.early, name), tokens
	}
	h := sha256.New()
	sinks := []io.Writer{dst, h, newTokenCounter(tokens)}
	if name == eventsFile {
		// A line over the cap is refused as it streams in, with its offset, not once it is on disk.
		sinks = append(sinks, session.NewLineChecker(eventsFile))
	}
	n, err := io.Copy(io.MultiWriter(sinks...), io.LimitReader(body, size))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if te, ok := errors.AsType[*TrailingDataError](err); ok {
		return te // the gzip stream ended inside the entry
	}
	if err != nil {
		return fmt.Errorf("bundle: extracting %s: %w", name, err)
	}
	// The tar reader stops at the declared size; these checks keep that guarantee local and explicit.
	if n != size {
		return fmt.Errorf("bundle: extracting %s: body is shorter than its header claims", name)
	}
	if !atEOF(body) {
		return refuse(name, reasonLongerBody)
	}
	if err := checkBlobHash(name, h.Sum(nil)); err != nil {
		return err
	}
	switch {
	case drop:
		u.sum.Unreferenced++
		u.sum.UnreferencedBytes += size
		return nil
	case early:
		if u.sizes == nil {
			u.sizes = map[string]int64{}
		}
		u.sizes[name] = size
		return nil
	}
	u.sum.addFile(name, size)
	if name == eventsFile {
		return u.readRefs()
	}
	return nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// readRefs reads the blob references of the extracted events.jsonl, through the session package.
// A log that cannot be read is refused here; its full verification comes after the extraction.
func (u *unpacker) readRefs() error {
	f, err := u.root.Open(eventsFile)
	if err != nil {
		return fmt.Errorf("bundle: reading %s: %w", eventsFile, err)
	}
	defer f.Close()
	events, err := session.ReadEvents(f, "", nil, eventsFile)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	u.refs = map[string]bool{}
	for _, h := range session.Blobs(events) {
		u.refs[h] = true
	}
	return nil
}

// dropUnreferenced settles the blobs extracted before events.jsonl: referenced ones join the
// summary, the others are removed and counted as unreferenced.
func (u *unpacker) dropUnreferenced() error {
	for _, name := range u.early {
		if u.refs[name[len(blobPrefix):]] {
			u.sum.addFile(name, u.sizes[name])
			for tok, n := range u.tokens[name] {
				u.sum.RedactionTokens[tok] += n
			}
			continue
		}
		if err := u.root.Remove(name); err != nil {
			return fmt.Errorf("bundle: removing unreferenced %s: %w", name, err)
		}
		u.sum.Unreferenced++
		u.sum.UnreferencedBytes += u.sizes[name]
	}
	if u.blobsOK && u.sum.Blobs == 0 {
		_ = u.root.Remove(blobsDir) // empty: every blob was unreferenced
	}
	return nil
}

func (u *unpacker) checkRequired() error {
	for _, name := range []string{metaFile, eventsFile} {
		if !u.seen[name] {
			return &MissingEntryError{Name: name}
		}
	}
	return nil
}

// drainPadding reads the rest of the gzip stream after the end of the tar archive: only zero padding
// may follow, and reading to the end is what makes gzip verify its checksum.
func drainPadding(t *headerTap) error {
	buf := make([]byte, 32<<10)
	var total int
	for {
		at := t.pos
		n, err := t.Read(buf)
		total += n
		for i, b := range buf[:n] {
			if b != 0 {
				return fmt.Errorf("bundle: data after the end of the tar archive, at offset %d of the uncompressed stream: the bundle is damaged", at+int64(i))
			}
		}
		if total > maxTrailingBytes {
			return errors.New("bundle: too much padding after the end of the archive")
		}
		if err == io.EOF {
			return nil
		}
		if te, ok := errors.AsType[*TrailingDataError](err); ok {
			return te
		}
		if err != nil {
			return fmt.Errorf("bundle: reading archive: %w", err)
		}
	}
}
