package testenv_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/agentrewind/agentrewind/internal/testenv"
)

// TestS3ServerServesMinioGo is the storage smoke test: a real versitygw started on loopback takes a
// small and a multipart-sized object from minio-go and returns the same bytes, and lists them.
func TestS3ServerServesMinioGo(t *testing.T) {
	srv := testenv.StartS3Server(t)
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.MakeBucket(ctx, "smoke", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}

	large := make([]byte, 20<<20) // above minio-go's 16 MiB part size, so the upload is multipart
	if _, err := rand.Read(large); err != nil {
		t.Fatal(err)
	}
	objects := map[string][]byte{
		"sessions/s1/meta.json":  []byte(`{"schemaVersion":1}`),
		"blobs/sha256/ab/abcdef": large,
	}
	for key, data := range objects {
		info, err := c.PutObject(ctx, "smoke", key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		if info.Size != int64(len(data)) {
			t.Fatalf("put %s: stored %d bytes, sent %d", key, info.Size, len(data))
		}
	}
	for key, want := range objects {
		obj, err := c.GetObject(ctx, "smoke", key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		if sha256.Sum256(got) != sha256.Sum256(want) {
			t.Fatalf("get %s: %d bytes back differ from the %d put", key, len(got), len(want))
		}
	}
	var keys []string
	for o := range c.ListObjects(ctx, "smoke", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list: %v", o.Err)
		}
		keys = append(keys, o.Key)
	}
	sort.Strings(keys)
	if want := []string{"blobs/sha256/ab/abcdef", "sessions/s1/meta.json"}; !slices.Equal(keys, want) {
		t.Fatalf("list: got %v, want %v", keys, want)
	}
	if _, err := os.Stat(srv.ObjectPath("smoke", "sessions/s1/meta.json")); err != nil {
		t.Fatalf("the posix backend does not hold the object where ObjectPath says: %v", err)
	}
}
