package blobstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// RetryPolicy bounds how often and how patiently a failed request is retried. The zero value means
// the defaults.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts per request, the first included (default 5).
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt; it doubles per attempt (default 100ms).
	BaseDelay time.Duration
	// MaxDelay caps one backoff (default 3s).
	MaxDelay time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 100 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 3 * time.Second
	}
	return p
}

// delay is the backoff after failed attempt number attempt (0-based): exponential, capped, with the
// upper half jittered by u in [0,1) so parallel uploads that failed together do not retry together.
func (p RetryPolicy) delay(attempt int, u float64) time.Duration {
	d := p.longestDelay(attempt)
	return d/2 + time.Duration(u*float64(d/2))
}

// longestDelay is the upper bound of delay(attempt, u).
func (p RetryPolicy) longestDelay(attempt int) time.Duration {
	d := p.BaseDelay << min(attempt, 30)
	if d <= 0 || d > p.MaxDelay {
		d = p.MaxDelay
	}
	return d
}

// Attempts is the number of attempts per request, defaults applied.
func (p RetryPolicy) Attempts() int { return p.withDefaults().MaxAttempts }

// Budget is the longest a request can take against a server that never answers: every attempt
// waiting timeout, plus the longest backoff between attempts. A command fails within it when its
// endpoint is silent (5 × 30s + 1.5s = 2m31.5s with the defaults).
func (p RetryPolicy) Budget(timeout time.Duration) time.Duration {
	p = p.withDefaults()
	b := time.Duration(p.MaxAttempts) * timeout
	for attempt := range p.MaxAttempts - 1 {
		b += p.longestDelay(attempt)
	}
	return b
}

// retry runs attempt until it succeeds, fails permanently, the attempts run out or ctx ends. It
// returns the last error and the number of attempts made.
func (p RetryPolicy) retry(ctx context.Context, attempt func() error) (int, error) {
	var err error
	for n := 1; ; n++ {
		if err = attempt(); err == nil {
			return n, nil
		}
		if n >= p.MaxAttempts || !retryable(ctx, err) {
			return n, err
		}
		if !sleep(ctx, p.delay(n-1, rand.Float64())) {
			return n, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryableCodes are S3 error codes for conditions that pass: throttling, overload, internal errors.
var retryableCodes = map[string]bool{
	"SlowDown": true, "SlowDownRead": true, "SlowDownWrite": true, "ServiceUnavailable": true,
	"InternalError": true, "RequestTimeout": true, "Throttling": true, "ThrottlingException": true,
	"RequestLimitExceeded": true, "RequestThrottled": true, "TooManyRequests": true,
	// Two conditional writes of one key at once: the store asks the loser to try again.
	"ConditionalRequestConflict": true,
}

// retryable decides whether a failed request is worth another attempt. parent is the caller's
// context: once it is done nothing is retried, while a timeout of the attempt itself is.
func retryable(parent context.Context, err error) bool {
	if parent.Err() != nil {
		return false
	}
	var resp minio.ErrorResponse
	var altered *alteredError
	if errors.As(err, &altered) {
		return true // the bytes were altered on the way: sending them again may get them through
	}
	if errors.As(err, &resp) && (resp.StatusCode != 0 || resp.Code != "") {
		return retryableCodes[resp.Code] || resp.StatusCode >= 500 ||
			resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout
	}
	if isTLSConfigError(err) {
		return false // a wrong certificate does not fix itself
	}
	if errors.Is(err, errListOutOfOrder) {
		return false // the server does not honour start-after; a retry would go backwards again
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true // the attempt's own timeout: the caller's context is still live
	}
	var netErr net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.As(err, &netErr)
}

func isTLSConfigError(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &header)
}
