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

// ErrTooSlow is wrapped by the error of a transfer abandoned for moving slower than the minimum
// throughput: retrying it would be as slow.
var ErrTooSlow = errors.New("transfer slower than the minimum throughput")

// TooSlowError says how slow an abandoned transfer was.
type TooSlowError struct {
	Bytes   int64         // moved before it was abandoned
	Elapsed time.Duration // spent waiting on the server, resumed attempts included
	Min     int64         // bytes per second
}

func (e *TooSlowError) Error() string {
	return fmt.Sprintf("%v: %d bytes in %s of waiting on the server, resumed attempts included (%s/s), below the minimum of %s/s",
		ErrTooSlow, e.Bytes, e.Elapsed.Round(time.Millisecond), rate(float64(e.Bytes)/max(e.Elapsed.Seconds(), 1e-9)), rate(float64(e.Min)))
}

func (e *TooSlowError) Unwrap() error { return ErrTooSlow }

func rate(bps float64) string {
	switch {
	case bps >= 1<<20:
		return fmt.Sprintf("%.1f MiB", bps/(1<<20))
	case bps >= 1<<10:
		return fmt.Sprintf("%.1f KiB", bps/(1<<10))
	}
	return fmt.Sprintf("%.0f B", bps)
}

func (s *S3ObjectStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	tctx, cancel := context.WithCancelCause(ctx)
	r := &s3Reader{s: s, ctx: tctx, cancel: cancel, key: key, size: -1}
	for r.body == nil && r.err == nil {
		if err := r.openOnce(); err != nil {
			r.failed("get", err)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return r, nil
}

// s3Reader reads one object. When the transfer breaks (a reset, a truncated body, no byte for the
// request timeout) it reopens the object at the offset it reached, pinned to the ETag it started
// with so that it never splices two versions of an object together. Attempts that make no progress
// are bounded by the retry policy. Progress alone does not keep it going: the time spent waiting in
// Read, resumed attempts included, may exceed the retry budget only by what the bytes delivered
// allow at the minimum throughput, or the read is abandoned with a *TooSlowError, so a server that
// trickles cannot keep a read alive for hours. Time the caller spends between reads is not counted.
type s3Reader struct {
	s      *S3ObjectStore
	ctx    context.Context // the caller's, cancelled with a *TooSlowError when the read falls below the floor
	cancel context.CancelCauseFunc
	key    string
	etag   string
	size   int64 // -1 until the first response
	off    int64 // bytes delivered
	body   io.ReadCloser
	idle   *time.Timer // cancels the attempt when the server sends nothing for the request timeout
	stop   func()      // cancels the attempt's context and its idle timer
	waited time.Duration

	failures int   // consecutive failed attempts without progress
	err      error // sticky: once a read fails for good, it keeps failing
}

// openOnce sends one GET. Its context lives as long as the body; it is cancelled when the headers,
// or any next byte of the body while Read waits for one, take longer than the request timeout.
func (r *s3Reader) openOnce() error {
	ctx, cancel := context.WithCancel(r.ctx)
	idle := time.AfterFunc(r.s.timeout, cancel)
	stop := func() { idle.Stop(); cancel() }
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
	r.s.signed.Store(true)
	if r.size < 0 {
		r.etag, r.size = info.ETag, info.Size
	}
	idle.Stop() // Read arms it while it waits
	r.body, r.idle, r.stop = body, idle, stop
	return nil
}

// floor arms the throughput check for one Read: the time waited so far plus this call's may not
// exceed the retry budget (what one request may take against a server that does not answer) plus
// what the bytes already delivered allow at the minimum throughput. The budget as grace means the
// floor never cuts short what the retries of a stalled request would still allow.
// The returned function disarms it and adds this call's time.
func (r *s3Reader) floor() func() {
	allowed := r.s.retry.Budget(r.s.timeout) + time.Duration(float64(r.off)/float64(r.s.minThroughput)*float64(time.Second))
	enter, off, waited := time.Now(), r.off, r.waited
	abandon := func() {
		r.cancel(&TooSlowError{Bytes: off, Elapsed: waited + time.Since(enter), Min: r.s.minThroughput})
	}
	if allowed <= waited {
		abandon()
		return func() {}
	}
	t := time.AfterFunc(allowed-waited, abandon)
	return func() { t.Stop(); r.waited += time.Since(enter) }
}

func (r *s3Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	done := r.floor()
	defer done()
	for r.err == nil {
		if r.body == nil {
			if err := r.openOnce(); err != nil {
				r.failed("read", err)
				continue
			}
		}
		r.idle.Reset(r.s.timeout)
		n, err := r.body.Read(p)
		r.idle.Stop()
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
		r.failed("read", err)
	}
	return 0, r.err
}

// failed counts an attempt that made no progress and waits before the next one, or ends the read
// for good: the attempts are used up, the error is permanent, or the caller's context or the
// throughput floor ended it.
func (r *s3Reader) failed(op string, err error) {
	r.failures++
	if r.failures < r.s.retry.MaxAttempts && retryable(r.ctx, err) &&
		sleep(r.ctx, r.s.retry.delay(r.failures-1, 0.5)) {
		return
	}
	r.err = r.s.fail(r.ctx, op, r.key, r.failures, err)
	r.closeBody()
	r.cancel(nil)
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
		r.body, r.stop, r.idle = nil, nil, nil
	}
}

func (r *s3Reader) Close() error {
	r.closeBody()
	r.cancel(nil)
	if r.err == nil {
		r.err = errReaderClosed
	}
	return nil
}
