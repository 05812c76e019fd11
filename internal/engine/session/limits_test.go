package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// setLimit lowers a cap for one test.
func setLimit(t *testing.T, limit *int64, v int64) {
	old := *limit
	*limit = v
	t.Cleanup(func() { *limit = old })
}

// repeatReader is an endless run of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// hugeLog is a log whose second line is n bytes of one JSON string, streamed rather than held.
func hugeLog(n int64) (io.Reader, string) {
	first := `{"seq":0,"step":0,"ts":0,"lane":"0","callSite":"session","kind":"session_start","schemaVersion":3}` + "\n"
	return io.MultiReader(strings.NewReader(first+`{"kind":"note","text":"`), io.LimitReader(repeatReader('a'), n),
		strings.NewReader("\"}\n"+`{"seq":1,"step":2,"ts":0,"lane":"0","callSite":"session","kind":"session_end","schemaVersion":3}`+"\n")), first
}

// TestALineOverTheCapIsRefusedWithItsOffset: a line of events.jsonl is held whole while it is
// decoded, so one 200 MB line cost the reader gigabytes. A line over MaxLineBytes is now refused,
// naming its line and the byte offset it starts at, and the reader allocates no more than the cap
// (and its buffer's growth) however long the line is; the rest of the log is still hashed.
func TestALineOverTheCapIsRefusedWithItsOffset(t *testing.T) {
	for _, tc := range []struct {
		limit, line int64
		budget      uint64
	}{
		{1 << 20, 200 << 20, 8 << 20},               // a low cap: the line's size does not count
		{MaxLineBytes, 200 << 20, 3 * MaxLineBytes}, // the real cap and the reported bundle's line
		{64 << 10, 10 << 20, 2 << 20},               // a cap below the read buffer
	} {
		t.Run(fmt.Sprintf("cap %d line %d", tc.limit, tc.line), func(t *testing.T) {
			setLimit(t, &lineLimit, tc.limit)
			r, first := hugeLog(tc.line)
			var err error
			n := allocated(func() { _, err = ReadEvents(r, "", nil, EventsFile) })
			var ce *CorruptEventError
			var tl *TooLargeError
			if !errors.As(err, &ce) || ce.Line != 2 || ce.Offset != int64(len(first)) || !errors.As(err, &tl) || tl.Limit != tc.limit {
				t.Fatalf("ReadEvents = %v, want line 2 at byte offset %d refused over the %d-byte cap", err, len(first), tc.limit)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("line 2 (byte offset %d)", len(first))) {
				t.Errorf("the refusal %q does not say where the line starts", err)
			}
			t.Logf("refusing a %d-byte line over a %d-byte cap allocated %d bytes", tc.line, tc.limit, n)
			if n > tc.budget {
				t.Errorf("refusing a %d-byte line allocated %d bytes, over %d", tc.line, n, tc.budget)
			}
		})
	}
}

// TestTheLineCapIsInclusive: the longest line of a recorded session at exactly the cap reads; one
// byte less refuses that line. The writer refuses to write a line over the cap, so a session it
// committed always reads back.
func TestTheLineCapIsInclusive(t *testing.T) {
	dir := t.TempDir()
	record(t, dir, sampleEvents("answer"))
	data, err := os.ReadFile(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	longest, at, line := 0, int64(0), 0
	var offset int64
	for i, l := range bytes.SplitAfter(data, []byte("\n")) {
		if len(l) > longest {
			longest, at, line = len(l), offset, i+1
		}
		offset += int64(len(l))
	}
	setLimit(t, &lineLimit, int64(longest))
	if _, err := Open(dir); err != nil {
		t.Fatalf("a longest line at the cap: %v", err)
	}
	lineLimit = int64(longest - 1)
	var ce *CorruptEventError
	if _, err := Open(dir); !errors.As(err, &ce) || ce.Line != line || ce.Offset != at {
		t.Fatalf("a longest line one byte over the cap: %v, want line %d at %d", err, line, at)
	}

	// The writer refuses the line, and the session goes on without it.
	w, err := Create(filepath.Join(t.TempDir(), "w"), Meta{ID: "w"}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setLimit(t, &lineLimit, 512)
	var tl *TooLargeError
	if err := w.Append(Event{Step: 0, Lane: "0", Kind: KindSessionStart}); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(Event{Step: 1, Lane: "0", Kind: KindNote, Text: strings.Repeat("n", 600)}); !errors.As(err, &tl) {
		t.Fatalf("appending a line over the cap: %v, want a TooLargeError", err)
	}
	if err := w.Append(Event{Step: 1, Lane: "0", Kind: KindSessionEnd, OK: boolPtr(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(w.Dir()); err != nil {
		t.Fatalf("the session without the refused line: %v", err)
	}
}

// TestABlobOrMetaOverTheCapIsRefusedUnread: a blob or meta.json over its cap is refused from its
// size, before it is read; the writer refuses to store such a blob.
func TestABlobOrMetaOverTheCapIsRefusedUnread(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("b", 40<<10) // stored as a blob
	record(t, dir, sampleEvents(big))
	blobs, _ := filepath.Glob(filepath.Join(dir, BlobsDir, "*"))
	if len(blobs) == 0 {
		t.Fatal("no blob was written")
	}
	fi, err := os.Stat(blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	setLimit(t, &blobLimit, fi.Size()-1)
	var tl *TooLargeError
	if _, err := Open(dir); !errors.As(err, &tl) || tl.Size != fi.Size() {
		t.Fatalf("a blob over the cap: %v, want a TooLargeError with its size", err)
	}
	w, err := Create(filepath.Join(t.TempDir(), "w"), Meta{ID: "w"}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.PutBlob(bytes.Repeat([]byte("x"), int(fi.Size()))); !errors.As(err, &tl) {
		t.Fatalf("storing a blob over the cap: %v", err)
	}
	blobLimit = MaxBlobBytes

	meta, err := os.Stat(filepath.Join(dir, MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	setLimit(t, &metaLimit, meta.Size()-1)
	if _, err := Open(dir); !errors.As(err, &tl) || !strings.Contains(err.Error(), MetaFile) {
		t.Fatalf("meta.json over the cap: %v", err)
	}
}

// TestLineCheckerRefusesAsTheLineStreams: the checker an extraction streams events.jsonl through
// fails the write that passes the cap, however the bytes are split, with the line and its offset.
func TestLineCheckerRefusesAsTheLineStreams(t *testing.T) {
	setLimit(t, &lineLimit, 8)
	log := "1234567\n123456\n12345678\n1\n" // the cap counts the newline
	for chunk := 1; chunk <= len(log); chunk++ {
		c := NewLineChecker(EventsFile)
		var err error
		written := 0
		for i := 0; i < len(log) && err == nil; i += chunk {
			var n int
			n, err = c.Write([]byte(log[i:min(i+chunk, len(log))]))
			written += n
		}
		var ce *CorruptEventError
		if !errors.As(err, &ce) || ce.Line != 3 || ce.Offset != 15 {
			t.Fatalf("chunks of %d: %v, want line 3 at byte offset 15", chunk, err)
		}
	}
}
