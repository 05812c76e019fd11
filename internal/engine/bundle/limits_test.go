package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// repeat is an endless run of one byte.
type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// streamedBundle is a bundle of meta.json and an events.jsonl whose second line is n bytes: under a
// megabyte compressed, built without holding the line.
func streamedBundle(t *testing.T, n int64) (bundle []byte, secondLine int64) {
	t.Helper()
	first := `{"seq":0,"step":0,"ts":0,"lane":"0","callSite":"session","kind":"session_start","schemaVersion":2}` + "\n"
	log := func() io.Reader {
		return io.MultiReader(strings.NewReader(first+`{"kind":"note","text":"`), io.LimitReader(repeat('a'), n), strings.NewReader("\"}\n"))
	}
	size, _ := io.Copy(io.Discard, log())
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	meta := metaFor("") // its hash does not matter: the line is refused first
	for _, e := range []struct {
		name string
		size int64
		body io.Reader
	}{
		{"meta.json", meta.hdr.Size, strings.NewReader(meta.body)},
		{"events.jsonl", size, log()},
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: e.size}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), int64(len(first))
}

// TestUnpackRefusesALineOverTheCapAsItStreams: a 0.9 MB bundle whose events.jsonl is one 200 MB
// line took 894 MB to unpack. The line is refused as it is extracted, naming its line and byte
// offset, before the rest of it is written or read, with a few megabytes of heap in all.
func TestUnpackRefusesALineOverTheCapAsItStreams(t *testing.T) {
	archive, offset := streamedBundle(t, 200<<20)
	if len(archive) > 1<<20 {
		t.Fatalf("the bundle is %d bytes; the test wants a small one", len(archive))
	}
	dest := emptyDir(t)
	r := bytes.NewReader(archive)
	var err error
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = Unpack(context.Background(), r, dest, Limits{})
	runtime.ReadMemStats(&after)
	var ce *session.CorruptEventError
	var tl *session.TooLargeError
	if !errors.As(err, &ce) || ce.Line != 2 || ce.Offset != offset || !errors.As(err, &tl) || tl.Limit != session.MaxLineBytes {
		t.Fatalf("Unpack = %v, want line 2 at byte offset %d refused over the line cap", err, offset)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("line 2 (byte offset %d)", offset)) {
		t.Errorf("the refusal %q does not say where the line starts", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("refusing the line allocated %d bytes", n)
	}
	if r.Len() == 0 {
		t.Error("the whole bundle was read: the extraction did not stop at the cap")
	}
	if left := readTree(t, dest); len(left) != 0 {
		t.Fatalf("destination not restored, holds %v", keys(left))
	}
}

// TestUnpackRefusesABlobOrMetaOverTheCapFromItsHeader: a blob or meta.json a reader would have to
// hold whole past its cap is refused from its header, wherever it comes, before its body is read.
func TestUnpackRefusesABlobOrMetaOverTheCapFromItsHeader(t *testing.T) {
	big := []struct {
		name string
		size int64
	}{
		{blobName("big"), session.MaxBlobBytes + 1},
		{"meta.json", session.MaxMetaBytes + 1},
	}
	for _, b := range big {
		for _, before := range [][]entry{nil, {validEvents}, {validEvents, validBlob}} {
			t.Run(fmt.Sprintf("%s after %d", b.name, len(before)), func(t *testing.T) {
				var buf bytes.Buffer
				gz := gzip.NewWriter(&buf)
				_, _ = gz.Write(tarBytes(t, before...)[:tarLen(before)])
				tw := tar.NewWriter(gz)
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: b.name, Mode: 0o644, Size: b.size}); err != nil {
					t.Fatal(err)
				}
				_ = tw.Flush() // the body never comes: it must not be waited for
				_ = gz.Close()
				dest := emptyDir(t)
				_, err := Unpack(context.Background(), &buf, dest, Limits{})
				var ue *UnsafeEntryError
				if !errors.As(err, &ue) || ue.Name != b.name || !strings.Contains(ue.Reason, "cap") {
					t.Fatalf("Unpack = %v, want %s refused over its cap", err, b.name)
				}
			})
		}
	}
}

// tarLen is the length of entries' tar stream without its end-of-archive blocks.
func tarLen(entries []entry) int {
	n := 0
	for _, e := range entries {
		n += 512 + (len(e.body)+511)/512*512
	}
	return n
}
