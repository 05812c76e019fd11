package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
)

// S3ObjectStore is the ObjectStore of an S3-compatible bucket, through minio-go. minio-go's own
// retries are off: every request here gets a deadline scaled to its size and a bounded number of
// attempts with backoff, and object reads resume after an interrupted transfer.
type S3ObjectStore struct {
	client *minio.Client
	core   minio.Core
	bucket string
	// timeout is the deadline of a request carrying no body; a body adds size/minThroughput.
	timeout       time.Duration
	minThroughput int64
	retry         RetryPolicy
	// signed says a request signed with these credentials was accepted, so a later signature
	// mismatch on an upload means its bytes were altered on the way, not that the keys are wrong.
	signed atomic.Bool
	// copyRenews is whether a same-key copy renews an object's modification time (see Touch).
	copyRenews atomic.Int32
	// http sends the requests minio-go does not make (presigned deletes and clock reads, fence.go)
	// through the same transport.
	http *http.Client
}

// partSize is the size above which minio-go switches to a multipart upload. Session objects are
// mostly far smaller, so nearly every upload is a single PUT, which S3 stores all-or-nothing.
const partSize = 64 << 20

// URL names an object in errors and messages: s3://bucket/key.
func (s *S3ObjectStore) URL(key string) string { return "s3://" + s.bucket + "/" + key }

// Bucket is the bucket the store reads and writes.
func (s *S3ObjectStore) Bucket() string { return s.bucket }

// deadline is how long one attempt moving size bytes may take before it is abandoned and retried.
func (s *S3ObjectStore) deadline(size int64) time.Duration {
	return s.timeout + time.Duration(max(size, 0)/s.minThroughput)*time.Second
}

// do runs one request with a per-attempt deadline and the retry policy.
func (s *S3ObjectStore) do(ctx context.Context, op, key string, size int64, attempts int, fn func(ctx context.Context) error) error {
	policy := s.retry
	policy.MaxAttempts = min(policy.MaxAttempts, attempts)
	n, err := policy.retry(ctx, func() error {
		limit := s.deadline(size)
		actx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		actx, clocks := withClocks(actx)
		err := fn(actx)
		switch {
		case err == nil:
			s.signed.Store(true)
		case errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
			err = fmt.Errorf("%w: no complete answer within %s (the request timeout %s%s)", err, limit, s.timeout, sizeAllowance(size, s.minThroughput))
		case s.alteredInTransit(op, err):
			err = &alteredError{err}
		default:
			err = clocks.attach(err)
		}
		return err
	})
	if err != nil {
		return s.fail(ctx, op, key, n, err)
	}
	return nil
}

// sizeAllowance explains the part of an attempt's deadline that a body adds.
func sizeAllowance(size, minThroughput int64) string {
	if size <= 0 {
		return ""
	}
	return fmt.Sprintf(", plus one second per %d bytes of the %d sent", minThroughput, size)
}

// alteredInTransit says whether an upload was refused because its bytes changed on the way: the
// server found a body hash other than the one signed, or a signature mismatch once other requests
// signed with the same credentials were accepted. Re-sending it may succeed; blaming the
// credentials would send the user after the wrong problem.
func (s *S3ObjectStore) alteredInTransit(op string, err error) bool {
	if op != "put" && op != "create" {
		return false
	}
	switch minio.ToErrorResponse(err).Code {
	case "XAmzContentSHA256Mismatch", "BadDigest", "InvalidDigest", "IncompleteBody":
		return true
	case "SignatureDoesNotMatch":
		return s.signed.Load()
	}
	return false
}

// alteredError is an upload the server refused because its bytes were altered on the way.
type alteredError struct{ err error }

// Error leaves out the server's own message, which for SignatureDoesNotMatch says to check the keys.
func (e *alteredError) Error() string {
	resp := minio.ToErrorResponse(e.err)
	return fmt.Sprintf("the server refused the upload (%d %s): it received other bytes than were sent and signed (other requests with these credentials succeeded, so they are not the cause): something on the path altered the upload; check proxies and the network",
		resp.StatusCode, resp.Code)
}

func (e *alteredError) Unwrap() error { return e.err }

// fail turns the last error of a request into the error callers see: ErrNotFound and
// ErrBucketNotFound for what is missing, the context's error when the caller gave up, OpError else.
func (s *S3ObjectStore) fail(ctx context.Context, op, key string, attempts int, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", op, s.URL(key), context.Cause(ctx))
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case credentialCodes[resp.Code]:
			// Some servers answer an unknown access key with a 404 (versitygw: XAdminUserNotFound);
			// it is a credentials problem, never a missing object or bucket.
		case resp.Code == "NoSuchBucket":
			return fmt.Errorf("%s %s: bucket %q: %w: create it, or push with --create-bucket", op, s.URL(key), s.bucket, ErrBucketNotFound)
		case resp.Code == "NoSuchKey" || resp.StatusCode == 404:
			return fmt.Errorf("%s %s: %w", op, s.URL(key), ErrNotFound)
		}
	}
	return &OpError{Op: op, Object: s.URL(key), Attempts: attempts, Err: err}
}

func (s *S3ObjectStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.put(ctx, "put", key, r, size, minio.PutObjectOptions{})
}

// Create is a PUT with If-None-Match: *, which S3, MinIO and versitygw refuse with 412 when the key
// holds an object. An attempt that stored the object but lost its answer is refused the same way
// when retried, so a caller that gets ErrExists reads the object to see whose it is.
func (s *S3ObjectStore) Create(ctx context.Context, key string, r io.Reader, size int64) error {
	var opts minio.PutObjectOptions
	opts.SetMatchETagExcept("*")
	err := s.put(ctx, "create", key, r, size, opts)
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.Code == "PreconditionFailed" {
		return fmt.Errorf("create %s: %w", s.URL(key), ErrExists)
	}
	return err
}

func (s *S3ObjectStore) put(ctx context.Context, op, key string, r io.Reader, size int64, opts minio.PutObjectOptions) error {
	if size < 0 {
		return fmt.Errorf("put %s: the object size is required (got %d)", s.URL(key), size)
	}
	body, attempts, err := rewindable(r, size)
	if err != nil {
		return fmt.Errorf("put %s: %w", s.URL(key), err)
	}
	opts.ContentType, opts.PartSize = "application/octet-stream", partSize
	return s.do(ctx, op, key, size, attempts, func(ctx context.Context) error {
		rd, err := body()
		if err != nil {
			return err
		}
		_, err = s.client.PutObject(ctx, s.bucket, key, rd, size, opts)
		return err
	})
}

// rewindable returns a function giving the body of each attempt, positioned at r's current offset,
// and how many attempts r allows: one when it cannot be rewound.
func rewindable(r io.Reader, size int64) (func() (io.Reader, error), int, error) {
	seeker, ok := r.(io.Seeker)
	if !ok {
		once := false
		return func() (io.Reader, error) {
			if once {
				return nil, errors.New("the body cannot be rewound for another attempt")
			}
			once = true
			return io.LimitReader(r, size), nil
		}, 1, nil
	}
	start, err := seeker.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, err
	}
	if ra, ok := r.(io.ReaderAt); ok {
		// A section reader is seekable relative to start, so minio-go's own rewinds and its parallel
		// multipart reads see exactly this object's bytes.
		return func() (io.Reader, error) { return io.NewSectionReader(ra, start, size), nil }, 1 << 30, nil
	}
	return func() (io.Reader, error) {
		if _, err := seeker.Seek(start, io.SeekStart); err != nil {
			return nil, err
		}
		return io.LimitReader(r, size), nil
	}, 1 << 30, nil
}

func (s *S3ObjectStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := s.do(ctx, "stat", key, 0, s.retry.MaxAttempts, func(ctx context.Context) error {
		oi, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
		info = objectInfo(oi)
		return err
	})
	return info, err
}

func (s *S3ObjectStore) Delete(ctx context.Context, key string) error {
	return s.do(ctx, "delete", key, 0, s.retry.MaxAttempts, func(ctx context.Context) error {
		return s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	})
}

// List pages through the listing. When an attempt fails it resumes after the last key listed, and
// only attempts that list nothing new count against the retry bound, so a long listing survives
// faults without starting over.
func (s *S3ObjectStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	for failures := 0; ; {
		before := len(out)
		err := s.listFrom(ctx, prefix, &out)
		if err == nil {
			s.signed.Store(true)
			return out, nil
		}
		if len(out) > before {
			failures = 0
		}
		if failures++; failures >= s.retry.MaxAttempts || !retryable(ctx, err) {
			return nil, s.fail(ctx, "list", prefix, failures, err)
		}
		if !sleep(ctx, s.retry.delay(failures-1, rand.Float64())) {
			return nil, s.fail(ctx, "list", prefix, failures, err)
		}
	}
}

// listFrom appends to out the objects under prefix after the last one in out, in one attempt.
func (s *S3ObjectStore) listFrom(ctx context.Context, prefix string, out *[]ObjectInfo) error {
	ctx, cancel := context.WithTimeout(ctx, s.deadline(0))
	defer cancel()
	ctx, clocks := withClocks(ctx)
	after := ""
	if n := len(*out); n > 0 {
		after = (*out)[n-1].Key
	}
	if err := s.listAfter(ctx, prefix, after, 0, out); err != nil {
		return clocks.attach(err)
	}
	return ctx.Err()
}

// listAfter appends to out the objects under prefix whose keys come after after ("" from the
// first), up to limit of them (0: all), in the order the server lists them.
func (s *S3ObjectStore) listAfter(ctx context.Context, prefix, after string, limit int, out *[]ObjectInfo) error {
	opts := minio.ListObjectsOptions{Prefix: prefix, Recursive: true, StartAfter: after, MaxKeys: limit}
	added := 0
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, opts) {
		if oi.Err != nil {
			return oi.Err
		}
		last := after
		if n := len(*out); n > 0 {
			last = (*out)[n-1].Key
		}
		// Keys come in ascending order; a server that goes back (ignoring start-after after a fault)
		// would make the listing repeat itself forever.
		if oi.Key <= last {
			return fmt.Errorf("%w: the server listed %q after %q", errListOutOfOrder, oi.Key, last)
		}
		*out = append(*out, objectInfo(oi))
		if added++; added == limit {
			break
		}
	}
	return nil
}

// errListOutOfOrder is a listing that went backwards; retrying would not help.
var errListOutOfOrder = errors.New("object listing out of order")

func objectInfo(oi minio.ObjectInfo) ObjectInfo {
	return ObjectInfo{Key: oi.Key, Size: oi.Size, ETag: oi.ETag, LastModified: oi.LastModified}
}

// OpError is a request that failed for good: permanently, or on every allowed attempt.
type OpError struct {
	Op       string // put, get, stat, list, delete, read
	Object   string // s3://bucket/key
	Attempts int
	Err      error
}

func (e *OpError) Error() string {
	msg := fmt.Sprintf("s3 %s %s", e.Op, e.Object)
	if e.Attempts > 1 {
		msg += fmt.Sprintf(" (gave up after %d attempts)", e.Attempts)
	}
	msg += ": " + e.Err.Error()
	if hint := hintFor(e.Err); hint != "" {
		msg += ": " + hint
	}
	return msg
}

func (e *OpError) Unwrap() error { return e.Err }

// credentialCodes are the S3 error codes that mean the credentials were refused.
var credentialCodes = map[string]bool{
	"AccessDenied": true, "InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "ExpiredToken": true,
	"InvalidToken": true, "TokenRefreshRequired": true, "XAdminUserNotFound": true, "NoSuchUser": true,
}

const credentialsHint = "check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or the credentials Secret) and the bucket policy"

// hintFor says what to do next about an S3 error a user can fix.
func hintFor(err error) string {
	var resp minio.ErrorResponse
	var altered *alteredError
	if !errors.As(err, &resp) || errors.As(err, &altered) {
		return ""
	}
	var clocks *clockError
	errors.As(err, &clocks)
	switch {
	case resp.Code == "RequestTimeTooSkewed":
		return skewHint(clocks)
	case skewCodes[resp.Code] && clocks.skewed():
		// Some stores refuse a request signed too far from their clock as AccessDenied.
		return skewHint(clocks) + "; if that is not it, " + credentialsHint
	case skewCodes[resp.Code] && clocks == nil:
		return credentialsHint + ", or whether this machine's clock and the store's differ by more than " +
			minutes(maxClockSkew) + " (RequestTimeTooSkewed): if so, " + syncAdvice
	case credentialCodes[resp.Code]:
		return credentialsHint
	case resp.Code == "PreconditionFailed":
		return "the object changed while it was read; read it again"
	}
	return ""
}
