package bundle

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
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

// Unpack extracts a .rewind bundle from r into destDir and returns what it extracted.
//
// destDir must be empty or absent (its parent must exist); every write goes through an os.Root
// opened on it, so nothing can land outside it. Any entry other than the regular files meta.json,
// events.jsonl and blobs/<64 lowercase hex>, and the directory blobs/, is refused with an
// *UnsafeEntryError, as are vault.enc, duplicates and entries over the limits; a blob whose content
// does not hash to its name yields a *BlobHashError, and a bundle without meta.json or events.jsonl a
// *MissingEntryError. On any error the files already written are removed and destDir is left as it
// was (removed again if Unpack created it). Cancelling ctx stops the extraction with ctx's error.
func Unpack(ctx context.Context, r io.Reader, destDir string, limits Limits) (_ *PackSummary, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, created, err := openEmptyDest(destDir)
	if err != nil {
		return nil, err
	}
	u := &unpacker{root: root, limits: limits.withDefaults(), seen: map[string]bool{}, sum: newSummary()}
	defer func() {
		if err != nil {
			u.removeWritten()
		}
		root.Close()
		if err != nil && created {
			_ = os.Remove(destDir) // not RemoveAll: if anything else appeared there, it is not ours
		}
	}()
	if err := u.extract(ctx, r); err != nil {
		return nil, err
	}
	return u.sum, nil
}

// openEmptyDest opens destDir as a root, creating it if absent, and refuses one with content.
func openEmptyDest(destDir string) (root *os.Root, created bool, err error) {
	if err := os.Mkdir(destDir, 0o755); err == nil {
		created = true
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, false, fmt.Errorf("bundle: creating destination: %w", err)
	}
	root, err = os.OpenRoot(destDir)
	if err == nil {
		err = checkEmpty(root, destDir)
	}
	if err != nil {
		if root != nil {
			root.Close()
		}
		if created {
			_ = os.Remove(destDir)
		}
		return nil, false, err
	}
	return root, created, nil
}

func checkEmpty(root *os.Root, destDir string) error {
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("bundle: opening destination: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("bundle: %w: %s (unpack into a new or empty directory)", ErrDestinationNotEmpty, destDir)
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("bundle: reading destination: %w", err)
	}
	return nil
}

type unpacker struct {
	root    *os.Root
	limits  Limits
	seen    map[string]bool
	written []string // in creation order, removed in reverse on failure
	entries int
	total   int64
	sum     *PackSummary
}

func (u *unpacker) extract(ctx context.Context, r io.Reader) error {
	gz, err := gzip.NewReader(ctxReader{ctx, r})
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // the read failed because of the cancellation, not because of the bundle
	}
	if err != nil {
		return fmt.Errorf("bundle: not a gzip-compressed bundle: %w", err)
	}
	tr := tar.NewReader(gz)
	prev := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nextError(hdr, err, prev)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
		prev = hdr.Name
	}
	if err := drainPadding(gz); err != nil {
		return err
	}
	return u.checkRequired()
}

// nextError explains a failure to read the next header. The tar reader never hands out more than an
// entry's declared size, so a body longer than its header claims shows up here, as the header that
// should follow it being garbage.
func nextError(hdr *tar.Header, err error, prev string) error {
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
	if slices.Contains(u.written, blobsDir) {
		return nil
	}
	if err := u.root.Mkdir(blobsDir, 0o755); err != nil {
		return fmt.Errorf("bundle: creating blobs/: %w", err)
	}
	u.written = append(u.written, blobsDir)
	return nil
}

func (u *unpacker) writeFile(name string, size int64, body io.Reader) error {
	if isBlobPath(name) {
		if err := u.ensureBlobsDir(); err != nil {
			return err
		}
	}
	// O_EXCL: the destination started empty, so an existing file means something raced us.
	f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("bundle: extracting %s: %w", name, err)
	}
	u.written = append(u.written, name)
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h, newTokenCounter(u.sum.RedactionTokens)), io.LimitReader(body, size))
	if cerr := f.Close(); err == nil {
		err = cerr
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
	u.sum.addFile(name, size)
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

// removeWritten undoes a failed extraction, newest first so blobs/ is empty when its turn comes.
func (u *unpacker) removeWritten() {
	for _, name := range slices.Backward(u.written) {
		_ = u.root.Remove(name)
	}
}

// drainPadding reads the rest of the gzip stream after the end of the tar archive: only zero padding
// may follow, and reading to the end is what makes gzip verify its checksum.
func drainPadding(r io.Reader) error {
	buf := make([]byte, 32<<10)
	var total int
	for {
		n, err := r.Read(buf)
		total += n
		for _, b := range buf[:n] {
			if b != 0 {
				return errors.New("bundle: data after the end of the archive")
			}
		}
		if total > maxTrailingBytes {
			return errors.New("bundle: too much padding after the end of the archive")
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("bundle: reading archive: %w", err)
		}
	}
}
