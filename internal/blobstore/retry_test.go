package blobstore

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

func TestRetryableTellsPassingTroubleFromPermanentFailure(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	s3err := func(status int, code string) error { return minio.ErrorResponse{StatusCode: status, Code: code} }
	urlErr := func(err error) error { return &url.Error{Op: "Put", URL: "http://x/b/k", Err: err} }
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		err    error
		expect bool
	}{
		{"500 InternalError", live, s3err(500, "InternalError"), true},
		{"503 SlowDown", live, s3err(503, "SlowDown"), true},
		{"429 without a code", live, s3err(429, ""), true},
		{"502 from a gateway", live, s3err(502, ""), true},
		{"SlowDown code on a 400", live, s3err(400, "SlowDown"), true},
		{"404 NoSuchKey", live, s3err(404, "NoSuchKey"), false},
		{"403 AccessDenied", live, s3err(403, "AccessDenied"), false},
		{"412 PreconditionFailed", live, s3err(412, "PreconditionFailed"), false},
		{"connection reset", live, urlErr(&net.OpError{Op: "read", Err: syscall.ECONNRESET}), true},
		{"connection refused", live, urlErr(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), true},
		{"truncated body", live, fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"attempt timed out", live, urlErr(context.DeadlineExceeded), true},
		{"unknown certificate authority", live, urlErr(x509.UnknownAuthorityError{}), false},
		{"caller cancelled", done, urlErr(&net.OpError{Op: "read", Err: syscall.ECONNRESET}), false},
		{"a plain error", live, errors.New("the body cannot be rewound"), false},
	} {
		if got := retryable(tc.ctx, tc.err); got != tc.expect {
			t.Errorf("%s: retryable = %v, want %v", tc.name, got, tc.expect)
		}
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}.withDefaults()
	for attempt, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		lo, hi := p.delay(attempt, 0), p.delay(attempt, 0.999999)
		if lo != want/2 || hi > want || hi < want*99/100 {
			t.Errorf("attempt %d: delay in [%v, %v], want [%v, %v]", attempt, lo, hi, want/2, want)
		}
	}
	if d := p.delay(200, 0.5); d <= 0 || d > time.Second {
		t.Errorf("a huge attempt number gives %v", d)
	}
}

func TestRetryStopsAtTheBound(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 3, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond}
	calls := 0
	n, err := p.retry(context.Background(), func() error { calls++; return io.ErrUnexpectedEOF })
	if n != 3 || calls != 3 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("transient failures: %d attempts, %d calls, %v; want 3", n, calls, err)
	}
	calls = 0
	n, _ = p.retry(context.Background(), func() error { calls++; return minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied"} })
	if n != 1 || calls != 1 {
		t.Fatalf("a permanent failure was attempted %d times", calls)
	}
	calls = 0
	n, err = p.retry(context.Background(), func() error {
		if calls++; calls < 3 {
			return minio.ErrorResponse{StatusCode: 503, Code: "SlowDown"}
		}
		return nil
	})
	if n != 3 || err != nil {
		t.Fatalf("success on the third attempt: %d, %v", n, err)
	}
}

func TestForEachBoundsParallelismAndStopsAtTheFirstError(t *testing.T) {
	items := indexes(50)
	var running, peak int
	mu := make(chan struct{}, 1)
	track := func(d int) {
		mu <- struct{}{}
		running += d
		peak = max(peak, running)
		<-mu
	}
	err := forEach(context.Background(), 3, items, func(ctx context.Context, i int) error {
		track(1)
		defer track(-1)
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil || peak > 3 || peak < 2 {
		t.Fatalf("forEach: %v, peak parallelism %d, want at most 3", err, peak)
	}
	boom := errors.New("boom")
	started := 0
	err = forEach(context.Background(), 2, items, func(ctx context.Context, i int) error {
		mu <- struct{}{}
		started++
		<-mu
		if i == 1 {
			return boom
		}
		<-ctx.Done() // the others wait until cancelled
		return ctx.Err()
	})
	if !errors.Is(err, boom) || started > 4 {
		t.Fatalf("forEach after a failure: %v, %d items started; want boom and an early stop", err, started)
	}
}
