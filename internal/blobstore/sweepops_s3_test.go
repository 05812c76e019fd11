package blobstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

func TestS3ListPagesAndDeleteKeysWorkInPagesAndBatches(t *testing.T) {
	env := startS3(t)
	_, objs := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	const n = 2*ListPageSize + 37
	var want []string
	err := forEach(ctx, 16, indexes(n), func(ctx context.Context, i int) error {
		return objs.Put(ctx, fmt.Sprintf("team/prod/blobs/sha256/%04d", i), bytes.NewReader([]byte{byte(i)}), 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want = append(want, fmt.Sprintf("team/prod/blobs/sha256/%04d", i))
	}
	var pages []int
	var got []string
	err = objs.ListPages(ctx, "team/prod/blobs/", func(page []ObjectInfo) error {
		pages = append(pages, len(page))
		for _, o := range page {
			if o.LastModified.IsZero() || o.Size != 1 {
				return fmt.Errorf("%s listed without its size or time: %+v", o.Key, o)
			}
			got = append(got, o.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pages) != fmt.Sprint([]int{ListPageSize, ListPageSize, 37}) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pages %v, %d keys listed (want %d in pages of %d)", pages, len(got), n, ListPageSize)
	}
	// Delete all but the last ten, with a key that does not exist among them.
	if err := objs.DeleteKeys(ctx, append(want[:n-10:n-10], "team/prod/blobs/sha256/missing")); err != nil {
		t.Fatal(err)
	}
	if left := keys(t, objs, "team/prod/blobs/"); fmt.Sprint(left) != fmt.Sprint(want[n-10:]) {
		t.Fatalf("left after the deletion: %v", left)
	}
	pages = nil
	if err := objs.ListPages(ctx, "team/prod/nothing/", func(page []ObjectInfo) error { pages = append(pages, len(page)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pages) != "[0]" {
		t.Errorf("an empty listing gave pages %v, want one empty page", pages)
	}
}
