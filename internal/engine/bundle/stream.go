package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxTailCount bounds how many bytes after the gzip stream are read to count them.
const maxTailCount = 1 << 20

// gzipMagic begins every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// countingReader counts the bytes taken from a buffered source. It is an io.ByteReader, so gzip and
// flate read through it without a buffer of their own, and n is exactly the bytes they consumed.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// gzipStream reads the one gzip stream a bundle is. Pack writes exactly one, so what follows its end
// is refused with its offset (*TrailingDataError); a multistream gzip.Reader would instead fail on
// it as an invalid header or an unexpected EOF, or read a second bundle appended to the first.
type gzipStream struct {
	gz  *gzip.Reader
	src *countingReader
	err error // sticky once the stream has ended or failed
}

func newGzipStream(r io.Reader) (*gzipStream, error) {
	src := &countingReader{r: bufio.NewReader(r)}
	gz, err := gzip.NewReader(src)
	if err != nil {
		return nil, err
	}
	gz.Multistream(false)
	return &gzipStream{gz: gz, src: src}, nil
}

func (g *gzipStream) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.gz.Read(p)
	if err == io.EOF {
		err = g.tail()
	}
	g.err = err
	return n, err
}

// tail is io.EOF when nothing follows the gzip stream, and a *TrailingDataError when bytes do.
func (g *gzipStream) tail() error {
	end := g.src.n
	head, _ := g.src.r.Peek(len(gzipMagic))
	n, err := io.Copy(io.Discard, io.LimitReader(g.src, maxTailCount+1))
	switch {
	case err != nil:
		return fmt.Errorf("bundle: reading after the end of the gzip stream at offset %d: %w", end, err)
	case n == 0:
		return io.EOF
	}
	return &TrailingDataError{Offset: end, Bytes: min(n, maxTailCount), More: n > maxTailCount, Gzip: bytes.Equal(head, gzipMagic)}
}

// headerTap records what the tar reader reads while it looks for the next header: archive/tar cuts
// an entry's name at its first NUL byte, so only the raw header shows a name that holds one.
type headerTap struct {
	r         io.Reader
	pos       int64 // bytes read so far: the offset in the tar archive
	recording bool
	start     int64 // pos when recording began
	raw       []byte
	overflow  bool
}

// maxTapBytes bounds the header bytes kept for one entry: a header, its PAX records or GNU long name
// (archive/tar caps each at 1 MiB), and the padding before it.
const maxTapBytes = 4 << 20

func (t *headerTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if t.recording && !t.overflow {
		if len(t.raw)+n > maxTapBytes {
			t.overflow = true
		} else {
			t.raw = append(t.raw, p[:n]...)
		}
	}
	t.pos += int64(n)
	return n, err
}

// record starts keeping what is read, until stop.
func (t *headerTap) record() {
	t.recording, t.start, t.raw, t.overflow = true, t.pos, t.raw[:0], false
}

func (t *headerTap) stop() { t.recording = false }

// nulInName finds a NUL byte inside the name of the entry whose headers the tap recorded: it returns
// the whole name, NUL included, and the NUL's offset in it. The tar reader consumed the bytes
// recorded: the padding of the previous entry up to the next 512-byte block, then header blocks,
// PAX records and GNU long names, the entry's own header last (or a PAX header it refused).
func (t *headerTap) nulInName() (name string, at int, found bool) {
	if t.overflow {
		return "", 0, false
	}
	raw := t.raw[min(int(-t.start&(blockSize-1)), len(t.raw)):]
	var long string // a GNU long name or PAX path, which replaces the header's own name
	for len(raw) >= blockSize {
		blk := raw[:blockSize]
		raw = raw[blockSize:]
		size, err := strconv.ParseInt(strings.Trim(string(blk[124:136]), " \x00"), 8, 64)
		switch blk[156] {
		case tar.TypeGNULongName, tar.TypeXHeader, tar.TypeGNULongLink, tar.TypeXGlobalHeader:
			if err != nil || size < 0 || size > int64(len(raw)) {
				return "", 0, false
			}
			body := string(raw[:size])
			raw = raw[min(blocks(size), int64(len(raw))):]
			switch blk[156] {
			case tar.TypeGNULongName:
				long = strings.TrimRight(body, "\x00")
			case tar.TypeXHeader:
				if path, ok := paxPath(body); ok {
					long = path
				}
			}
			if i := strings.IndexByte(long, 0); i >= 0 {
				return long, i, true // a PAX path holding one is refused before its entry's header is read
			}
			continue
		}
		if long != "" {
			return "", 0, false
		}
		field := func(b []byte) string { return strings.TrimRight(string(b), "\x00") }
		name = field(blk[:100])
		if string(blk[257:263]) == "ustar\x00" { // POSIX ustar: a prefix may hold the name's directories
			if prefix := field(blk[345:500]); prefix != "" {
				name = prefix + "/" + name
			}
		}
		if i := strings.IndexByte(name, 0); i >= 0 {
			return name, i, true
		}
		return "", 0, false
	}
	return "", 0, false
}

const blockSize = 512

// blocks is size rounded up to whole tar blocks.
func blocks(size int64) int64 { return (size + blockSize - 1) / blockSize * blockSize }

// paxPath is the last path record of a PAX header's records ("<len> path=<value>\n").
func paxPath(records string) (path string, found bool) {
	for records != "" {
		lenStr, _, ok := strings.Cut(records, " ")
		n, err := strconv.Atoi(lenStr)
		if !ok || err != nil || n <= len(lenStr)+1 || n > len(records) {
			return path, found
		}
		record := strings.TrimSuffix(records[len(lenStr)+1:n], "\n")
		records = records[n:]
		if v, ok := strings.CutPrefix(record, "path="); ok {
			path, found = v, true
		}
	}
	return path, found
}
