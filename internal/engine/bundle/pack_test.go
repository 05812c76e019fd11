package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

var (
	tokenA = redact.Token("first secret")
	tokenB = redact.Token("second secret")
)

// sampleSession is a session directory as the recorder leaves it, vault included, plus files that are
// not part of the format. shipped is what a bundle of it holds.
func sampleSession(t *testing.T) (dir string, shipped map[string]string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "session")
	w, err := session.Create(dir, session.Meta{ID: "s1", FingerprintMode: "strict"}, session.WriterOptions{BlobThreshold: 64})
	if err != nil {
		t.Fatal(err)
	}
	big, _ := json.Marshal(strings.Repeat("binary-ish payload ", 500) + tokenB)
	for _, ev := range []session.Event{
		{Step: 0, Lane: "0", Kind: session.KindSessionStart},
		{Step: 1, Seq: 1, Lane: "0", Kind: session.KindToolCall, Name: "login", Args: json.RawMessage(`{"auth":"` + tokenA + `"}`),
			Result: json.RawMessage(`{"content":"hello ` + tokenA + `","n":1.50,"padding":"................"}`)},
		{Step: 2, Seq: 2, Lane: "0", Kind: session.KindToolCall, Name: "read", Args: json.RawMessage(`{"key":"` + tokenA + `"}`), Result: big},
		{Step: 3, Seq: 3, Lane: "0", Kind: session.KindSessionEnd},
	} {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetVault([]byte("ARWVAULT1 sealed secrets")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	shipped = map[string]string{}
	for name, content := range readTree(t, dir) {
		if name != "vault.enc" && !strings.HasSuffix(name, "/") {
			shipped[name] = content
		}
	}
	if blobs := slices.DeleteFunc(keys(shipped), func(n string) bool { return !strings.HasPrefix(n, "blobs/") }); len(blobs) != 2 {
		t.Fatalf("the sample session has blobs %v, want 2", blobs)
	}
	writeTree(t, dir, map[string]string{
		"notes.txt":        "not part of the format",
		"blobs/tmp-upload": "a half-written blob",
	})
	return dir, shipped
}

func pack(t *testing.T, dir string) ([]byte, *PackSummary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := Pack(context.Background(), dir, &buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

func TestPackUnpackRoundTripLeavesTheVaultBehind(t *testing.T) {
	src, shipped := sampleSession(t)
	archive, packed := pack(t, src)
	if bytes.Contains(archive, []byte("vault.enc")) || slices.Contains(tarNames(t, archive), "vault.enc") {
		t.Fatal("the bundle mentions vault.enc")
	}
	dest := emptyDir(t)
	unpacked, err := Unpack(context.Background(), bytes.NewReader(archive), dest, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(shipped)
	want["blobs/"] = ""
	if got := readTree(t, dest); !maps.Equal(got, want) {
		t.Fatalf("unpacked tree differs:\n got %v\nwant %v", keys(got), keys(want))
	}
	packed.Skipped = nil // Pack-only field
	if !equalSummaries(packed, unpacked) {
		t.Fatalf("Pack summary %+v, Unpack summary %+v", packed, unpacked)
	}
}

func TestPackReportsSizesAndSkippedNames(t *testing.T) {
	src, shipped := sampleSession(t)
	_, sum := pack(t, src)
	var bytesTotal int64
	for _, content := range shipped {
		bytesTotal += int64(len(content))
	}
	if sum.Files != 4 || sum.Blobs != 2 || sum.Bytes != bytesTotal {
		t.Fatalf("summary = %+v, want 4 files, 2 blobs, %d bytes", sum, bytesTotal)
	}
	if want := []string{"blobs/tmp-upload", "notes.txt", "vault.enc"}; !slices.Equal(sum.Skipped, want) {
		t.Fatalf("Skipped = %v, want %v", sum.Skipped, want)
	}
}

func TestPackCountsRedactionTokens(t *testing.T) {
	src, shipped := sampleSession(t)
	_, sum := pack(t, src)
	want := map[string]int{}
	for _, content := range shipped {
		for _, tok := range []string{tokenA, tokenB} {
			if n := strings.Count(content, tok); n > 0 {
				want[tok] += n
			}
		}
	}
	if want[tokenA] != 3 || want[tokenB] != 1 {
		t.Fatalf("the sample session holds tokens %v; the test expects tokenA 3 times and tokenB once", want)
	}
	if !maps.Equal(sum.RedactionTokens, want) {
		t.Fatalf("RedactionTokens = %v, want %v", sum.RedactionTokens, want)
	}
}

func TestPackIsDeterministic(t *testing.T) {
	src, _ := sampleSession(t)
	first, _ := pack(t, src)
	// Touch every file: modification times must not reach the bundle.
	later := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	for name := range readTree(t, src) {
		if err := os.Chtimes(filepath.Join(src, filepath.FromSlash(name)), later, later); err != nil {
			t.Fatal(err)
		}
	}
	second, _ := pack(t, src)
	if !bytes.Equal(first, second) {
		t.Fatal("packing the same session twice gave different bytes")
	}
}

func TestPackWritesNormalizedHeadersInFixedOrder(t *testing.T) {
	src, shipped := sampleSession(t)
	archive, _ := pack(t, src)
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() || gz.Comment != "" {
		t.Fatalf("gzip header carries name %q, mtime %v, comment %q", gz.Name, gz.ModTime, gz.Comment)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o644 || hdr.Uid != 0 || hdr.Gid != 0 ||
			hdr.Uname != "" || hdr.Gname != "" || hdr.ModTime.Unix() != 0 {
			t.Errorf("%s: header %+v is not normalized", hdr.Name, hdr)
		}
	}
	blobs := slices.Sorted(func(yield func(string) bool) {
		for name := range shipped {
			if strings.HasPrefix(name, "blobs/") && !yield(name) {
				return
			}
		}
	})
	if want := append([]string{"meta.json", "events.jsonl"}, blobs...); !slices.Equal(names, want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
}

func TestPackRefusesWhatItMustNotShip(t *testing.T) {
	valid := map[string]string{"meta.json": "{}", "events.jsonl": ""}
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		want    error
	}{
		{"symlinked meta.json", func(t *testing.T, dir string) {
			replaceWithSymlink(t, dir, "meta.json", "/etc/hostname")
		}, &UnsafeEntryError{Name: "meta.json", Reason: reasonSymlink}},
		{"symlinked blob", func(t *testing.T, dir string) {
			symlink(t, "../meta.json", filepath.Join(dir, "blobs", sha("{}")))
		}, &UnsafeEntryError{Name: "blobs/" + sha("{}"), Reason: reasonSymlink}},
		{"symlinked blobs directory", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "blobs"))
			symlink(t, t.TempDir(), filepath.Join(dir, "blobs"))
		}, &UnsafeEntryError{Name: "blobs", Reason: reasonSymlink}},
		{"stray symlink", func(t *testing.T, dir string) {
			symlink(t, "/", filepath.Join(dir, "rootfs"))
		}, &UnsafeEntryError{Name: "rootfs", Reason: reasonSymlink}},
		{"meta.json is a directory", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "meta.json"))
			os.Mkdir(filepath.Join(dir, "meta.json"), 0o755)
		}, &UnsafeEntryError{Name: "meta.json", Reason: reasonNotRegular}},
		{"missing meta.json", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "meta.json"))
		}, &MissingEntryError{Name: "meta.json"}},
		{"missing events.jsonl", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "events.jsonl"))
		}, &MissingEntryError{Name: "events.jsonl"}},
		{"blob not matching its name", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{blobName("expected"): "actual"})
		}, &BlobHashError{Name: blobName("expected"), Got: sha("actual")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "session")
			writeTree(t, dir, valid)
			if err := os.Mkdir(filepath.Join(dir, "blobs"), 0o755); err != nil {
				t.Fatal(err)
			}
			tt.prepare(t, dir)
			_, err := Pack(context.Background(), dir, io.Discard)
			switch want := tt.want.(type) {
			case *UnsafeEntryError:
				assertError(t, err, want)
			case *MissingEntryError:
				assertError(t, err, want)
			case *BlobHashError:
				assertError(t, err, want)
			}
		})
	}
}

func TestPackStopsWhenCancelled(t *testing.T) {
	src, _ := sampleSession(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Pack(ctx, src, io.Discard); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestTokenCounterFindsTokensSplitAcrossWrites(t *testing.T) {
	stream := "x" + tokenA + tokenA + "yy" + tokenB + "arw:redacted:nothex000000" + tokenA[:20]
	want := map[string]int{tokenA: 2, tokenB: 1}
	for chunk := 1; chunk <= len(stream); chunk++ {
		counts := map[string]int{}
		c := newTokenCounter(counts)
		for s := stream; s != ""; s = s[min(chunk, len(s)):] {
			c.Write([]byte(s[:min(chunk, len(s))]))
		}
		if !maps.Equal(counts, want) {
			t.Fatalf("chunk size %d: counts %v, want %v", chunk, counts, want)
		}
	}
}

func replaceWithSymlink(t *testing.T, dir, name, target string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	symlink(t, target, filepath.Join(dir, name))
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
}

func tarNames(t *testing.T, archive []byte) []string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

func equalSummaries(a, b *PackSummary) bool {
	return a.Files == b.Files && a.Bytes == b.Bytes && a.Blobs == b.Blobs &&
		maps.Equal(a.RedactionTokens, b.RedactionTokens) && slices.Equal(a.Skipped, b.Skipped)
}

func keys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
