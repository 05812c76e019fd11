package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

var (
	blobBody               = `"payload"`
	validBlob              = file(blobName(blobBody), blobBody)
	validMeta, validEvents = minimalSession(blobBody)
)

// minimalSession is the meta.json and events.jsonl of a session whose one tool call stores its result
// in the blob holding blobContent.
func minimalSession(blobContent string) (meta, events entry) {
	log := `{"seq":0,"step":0,"ts":0,"lane":"0","callSite":"session","kind":"session_start","schemaVersion":2}` + "\n" +
		`{"seq":1,"step":1,"ts":0,"lane":"0","callSite":"t","kind":"tool_call","schemaVersion":2,"name":"t","args":{},"blobs":{"result":"` + sha(blobContent) + `"}}` + "\n" +
		`{"seq":2,"step":2,"ts":0,"lane":"0","callSite":"session","kind":"session_end","schemaVersion":2,"ok":true}` + "\n"
	return metaFor(log), file("events.jsonl", log)
}

// referencing is the events.jsonl of minimalSession(blobContent).
func referencing(blobContent string) entry {
	_, events := minimalSession(blobContent)
	return events
}

// metaFor is a meta.json that commits log.
func metaFor(log string) entry {
	return file("meta.json", `{"id":"s1","createdAt":0,"agentRewindVersion":"test","schemaVersion":2,"fingerprintMode":"strict",`+
		`"redaction":{"enabled":true},"eventsHash":"`+sha(log)+`","events":`+fmt.Sprint(strings.Count(log, "\n"))+`}`)
}

type hostileCase struct {
	name    string
	archive func(t *testing.T) []byte
	limits  Limits
	want    error
}

// hostileCases each put valid entries first, so refusing the bad one must also undo real writes.
func hostileCases() []hostileCase {
	after := func(bad ...entry) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			return bundleOf(t, append([]entry{validMeta, validBlob}, bad...)...)
		}
	}
	unsafe := func(name, reason string) error { return &UnsafeEntryError{Name: name, Reason: reason} }
	upperBlob := "blobs/" + strings.ToUpper(sha(blobBody))
	return []hostileCase{
		{name: "parent directory", archive: after(file("../evil", "x")), want: unsafe("../evil", reasonEscapes)},
		{name: "absolute path", archive: after(file("/abs", "x")), want: unsafe("/abs", reasonAbsolute)},
		{name: "escape through blobs", archive: after(file("blobs/../../x", "x")), want: unsafe("blobs/../../x", reasonEscapes)},
		{name: "backslash", archive: after(file(`blobs\..\..\x`, "x")), want: unsafe(`blobs\..\..\x`, reasonBackslash)},
		{name: "symlink", archive: after(special("events.jsonl", tar.TypeSymlink, "/etc/passwd")), want: unsafe("events.jsonl", reasonSymlink)},
		{name: "hardlink", archive: after(special("events.jsonl", tar.TypeLink, "meta.json")), want: unsafe("events.jsonl", reasonHardlink)},
		{name: "character device", archive: after(special("events.jsonl", tar.TypeChar, "")), want: unsafe("events.jsonl", reasonCharDevice)},
		{name: "block device", archive: after(special("events.jsonl", tar.TypeBlock, "")), want: unsafe("events.jsonl", reasonBlockDevice)},
		{name: "fifo", archive: after(special("events.jsonl", tar.TypeFifo, "")), want: unsafe("events.jsonl", reasonFIFO)},
		{name: "other directory", archive: after(special("sub/", tar.TypeDir, "")), want: unsafe("sub/", reasonDirectory)},
		{name: "vault.enc", archive: after(validEvents, file("vault.enc", "ARWVAULT1...")), want: unsafe("vault.enc", reasonVault)},
		{name: "unknown name", archive: after(file("notes.txt", "hi")), want: unsafe("notes.txt", reasonUnknown)},
		{name: "blob name in upper case", archive: after(file(upperBlob, blobBody)), want: unsafe(upperBlob, reasonUnknown)},
		{name: "blob in a subdirectory", archive: after(file("blobs/ab/"+sha(blobBody), blobBody)), want: unsafe("blobs/ab/"+sha(blobBody), reasonUnknown)},
		{name: "duplicate", archive: after(validEvents, file("meta.json", `{"id":"other"}`)), want: unsafe("meta.json", reasonDuplicate)},
		{
			name: "oversize header", archive: after(file("events.jsonl", strings.Repeat("e", len(validMeta.body)+1))),
			limits: Limits{MaxEntryBytes: int64(len(validMeta.body))},
			want:   unsafe("events.jsonl", fmt.Sprintf("size %d exceeds the %d-byte entry limit", len(validMeta.body)+1, len(validMeta.body))),
		},
		{
			name: "total over the limit", archive: after(file("events.jsonl", strings.Repeat("e", 10))),
			limits: Limits{MaxTotalBytes: int64(len(validMeta.body) + len(blobBody) + 9)},
			want:   unsafe("events.jsonl", fmt.Sprintf("bundle content exceeds the %d-byte total limit", len(validMeta.body)+len(blobBody)+9)),
		},
		{name: "too many entries", archive: after(validEvents), limits: Limits{MaxEntries: 2}, want: unsafe("events.jsonl", "more than 2 entries")},
		{name: "body longer than header", archive: longerBodyBundle, want: unsafe("meta.json", reasonLongerBody)},
		{
			name: "blob content not matching its name", archive: after(referencing("expected"), file(blobName("expected"), "tampered")),
			want: &BlobHashError{Name: blobName("expected"), Got: sha("tampered")},
		},
		{name: "missing events.jsonl", archive: after(), want: &MissingEntryError{Name: "events.jsonl"}},
		{name: "missing meta.json", archive: func(t *testing.T) []byte { return bundleOf(t, validEvents) }, want: &MissingEntryError{Name: "meta.json"}},
	}
}

func TestUnpackRefusesHostileBundlesAndLeavesNothing(t *testing.T) {
	for _, tt := range hostileCases() {
		t.Run(tt.name, func(t *testing.T) {
			dest := emptyDir(t)
			_, err := Unpack(context.Background(), bytes.NewReader(tt.archive(t)), dest, tt.limits)
			switch want := tt.want.(type) {
			case *UnsafeEntryError:
				assertError(t, err, want)
			case *BlobHashError:
				assertError(t, err, want)
			case *MissingEntryError:
				assertError(t, err, want)
			default:
				t.Fatalf("test case wants unsupported %T", want)
			}
			if left := readTree(t, dest); len(left) != 0 {
				t.Fatalf("destination not restored, holds %v", keys(left))
			}
		})
	}
}

func TestHostileBundlesDoNotTouchFilesOutsideTheDestination(t *testing.T) {
	base := t.TempDir()
	victim := filepath.Join(base, "outside", "victim.txt")
	writeTree(t, base, map[string]string{"outside/victim.txt": "original"})
	dest := filepath.Join(base, "work", "dest")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	extra := []hostileCase{
		{name: "overwrite through parent", archive: func(t *testing.T) []byte {
			return bundleOf(t, validMeta, file("../../outside/victim.txt", "pwned"))
		}},
		{name: "symlink then write through it", archive: func(t *testing.T) []byte {
			return bundleOf(t, validMeta, special("blobs", tar.TypeSymlink, "../../outside"), file("blobs/"+sha("pwned"), "pwned"))
		}},
	}
	for _, tt := range append(hostileCases(), extra...) {
		if _, err := Unpack(context.Background(), bytes.NewReader(tt.archive(t)), dest, tt.limits); err == nil {
			t.Fatalf("%s: hostile bundle unpacked", tt.name)
		}
	}
	if data, err := os.ReadFile(victim); err != nil || string(data) != "original" {
		t.Fatalf("victim file = %q, %v; want it untouched", data, err)
	}
	want := map[string]string{"outside/": "", "outside/victim.txt": "original", "work/": "", "work/dest/": ""}
	if got := readTree(t, base); !maps.Equal(got, want) {
		t.Fatalf("tree around the destination changed: %v", keys(got))
	}
}

func TestUnpackRefusesANonEmptyDestination(t *testing.T) {
	src, _ := sampleSession(t)
	archive, _ := pack(t, src)
	dest := emptyDir(t)
	writeTree(t, dest, map[string]string{"keep.txt": "mine"})
	_, err := Unpack(context.Background(), bytes.NewReader(archive), dest, Limits{})
	if !errors.Is(err, ErrDestinationNotEmpty) || !strings.Contains(err.Error(), "new or empty directory") {
		t.Fatalf("err = %v, want ErrDestinationNotEmpty saying what to do", err)
	}
	if got := readTree(t, dest); !maps.Equal(got, map[string]string{"keep.txt": "mine"}) {
		t.Fatalf("destination changed: %v", keys(got))
	}
}

func TestUnpackCreatesAMissingDestinationAndRemovesItOnFailure(t *testing.T) {
	src, _ := sampleSession(t)
	archive, _ := pack(t, src)
	dest := filepath.Join(t.TempDir(), "new")
	if _, err := Unpack(context.Background(), bytes.NewReader(archive), dest, Limits{}); err != nil {
		t.Fatal(err)
	}
	if len(readTree(t, dest)) == 0 {
		t.Fatal("nothing unpacked into the created destination")
	}

	failed := filepath.Join(t.TempDir(), "never")
	hostile := bundleOf(t, validMeta, file("../evil", "x"))
	if _, err := Unpack(context.Background(), bytes.NewReader(hostile), failed, Limits{}); err == nil {
		t.Fatal("hostile bundle unpacked")
	}
	if _, err := os.Stat(failed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("destination created by a failed Unpack still exists (stat: %v)", err)
	}
}

func TestUnpackAcceptsAnExplicitBlobsDirectoryEntry(t *testing.T) {
	archive := bundleOf(t, validMeta, validEvents, special("blobs/", tar.TypeDir, ""), validBlob)
	dest := emptyDir(t)
	sum, err := Unpack(context.Background(), bytes.NewReader(archive), dest, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 3 || sum.Blobs != 1 {
		t.Fatalf("summary = %+v, want 3 files and 1 blob", sum)
	}
}

func TestUnpackRefusesCorruptStreams(t *testing.T) {
	good := bundleOf(t, validMeta, validEvents)
	tests := map[string][]byte{
		"not gzip":            []byte("PK\x03\x04 this is a zip"),
		"truncated gzip":      good[:len(good)-10],
		"flipped gzip byte":   flipByte(good, len(good)-6), // inside the CRC trailer
		"data after the tar":  gzipBytes(t, append(tarBytes(t, validMeta, validEvents), "trailing junk"...)),
		"empty input":         nil,
		"gzip of nothing":     gzipBytes(t, nil),
		"tar without entries": gzipBytes(t, tarBytes(t)),
	}
	for name, archive := range tests {
		t.Run(name, func(t *testing.T) {
			dest := emptyDir(t)
			if _, err := Unpack(context.Background(), bytes.NewReader(archive), dest, Limits{}); err == nil {
				t.Fatal("corrupt bundle unpacked")
			}
			if left := readTree(t, dest); len(left) != 0 {
				t.Fatalf("destination holds %v", keys(left))
			}
		})
	}
}

func TestUnpackStopsWhenCancelled(t *testing.T) {
	src, _ := sampleSession(t)
	archive, _ := pack(t, src)
	tests := map[string]func(cancel context.CancelFunc) io.Reader{
		"before starting": func(cancel context.CancelFunc) io.Reader {
			cancel()
			return bytes.NewReader(archive)
		},
		"after the first read": func(cancel context.CancelFunc) io.Reader {
			return &cancelAfterFirstRead{r: bytes.NewReader(archive), cancel: cancel}
		},
	}
	for name, reader := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dest := emptyDir(t)
			_, err := Unpack(ctx, reader(cancel), dest, Limits{})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if left := readTree(t, dest); len(left) != 0 {
				t.Fatalf("destination holds %v", keys(left))
			}
		})
	}
}

// cancelAfterFirstRead delivers a small first chunk, then cancels: the rest of the bundle must not
// be extracted.
type cancelAfterFirstRead struct {
	r      io.Reader
	cancel context.CancelFunc
	done   bool
}

func (c *cancelAfterFirstRead) Read(p []byte) (int, error) {
	if c.done {
		return c.r.Read(p)
	}
	c.done = true
	n, err := c.r.Read(p[:min(len(p), 64)])
	c.cancel()
	return n, err
}

// longerBodyBundle stores 1000 bytes of meta.json under a header that declares 5: the tar reader
// then meets body bytes where the next header should be.
func longerBodyBundle(t *testing.T) []byte {
	raw := tarBytes(t, file("meta.json", strings.Repeat("x", 1000)), validEvents)
	setHeaderSize(raw[:512], 5)
	return gzipBytes(t, raw)
}

// setHeaderSize rewrites the size field of a ustar header block and its checksum.
func setHeaderSize(block []byte, size int64) {
	copy(block[124:136], fmt.Sprintf("%011o\x00", size))
	copy(block[148:156], "        ") // the checksum is computed with its own field as spaces
	var sum int64
	for _, b := range block {
		sum += int64(b)
	}
	copy(block[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

func flipByte(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0xff
	return out
}

// TestUnpackVerifiesTheSessionAndLeavesNothing: a bundle whose entries are all well-formed but whose
// session does not verify is refused with the session package's error, and neither the destination
// nor anything beside it is left changed — whether the destination existed (empty) or not.
func TestUnpackVerifiesTheSessionAndLeavesNothing(t *testing.T) {
	outOfOrder := strings.Replace(validEvents.body, `"step":2`, `"step":1`, 1)
	cases := []struct {
		name    string
		archive func(t *testing.T) []byte
		check   func(err error) bool
	}{
		{"meta.json commits another log", func(t *testing.T) []byte {
			return bundleOf(t, metaFor("another log\n"), validEvents, validBlob)
		}, isType[*session.DigestMismatchError]},
		{"steps out of order, meta.json rehashed", func(t *testing.T) []byte {
			return bundleOf(t, metaFor(outOfOrder), file("events.jsonl", outOfOrder), validBlob)
		}, isType[*session.CorruptEventError]},
		{"a referenced blob is not in the bundle", func(t *testing.T) []byte {
			return bundleOf(t, validMeta, validEvents)
		}, isType[*session.MissingError]},
		{"meta.json is not JSON", func(t *testing.T) []byte {
			return bundleOf(t, file("meta.json", "{"), validEvents, validBlob)
		}, isType[*session.CorruptMetaError]},
	}
	for _, tc := range cases {
		for _, existing := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/destination exists %v", tc.name, existing), func(t *testing.T) {
				parent := t.TempDir()
				dest := filepath.Join(parent, "dest")
				if existing {
					if err := os.Mkdir(dest, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				before := readTree(t, parent)
				_, err := Unpack(context.Background(), bytes.NewReader(tc.archive(t)), dest, Limits{})
				if !tc.check(err) {
					t.Fatalf("err = %v (%T)", err, err)
				}
				if after := readTree(t, parent); !maps.Equal(before, after) {
					t.Fatalf("Unpack left %v behind; before it there was %v", keys(after), keys(before))
				}
			})
		}
	}
}

func isType[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// TestUnpackDropsUnreferencedBlobs: blobs no event references are counted and never left in the
// destination, whether they come before events.jsonl (extracted, then removed) or after it (never
// written), and their redaction tokens are not reported.
func TestUnpackDropsUnreferencedBlobs(t *testing.T) {
	strayBefore := `"stray ` + tokenA + `"`
	strayAfter := `"` + strings.Repeat("x", 4096) + `"`
	archive := bundleOf(t, validMeta, file(blobName(strayBefore), strayBefore), validBlob, validEvents, file(blobName(strayAfter), strayAfter))
	dest := filepath.Join(t.TempDir(), "dest")
	sum, err := Unpack(context.Background(), bytes.NewReader(archive), dest, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"meta.json": validMeta.body, "events.jsonl": validEvents.body, "blobs/": "", validBlob.hdr.Name: blobBody}
	if got := readTree(t, dest); !maps.Equal(got, want) {
		t.Fatalf("unpacked %v, want %v", keys(got), keys(want))
	}
	if sum.Unreferenced != 2 || sum.UnreferencedBytes != int64(len(strayBefore)+len(strayAfter)) || sum.Files != 3 || sum.Blobs != 1 ||
		sum.Bytes != int64(len(validMeta.body)+len(validEvents.body)+len(blobBody)) || len(sum.RedactionTokens) != 0 {
		t.Fatalf("summary %+v", sum)
	}
	// With no referenced blob at all, no empty blobs/ is left either.
	onlyStray := bundleOf(t, metaFor(start+end), file("events.jsonl", start+end), file(blobName(strayBefore), strayBefore))
	dest = filepath.Join(t.TempDir(), "dest")
	if sum, err := Unpack(context.Background(), bytes.NewReader(onlyStray), dest, Limits{}); err != nil || sum.Unreferenced != 1 {
		t.Fatalf("summary %+v, %v", sum, err)
	}
	if got := readTree(t, dest); len(got) != 2 {
		t.Fatalf("unpacked %v, want meta.json and events.jsonl", keys(got))
	}
}

const (
	start = `{"seq":0,"step":0,"ts":0,"lane":"0","callSite":"session","kind":"session_start","schemaVersion":2}` + "\n"
	end   = `{"seq":1,"step":1,"ts":0,"lane":"0","callSite":"session","kind":"session_end","schemaVersion":2}` + "\n"
)

// TestUnpackNamesBytesAfterTheGzipStream: a bundle is one gzip stream, as Pack writes it. Bytes after
// it (damage, or a second file appended) are refused with the offset where the stream ends and how
// many follow, not as an "unexpected EOF" or "invalid header" from the gzip reader.
func TestUnpackNamesBytesAfterTheGzipStream(t *testing.T) {
	good := bundleOf(t, validMeta, validEvents, validBlob)
	raw := tarBytes(t, validMeta, validEvents, validBlob)
	first := gzipBytes(t, raw[:512]) // the tar split across two gzip streams
	split := append(bytes.Clone(first), gzipBytes(t, raw[512:])...)
	size := int64(len(good))
	tests := []struct {
		name    string
		archive []byte
		want    TrailingDataError
	}{
		{"a few bytes", append(bytes.Clone(good), "junk"...), TrailingDataError{Offset: size, Bytes: 4}},
		{"more than a gzip header", append(bytes.Clone(good), bytes.Repeat([]byte("junk"), 30)...), TrailingDataError{Offset: size, Bytes: 120}},
		{"zeros", append(bytes.Clone(good), make([]byte, 512)...), TrailingDataError{Offset: size, Bytes: 512}},
		{"too many to count", append(bytes.Clone(good), make([]byte, maxTailCount+10)...), TrailingDataError{Offset: size, Bytes: maxTailCount, More: true}},
		{"two bundles concatenated", append(bytes.Clone(good), good...), TrailingDataError{Offset: size, Bytes: size, Gzip: true}},
		{"the archive in two gzip streams", split, TrailingDataError{Offset: int64(len(first)), Bytes: int64(len(split) - len(first)), Gzip: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := emptyDir(t)
			_, err := Unpack(context.Background(), bytes.NewReader(tt.archive), dest, Limits{})
			assertError(t, err, &tt.want)
			if !strings.Contains(err.Error(), fmt.Sprintf("after the end of the gzip stream at offset %d", tt.want.Offset)) {
				t.Errorf("err = %v, want it to name the offset", err)
			}
			if left := readTree(t, dest); len(left) != 0 {
				t.Fatalf("destination holds %v", keys(left))
			}
		})
	}
}

// TestUnpackRefusesANameHoldingANUL: archive/tar cuts a name at its first NUL byte, so an entry named
// "meta.json\x00…" would pass for meta.json, or for a duplicate of it. The raw header shows the NUL,
// and the entry is refused for it, whichever way the header spells its name.
func TestUnpackRefusesANameHoldingANUL(t *testing.T) {
	reason := reasonNULAt(len("meta.json"))
	// ustar writes a name of up to 100 bytes in the header; a NUL put in its place before "x".
	ustar := func(t *testing.T, first bool) []byte {
		entries := []entry{validMeta, validEvents, validBlob, file("meta.jsonZx", "{}")}
		if first {
			entries = []entry{file("meta.jsonZx", validMeta.body), validEvents, validBlob}
		}
		raw := tarBytes(t, entries...)
		at := bytes.Index(raw, []byte("meta.jsonZx"))
		raw[at+len("meta.json")] = 0
		setHeaderChecksum(raw[at-at%512 : at-at%512+512])
		return gzipBytes(t, raw)
	}
	// GNU tar writes a name over 100 bytes as a long-name entry before the header; PAX as a record.
	long := "meta.jsonZ" + strings.Repeat("x", 120)
	special := func(t *testing.T, format tar.Format, in string) []byte {
		hdr := tar.Header{Typeflag: tar.TypeReg, Name: long, Mode: 0o644, Size: int64(len(validMeta.body)), Format: format}
		raw := tarBytes(t, entry{hdr: hdr, body: validMeta.body}, validEvents, validBlob)
		at := bytes.Index(raw, []byte(in+"meta.jsonZ")) // in the long name or record, not checksummed
		if at < 0 {
			t.Fatalf("the archive does not hold %q", in+"meta.jsonZ")
		}
		raw[at+len(in+"meta.json")] = 0
		return gzipBytes(t, raw)
	}
	tests := []struct {
		name    string
		archive func(t *testing.T) []byte
		want    string
	}{
		{"ustar name, a duplicate once cut", func(t *testing.T) []byte { return ustar(t, false) }, "meta.json\x00x"},
		{"ustar name, meta.json once cut", func(t *testing.T) []byte { return ustar(t, true) }, "meta.json\x00x"},
		{"GNU long name", func(t *testing.T) []byte { return special(t, tar.FormatGNU, "") }, "meta.json\x00" + long[len("meta.jsonZ"):]},
		{"PAX path", func(t *testing.T) []byte { return special(t, tar.FormatPAX, "path=") }, "meta.json\x00" + long[len("meta.jsonZ"):]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dest := emptyDir(t)
			_, err := Unpack(context.Background(), bytes.NewReader(tt.archive(t)), dest, Limits{})
			assertError(t, err, &UnsafeEntryError{Name: tt.want, Reason: reason})
			if left := readTree(t, dest); len(left) != 0 {
				t.Fatalf("destination holds %v", keys(left))
			}
		})
	}
}

// setHeaderChecksum recomputes the checksum of a tar header block after an edit.
func setHeaderChecksum(block []byte) {
	copy(block[148:156], "        ") // the checksum is computed with its own field as spaces
	var sum int64
	for _, b := range block {
		sum += int64(b)
	}
	copy(block[148:156], fmt.Sprintf("%06o\x00 ", sum))
}
