package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// A schema 3 manifest is stored as a small root (rootManifest, JSON, named by its SHA-256 like every
// manifest) listing chunks: runs of the path-sorted entries, each encoded compactly (encodeChunk) and
// stored in the blob space under its own SHA-256. Where a run ends depends on the paths around it,
// not on their positions in the tree (chunkEnds), so a capture that changes ten files re-encodes
// every chunk but stores only the few whose bytes changed, plus the root: the upload follows the
// change, not the tree.

// A chunk holds at least minChunkEntries entries, then ends after the first entry whose path hashes
// to 0 modulo chunkCutModulus (a power of two), or at maxChunkEntries. Chunks of a 250,000-file tree
// hold about 128 entries (8 KB) each, under a root of about 200 KB. The minimum matters: without
// it chunk lengths are spread geometrically, and a changed file most likely sits in a long chunk
// (uploading twice the mean); with it a change costs about 1.25 chunks of the mean length.
const (
	minChunkEntries = 64
	chunkCutModulus = 64
	maxChunkEntries = 512
)

// maxChunkBytes bounds what a chunk read back may hold, so a blob swapped in for one cannot exhaust
// memory: maxChunkEntries entries of a path and a link target each under 4 KiB stay under it.
const maxChunkBytes = 16 << 20

// chunkMagic opens every chunk: the format's name and its version, 1.
var chunkMagic = []byte("arwchunk\x01")

// chunkRef is a root's reference to one chunk.
type chunkRef struct {
	// Hash is the SHA-256 of the chunk's bytes, the key of its blob.
	Hash string `json:"sha256"`
	// Files is the number of entries in it, Size its length in bytes.
	Files int   `json:"files"`
	Size  int64 `json:"size"`
}

// rootManifest is how a schema 3 manifest is stored: Manifest with its entries replaced by the chunks
// holding them, and their count and bytes kept so a listing needs only the root.
type rootManifest struct {
	SchemaVersion    int        `json:"schemaVersion"`
	CreatedAt        time.Time  `json:"createdAt"`
	Anchor           Anchor     `json:"anchor"`
	Reason           string     `json:"reason,omitempty"`
	Guard            bool       `json:"guard,omitempty"`
	Excludes         []string   `json:"excludes,omitempty"`
	IncrementalBytes int64      `json:"incrementalBytes"`
	FileCount        int        `json:"fileCount"`
	Bytes            int64      `json:"bytes"`
	Chunks           []chunkRef `json:"chunks"`
	GitCommit        string     `json:"gitCommit,omitempty"`
}

// encodedChunk is one chunk ready to store.
type encodedChunk struct {
	ref  chunkRef
	data []byte
}

// chunkEnds splits path-sorted entries into chunks and returns the index one past each chunk's last
// entry. Where a chunk ends depends on the paths near it, not on their positions in the tree: adding,
// removing or changing a file changes the chunk holding it and seldom more than one beside it, never
// the chunks further away.
func chunkEnds(files []Entry) []int {
	var ends []int
	start := 0
	for i, e := range files {
		n := i + 1 - start
		if (n >= minChunkEntries && pathHash(e.Path)%chunkCutModulus == 0) || n >= maxChunkEntries {
			ends = append(ends, i+1)
			start = i + 1
		}
	}
	if start < len(files) {
		ends = append(ends, len(files))
	}
	return ends
}

// pathHash is FNV-1a over p, mixed (the finaliser of splitmix64) so that its low bits are as
// uniform as its high ones. It decides chunk boundaries and so must never change.
func pathHash(p string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(p); i++ {
		h ^= uint64(p[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// Entry types as a chunk spells them.
const (
	chunkFile    = 'f'
	chunkSymlink = 'l'
)

// encodeChunk is the compact encoding of path-sorted entries: chunkMagic, the entry count, then per
// entry the length of the prefix its path shares with the previous one, the rest of the path, its
// type, and for a file its mode, size, raw 32-byte hash, mtime, ctime and inode, for a link its
// target. Numbers are varints (signed ones zig-zag).
func encodeChunk(files []Entry, buf []byte) ([]byte, error) {
	b := append(buf[:0], chunkMagic...)
	b = binary.AppendUvarint(b, uint64(len(files)))
	prev := ""
	for _, e := range files {
		shared := 0
		for shared < len(prev) && shared < len(e.Path) && prev[shared] == e.Path[shared] {
			shared++
		}
		b = binary.AppendUvarint(b, uint64(shared))
		b = binary.AppendUvarint(b, uint64(len(e.Path)-shared))
		b = append(b, e.Path[shared:]...)
		prev = e.Path
		switch e.Type {
		case TypeFile:
			var raw [32]byte
			if n, err := hex.Decode(raw[:], []byte(e.Hash)); err != nil || n != 32 {
				return nil, &ManifestError{Path: e.Path, Reason: fmt.Sprintf("blob hash %q is not 64 hex characters", e.Hash)}
			}
			b = append(b, chunkFile)
			b = binary.AppendUvarint(b, uint64(e.Mode))
			b = binary.AppendVarint(b, e.Size)
			b = append(b, raw[:]...)
			b = binary.AppendVarint(b, e.MTimeNs)
			b = binary.AppendVarint(b, e.CTimeNs)
			b = binary.AppendUvarint(b, e.Inode)
		case TypeSymlink:
			b = append(b, chunkSymlink)
			b = binary.AppendUvarint(b, uint64(len(e.Target)))
			b = append(b, e.Target...)
		default:
			return nil, &ManifestError{Path: e.Path, Reason: fmt.Sprintf("unknown entry type %q", e.Type)}
		}
	}
	return b, nil
}

// chunkReader reads a chunk's fields, remembering where the first malformed one began.
type chunkReader struct {
	data []byte
	off  int
	// field is where the field read last begins.
	field int
	err   error
}

// fail records that the field at offset at is malformed.
func (r *chunkReader) fail(at int, field, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("byte %d (%s): %s", at, field, why)
	}
}

func (r *chunkReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	r.field = r.off
	v, n := binary.Uvarint(r.data[r.off:])
	if n <= 0 {
		r.fail(r.off, field, "not a varint")
		return 0
	}
	r.off += n
	return v
}

func (r *chunkReader) varint(field string) int64 {
	if r.err != nil {
		return 0
	}
	r.field = r.off
	v, n := binary.Varint(r.data[r.off:])
	if n <= 0 {
		r.fail(r.off, field, "not a varint")
		return 0
	}
	r.off += n
	return v
}

func (r *chunkReader) bytes(field string, n uint64) []byte {
	if r.err != nil {
		return nil
	}
	r.field = r.off
	if n > uint64(len(r.data)-r.off) {
		r.fail(r.off, field, fmt.Sprintf("%d bytes announced, %d left", n, len(r.data)-r.off))
		return nil
	}
	b := r.data[r.off : r.off+int(n)]
	r.off += int(n)
	return b
}

// decodeChunk reads what encodeChunk wrote, appending the entries to files. Malformed bytes are an
// error naming the byte offset and field; the entries themselves are checked by Manifest.Validate.
func decodeChunk(data []byte, files []Entry) ([]Entry, error) {
	if !bytes.HasPrefix(data, chunkMagic) {
		return files, fmt.Errorf("byte 0: not a version 1 checkpoint chunk")
	}
	r := &chunkReader{data: data, off: len(chunkMagic)}
	count := r.uvarint("entry count")
	// Every entry takes at least 4 bytes, so a count beyond that is a lie to refuse before allocating.
	if r.err == nil && count > uint64(len(data)-r.off)/4 {
		r.fail(r.field, "entry count", fmt.Sprintf("%d entries cannot fit in %d bytes", count, len(data)-r.off))
	}
	prev := ""
	for i := uint64(0); i < count && r.err == nil; i++ {
		shared := r.uvarint("path prefix length")
		if r.err == nil && shared > uint64(len(prev)) {
			r.fail(r.field, "path prefix length", fmt.Sprintf("%d, longer than the previous path (%d)", shared, len(prev)))
		}
		rest := r.bytes("path", r.uvarint("path length"))
		if r.err != nil {
			break
		}
		p := prev[:shared] + string(rest)
		prev = p
		e := Entry{Path: p}
		kind := r.bytes("entry type", 1)
		switch {
		case r.err != nil:
		case kind[0] == chunkFile:
			e.Type = TypeFile
			mode := r.uvarint("mode")
			if mode > 1<<32-1 {
				r.fail(r.field, "mode", fmt.Sprintf("%d does not fit 32 bits", mode))
			}
			e.Mode = uint32(mode)
			e.Size = r.varint("size")
			if raw := r.bytes("sha256", 32); raw != nil {
				e.Hash = hex.EncodeToString(raw)
			}
			e.MTimeNs = r.varint("mtime")
			e.CTimeNs = r.varint("ctime")
			e.Inode = r.uvarint("inode")
		case kind[0] == chunkSymlink:
			e.Type = TypeSymlink
			e.Target = string(r.bytes("link target", r.uvarint("link target length")))
		default:
			r.fail(r.field, "entry type", fmt.Sprintf("unknown type byte %#x", kind[0]))
		}
		files = append(files, e)
	}
	if r.err == nil && r.off != len(data) {
		r.fail(r.off, "end", fmt.Sprintf("%d bytes after the last entry", len(data)-r.off))
	}
	return files, r.err
}

// encodeChunked is the root and chunks a schema 3 manifest is stored as, and the id naming it. m's
// files must be sorted by path.
func (m *Manifest) encodeChunked() (id string, root []byte, chunks []encodedChunk, err error) {
	r := rootManifest{SchemaVersion: m.SchemaVersion, CreatedAt: m.CreatedAt, Anchor: m.Anchor, Reason: m.Reason, Guard: m.Guard,
		Excludes: m.Excludes, IncrementalBytes: m.IncrementalBytes, FileCount: len(m.Files), Chunks: []chunkRef{}, GitCommit: m.GitCommit}
	start := 0
	var buf []byte
	for _, end := range chunkEnds(m.Files) {
		part := m.Files[start:end]
		start = end
		if buf, err = encodeChunk(part, buf); err != nil {
			return "", nil, nil, err
		}
		sum := sha256.Sum256(buf)
		c := encodedChunk{ref: chunkRef{Hash: hex.EncodeToString(sum[:]), Files: len(part), Size: int64(len(buf))}, data: bytes.Clone(buf)}
		chunks = append(chunks, c)
		r.Chunks = append(r.Chunks, c.ref)
	}
	for _, e := range m.Files {
		r.Bytes += e.Size
	}
	root, err = json.Marshal(&r)
	if err != nil {
		return "", nil, nil, err
	}
	sum := sha256.Sum256(root)
	return hex.EncodeToString(sum[:]), root, chunks, nil
}

// ManifestChunks returns the blob hashes of the chunks a stored manifest's bytes name: none for a
// manifest of schema 1 or 2, which lists its files itself. The blob sweep follows them: the blobs a
// chunk names (ChunkRefs) are referenced by the checkpoint as surely as the chunk is.
func ManifestChunks(data []byte) ([]string, error) {
	var r struct {
		SchemaVersion int        `json:"schemaVersion"`
		Chunks        []chunkRef `json:"chunks"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, &ManifestError{Reason: err.Error()}
	}
	if r.SchemaVersion < 3 {
		return nil, nil
	}
	out := make([]string, 0, len(r.Chunks))
	for i, c := range r.Chunks {
		if !isSHA256Hex(c.Hash) {
			return nil, &ManifestError{Reason: fmt.Sprintf("chunks[%d]: %q is not 64 lowercase hex characters", i, c.Hash)}
		}
		out = append(out, c.Hash)
	}
	return out, nil
}

// ChunkRefs returns the blob hashes of the files a chunk's bytes list, once they hash to hash.
func ChunkRefs(hash string, data []byte) ([]string, error) {
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != hash {
		return nil, &TamperedError{Chunk: hash, Actual: hex.EncodeToString(got[:])}
	}
	files, err := decodeChunk(data, nil)
	if err != nil {
		return nil, &ManifestError{Reason: fmt.Sprintf("chunk %s: %v", hash, err)}
	}
	var out []string
	for _, e := range files {
		if e.Type == TypeFile {
			out = append(out, e.Hash)
		}
	}
	return out, nil
}
