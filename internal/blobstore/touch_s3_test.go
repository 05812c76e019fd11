package blobstore

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A push that finds a blob already stored sends nothing for it: no copy to renew it and, on a server
// that cannot renew in place (versitygw), no second upload. What keeps a sweep from deleting it
// before the commit is the settle after the index is stored (settle.go), not the blob's time.
func TestS3PushSendsNothingForABlobItSkips(t *testing.T) {
	env := startS3(t)
	st, objs := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	shared := payloads(7, 1, 4<<10)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	writeSession(t, a, "run-a", "", shared)
	writeSession(t, b, "run-b", "", shared)
	if _, err := st.Push(ctx, a); err != nil {
		t.Fatal(err)
	}
	var blobs []string // the payload's blob, not the log's segments
	for _, key := range keys(t, objs, "team/prod/blobs/") {
		if !slices.Contains(segmentKeys(st.Layout(), objs, "run-a"), key) {
			blobs = append(blobs, key)
		}
	}
	if len(blobs) != 1 {
		t.Fatalf("the first push stored blobs %v, want one", blobs)
	}
	before, err := objs.Stat(ctx, blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // S3 times have a resolution of a second
	res, err := st.Push(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if res.BlobsSkipped != 1 || res.BlobsUploaded != 0 {
		t.Fatalf("the second push uploaded %d and skipped %d blobs, want the shared one skipped", res.BlobsUploaded, res.BlobsSkipped)
	}
	after, err := objs.Stat(ctx, blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !after.LastModified.Equal(before.LastModified) || after.ETag != before.ETag {
		t.Errorf("the skipped blob was written again: stored %s (%s), was %s (%s)", after.LastModified, after.ETag, before.LastModified, before.ETag)
	}
	if _, err := st.Pull(ctx, "run-b", filepath.Join(t.TempDir(), "pulled")); err != nil {
		t.Errorf("pulling the session that shares the blob: %v", err)
	}
}

// A checkpoint capture asks HasResent before uploading a blob: a blob found is renewed, in place or
// (on a server that keeps the time on a same-key copy, as versitygw does) by storing it again, and is
// still reported found, so the capture counts it as deduplicated. Has, which a preview and a restore
// ask, only looks.
func TestS3CheckpointCaptureRenewsTheBlobItFindsAndARestoreDoesNot(t *testing.T) {
	env := startS3(t)
	st, objs := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a")
	writeSession(t, dir, "run-a", "", payloads(9, 1, 4<<10))
	if _, err := st.Push(ctx, dir); err != nil {
		t.Fatal(err)
	}
	blobs := keys(t, objs, "team/prod/blobs/")
	before, err := objs.Stat(ctx, blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	hash, ok := st.Layout().BlobHashFromKey(blobs[0])
	if !ok {
		t.Fatalf("%s is not a blob key", blobs[0])
	}
	time.Sleep(1100 * time.Millisecond)
	has, err := (checkpointBlobs{st}).Has(ctx, hash)
	if err != nil || !has {
		t.Fatalf("Has(%s) = %v, %v; want true", hash, has, err)
	}
	looked, err := objs.Stat(ctx, blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !looked.LastModified.Equal(before.LastModified) {
		t.Errorf("Has changed the blob's LastModified from %s to %s: a reader wrote", before.LastModified, looked.LastModified)
	}
	has, _, err = (checkpointBlobs{st}).HasResent(ctx, hash)
	if err != nil || !has {
		t.Fatalf("HasResent(%s) = %v, %v; want true", hash, has, err)
	}
	after, err := objs.Stat(ctx, blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !after.LastModified.After(before.LastModified) {
		t.Errorf("the blob's LastModified stayed %s (was %s), want it renewed by HasResent", after.LastModified, before.LastModified)
	}
}
