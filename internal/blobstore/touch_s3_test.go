package blobstore

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A push that skips a blob already stored renews its modification time, so a blob sweep that listed
// the blob as old and unreferenced before the pushed session committed keeps it (its margin counts
// from the push). Removing the refresh leaves the first push's time and fails the test.
func TestS3PushRenewsTheTimeOfBlobsItSkips(t *testing.T) {
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
	if !after.LastModified.After(before.LastModified) {
		t.Errorf("the skipped blob's LastModified stayed %s (was %s), want it renewed by the second push", after.LastModified, before.LastModified)
	}
	if after.Size != before.Size {
		t.Errorf("renewing the blob changed its size from %d to %d", before.Size, after.Size)
	}
	// The renewed blob still reads back as itself.
	if _, err := st.Pull(ctx, "run-b", filepath.Join(t.TempDir(), "pulled")); err != nil {
		t.Errorf("pulling the session whose blob was renewed: %v", err)
	}
}

// A checkpoint capture asks Has before uploading a blob: a blob found is renewed, in place or (on a
// server that keeps the time on a same-key copy, as versitygw does) by storing it again, and is still
// reported found, so the capture counts it as deduplicated.
func TestS3CheckpointBlobHasRenewsTheBlob(t *testing.T) {
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
	after, err := objs.Stat(ctx, blobs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !after.LastModified.After(before.LastModified) {
		t.Errorf("the blob's LastModified stayed %s (was %s), want it renewed by Has", after.LastModified, before.LastModified)
	}
}
