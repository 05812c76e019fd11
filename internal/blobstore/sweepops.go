package blobstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// The operations a blob sweep needs beyond ObjectStore: a listing it can stream a page at a time
// (a million blob keys need not be held at once, and each page is one request it can count) and
// deletion in batches. S3ObjectStore and MemObjectStore implement both.

// ListPageSize is the most keys one listing request returns (the S3 limit), and the most keys one
// batch deletion removes.
const ListPageSize = 1000

// ListPages calls fn with each page of the objects under prefix, in key order: one ListObjectsV2
// request per page, each retried under the store's policy. An error from fn stops the listing.
// The context is checked between pages; a page in flight is bounded by the request timeout.
func (s *S3ObjectStore) ListPages(ctx context.Context, prefix string, fn func([]ObjectInfo) error) error {
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("list %s: %w", s.URL(prefix), context.Cause(ctx))
		}
		var page []ObjectInfo
		// Each attempt lists under its own deadline, body included: a server that sends half a page
		// and stalls must not hold the sweep past its timeout.
		err := s.do(ctx, "list", prefix, 0, s.retry.MaxAttempts, func(ctx context.Context) error {
			page = page[:0]
			return s.listAfter(ctx, prefix, after, ListPageSize, &page) // one page per request
		})
		if err != nil {
			return err
		}
		if len(page) > 0 || after == "" { // an empty listing is one empty page
			if err := fn(page); err != nil {
				return err
			}
		}
		if len(page) < ListPageSize {
			return nil
		}
		after = page[len(page)-1].Key
	}
}

// DeleteKeys removes keys with multi-object delete requests of at most ListPageSize keys each; a
// missing object is not an error. It returns the first failure after trying every batch once more.
func (s *S3ObjectStore) DeleteKeys(ctx context.Context, keys []string) error {
	for batch := range slices.Chunk(keys, ListPageSize) {
		err := s.do(ctx, "delete", batch[0], 0, s.retry.MaxAttempts, func(ctx context.Context) error {
			ch := make(chan minio.ObjectInfo, len(batch))
			for _, k := range batch {
				ch <- minio.ObjectInfo{Key: k}
			}
			close(ch)
			var errs []error
			for r := range s.client.RemoveObjectsWithResult(ctx, s.bucket, ch, minio.RemoveObjectsOptions{}) {
				if r.Err != nil && minio.ToErrorResponse(r.Err).Code != "NoSuchKey" {
					errs = append(errs, fmt.Errorf("%s: %w", r.ObjectName, r.Err))
				}
			}
			return errors.Join(errs...)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ListPages implements the paged listing over the in-memory store, ListPageSize keys a page.
func (m *MemObjectStore) ListPages(ctx context.Context, prefix string, fn func([]ObjectInfo) error) error {
	all, err := m.List(ctx, prefix)
	if err != nil {
		return err
	}
	for page := range slices.Chunk(all, ListPageSize) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
	}
	if len(all) == 0 {
		return fn(nil)
	}
	return nil
}

// DeleteKeys removes keys; missing ones are not an error.
func (m *MemObjectStore) DeleteKeys(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := m.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// SetModified sets the modification time the in-memory store reports for key, so tests can age
// objects; it reports whether there is an object at key.
func (m *MemObjectStore) SetModified(key string, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[key]
	if ok {
		o.modified = t
		m.objects[key] = o
	}
	return ok
}

// Keys returns every key under prefix, sorted, for tests.
func (m *MemObjectStore) Keys(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Objects is the object store under the session store, for the blob sweep, which works on keys.
func (s *SessionStore) Objects() ObjectStore { return s.objects }
