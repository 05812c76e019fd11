package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"
)

var errReaderClosed = errors.New("read after Close")

func (s *S3ObjectStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	r := &s3Reader{s: s, parent: ctx, key: key, size: -1}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// s3Reader reads one object. When the transfer breaks (a reset, a truncated body, a stalled
// connection) it reopens the object at the offset it reached, pinned to the ETag it started with so
// that it never splices two versions of an object together. Reopenings that make no progress are
// bounded by the retry policy; each one that does brings the end closer.
type s3Reader struct {
	s        *S3ObjectStore
	parent   context.Context
	key      string
	etag     string
	size     int64 // -1 until the first response
	off      int64
	body     io.ReadCloser
	stop     func() // cancels the attempt's context and its watchdog
	failures int    // consecutive failed reads without progress
	err      error  // sticky: once a read fails for good, it keeps failing
}

func (r *s3Reader) open() error {
	n, err := r.s.retry.retry(r.parent, r.openOnce)
	if err != nil {
		return r.s.fail(r.parent, "get", r.key, n, err)
	}
	return nil
}

// openOnce sends one GET. Its context lives as long as the body: a watchdog cancels it when the
// headers take longer than the request timeout, or the body longer than its size allows.
func (r *s3Reader) openOnce() error {
	ctx, cancel := context.WithCancel(r.parent)
	watchdog := time.AfterFunc(r.s.deadline(0), cancel)
	stop := func() { watchdog.Stop(); cancel() }
	opts := minio.GetObjectOptions{}
	if r.etag != "" {
		_ = opts.SetMatchETag(r.etag)
	}
	if r.off > 0 {
		_ = opts.SetRange(r.off, 0)
	}
	body, info, header, err := r.s.core.GetObject(ctx, r.s.bucket, r.key, opts)
	if err != nil {
		stop()
		return err
	}
	if err := r.checkRange(header.Get("Content-Range")); err != nil {
		body.Close()
		stop()
		return err
	}
	if r.size < 0 {
		r.etag, r.size = info.ETag, info.Size
	}
	watchdog.Reset(r.s.deadline(info.Size))
	r.body, r.stop = body, stop
	return nil
}

func (r *s3Reader) Read(p []byte) (int, error) {
	for r.err == nil {
		if r.body == nil {
			if err := r.open(); err != nil {
				r.err = err
				break
			}
		}
		n, err := r.body.Read(p)
		r.off += int64(n)
		if n > 0 {
			r.failures = 0
		}
		if err == nil || (err == io.EOF && r.off == r.size) {
			return n, err
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // fewer bytes than the object has: never a short object
		}
		r.closeBody()
		if n > 0 {
			return n, nil // deliver what arrived; the next Read resumes after it
		}
		r.failures++
		if r.failures >= r.s.retry.MaxAttempts || !retryable(r.parent, err) {
			r.err = r.s.fail(r.parent, "read", r.key, r.failures, err)
			break
		}
		if !sleep(r.parent, r.s.retry.delay(r.failures-1, 0.5)) {
			r.err = r.s.fail(r.parent, "read", r.key, r.failures, r.parent.Err())
		}
	}
	return 0, r.err
}

// checkRange makes sure a resumed read starts where the last one stopped: a server that ignored the
// Range header would send the object from its start, and splicing that on would corrupt it.
func (r *s3Reader) checkRange(contentRange string) error {
	if r.off == 0 {
		return nil
	}
	var start, end, total int64
	if _, err := fmt.Sscanf(contentRange, "bytes %d-%d/%d", &start, &end, &total); err != nil || start != r.off || total != r.size {
		return fmt.Errorf("resuming the read at byte %d, the server answered with range %q: it cannot resume reads", r.off, contentRange)
	}
	return nil
}

func (r *s3Reader) closeBody() {
	if r.body != nil {
		r.body.Close()
		r.stop()
		r.body, r.stop = nil, nil
	}
}

func (r *s3Reader) Close() error {
	r.closeBody()
	if r.err == nil {
		r.err = errReaderClosed
	}
	return nil
}
