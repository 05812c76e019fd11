package bundle

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"time"
)

// PackSummary describes what a bundle holds.
type PackSummary struct {
	Files int   // files in the bundle: meta.json, events.jsonl and the blobs
	Bytes int64 // their total uncompressed size
	Blobs int
	// RedactionTokens counts the occurrences of each distinct "arw:redacted:<32hex>" token in the
	// bundled files, so a user sees what was redacted before sharing.
	RedactionTokens map[string]int
	// Unreferenced and UnreferencedBytes count, for Unpack only, the blobs of the bundle that no event
	// references: they are dropped, never left in the destination.
	Unreferenced      int
	UnreferencedBytes int64
	// RemovedStale lists, for Unpack only, the temporary directories that earlier unpacks into the
	// same destination left when they were killed, found abandoned and removed.
	RemovedStale []string `json:",omitempty"`
	// Skipped lists, for Pack only, the session-directory names left out of the bundle (vault.enc,
	// and anything outside the allowed set, directories with a trailing slash), sorted.
	Skipped []string
}

func newSummary() *PackSummary { return &PackSummary{RedactionTokens: map[string]int{}} }

func (s *PackSummary) addFile(name string, size int64) {
	s.Files++
	s.Bytes += size
	if isBlobPath(name) {
		s.Blobs++
	}
}

// epoch is the modification time of every entry: a bundle's bytes must depend only on the content.
var epoch = time.Unix(0, 0)

// Pack writes sessionDir to w as a .rewind bundle and returns what it packed.
//
// The output is deterministic: entries in a fixed order (meta.json, events.jsonl, then blobs/ by
// name), mtime zero, mode 0644, uid/gid 0, no user or group names, and a gzip header without name or
// mtime. vault.enc and names outside the allowed set are skipped (listed in Skipped); a symlink,
// device, FIFO or socket at the top of the session directory or in blobs/ is refused, since packing it
// would ship something other than the recording. Each blob must hash to its name.
//
// On error, w has received a partial bundle: write to a temporary file and rename it on success.
func Pack(ctx context.Context, sessionDir string, w io.Writer) (*PackSummary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(sessionDir)
	if err != nil {
		return nil, fmt.Errorf("bundle: opening session: %w", err)
	}
	defer root.Close()
	names, skipped, err := packList(root)
	if err != nil {
		return nil, err
	}
	gz := gzip.NewWriter(w) // zero Header: no name, no mtime
	tw := tar.NewWriter(gz)
	sum := newSummary()
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := packFile(ctx, root, name, tw, sum); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("bundle: writing archive: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("bundle: writing archive: %w", err)
	}
	sum.Skipped = skipped
	return sum, nil
}

// packList returns the entry names to pack, in archive order, and the names it skips.
func packList(root *os.Root) (names, skipped []string, err error) {
	entries, err := readDir(root, ".")
	if err != nil {
		return nil, nil, err
	}
	var blobs []string
	have := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if name == vaultFile {
			skipped = append(skipped, name) // never inspected, never shipped
			continue
		}
		if reason := modeReason(e.Type()); reason != "" {
			return nil, nil, refuse(name, reason)
		}
		switch {
		case name == metaFile || name == eventsFile:
			if !e.Type().IsRegular() {
				return nil, nil, refuse(name, reasonNotRegular)
			}
			have[name] = true
		case name == blobsDir && e.IsDir():
			if blobs, skipped, err = listBlobs(root, skipped); err != nil {
				return nil, nil, err
			}
		case e.IsDir():
			skipped = append(skipped, name+"/")
		default:
			skipped = append(skipped, name)
		}
	}
	for _, required := range []string{metaFile, eventsFile} {
		if !have[required] {
			return nil, nil, &MissingEntryError{Name: required}
		}
	}
	slices.Sort(blobs)
	slices.Sort(skipped)
	return append([]string{metaFile, eventsFile}, blobs...), skipped, nil
}

func listBlobs(root *os.Root, skipped []string) (blobs, _ []string, err error) {
	entries, err := readDir(root, blobsDir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := path.Join(blobsDir, e.Name())
		if reason := modeReason(e.Type()); reason != "" {
			return nil, nil, refuse(name, reason)
		}
		switch {
		case e.IsDir():
			skipped = append(skipped, name+"/")
		case isBlobName(e.Name()):
			blobs = append(blobs, name)
		default:
			skipped = append(skipped, name) // e.g. a leftover temporary file of the blob store
		}
	}
	return blobs, skipped, nil
}

// readDir lists a directory without following links: DirEntry.Type reports the link itself.
func readDir(root *os.Root, dir string) ([]fs.DirEntry, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle: reading session: %w", err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("bundle: reading session: %w", err)
	}
	return entries, nil
}

func packFile(ctx context.Context, root *os.Root, name string, tw *tar.Writer, sum *PackSummary) error {
	f, size, err := openRegular(root, name)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o644,
		Size:     size,
		ModTime:  epoch,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("bundle: writing %s: %w", name, err)
	}
	h := sha256.New()
	body := io.LimitReader(ctxReader{ctx, f}, size)
	n, err := io.Copy(io.MultiWriter(tw, h, newTokenCounter(sum.RedactionTokens)), body)
	if err != nil {
		return fmt.Errorf("bundle: packing %s: %w", name, err)
	}
	if n != size || !atEOF(f) {
		return fmt.Errorf("bundle: %s changed size while being packed", name)
	}
	if err := checkBlobHash(name, h.Sum(nil)); err != nil {
		return err
	}
	sum.addFile(name, size)
	return nil
}

// openRegular opens name and proves that what was opened is the regular file listed, not a symlink
// swapped in after the directory was read.
func openRegular(root *os.Root, name string) (*os.File, int64, error) {
	linfo, err := root.Lstat(name)
	if err != nil {
		return nil, 0, fmt.Errorf("bundle: reading session: %w", err)
	}
	if reason := modeReason(linfo.Mode()); reason != "" || !linfo.Mode().IsRegular() {
		return nil, 0, refuse(name, cmp.Or(reason, reasonNotRegular))
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, 0, fmt.Errorf("bundle: reading session: %w", err)
	}
	info, err := f.Stat()
	if err == nil && !os.SameFile(info, linfo) {
		err = errors.New("file was replaced while being packed")
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("bundle: %s: %w", name, err)
	}
	return f, info.Size(), nil
}

// atEOF reports whether r has nothing left: a file that grew since it was stat'ed would otherwise be
// silently truncated in the bundle.
func atEOF(r io.Reader) bool {
	var one [1]byte
	n, err := r.Read(one[:])
	return n == 0 && err == io.EOF
}

func checkBlobHash(name string, sum []byte) error {
	if !isBlobPath(name) {
		return nil
	}
	if got := hex.EncodeToString(sum); got != name[len(blobPrefix):] {
		return &BlobHashError{Name: name, Got: got}
	}
	return nil
}
