package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
)

// maxClockSkew is how far S3 lets the time a request was signed at stray from the store's clock.
const maxClockSkew = 15 * time.Minute

// skewCodes are the refusals a clock too far from the store's causes: its own code, and the ones
// some stores answer instead (a HEAD's answer has no body, so minio-go reads any 403 as AccessDenied).
var skewCodes = map[string]bool{"RequestTimeTooSkewed": true, "AccessDenied": true, "SignatureDoesNotMatch": true}

// exchangeClocks are the two clocks of the last refused request sent under one attempt's context:
// this host's when it signed the request (X-Amz-Date) and the store's on its answer (Date).
type exchangeClocks struct {
	mu             sync.Mutex
	signed, server time.Time
}

type clocksKey struct{}

// withClocks returns ctx carrying a reading that clockReader fills for the requests sent under it.
func withClocks(ctx context.Context) (context.Context, *exchangeClocks) {
	c := &exchangeClocks{}
	return context.WithValue(ctx, clocksKey{}, c), c
}

// clockReader reads the clocks of every refused request whose context carries exchangeClocks;
// minio-go drops the headers of an answer before its error reaches this package.
type clockReader struct{ next http.RoundTripper }

func (r clockReader) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	c, ok := req.Context().Value(clocksKey{}).(*exchangeClocks)
	if !ok || err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	signedAt := req.Header.Get("X-Amz-Date")
	if signedAt == "" {
		signedAt = req.URL.Query().Get("X-Amz-Date") // a presigned request
	}
	signed, _ := time.Parse(amzDate, signedAt)
	server, _ := http.ParseTime(resp.Header.Get("Date"))
	c.mu.Lock()
	c.signed, c.server = signed, server
	c.mu.Unlock()
	return resp, err
}

// attach gives a refusal a skewed clock may cause the clocks of its exchange, when both were read.
func (c *exchangeClocks) attach(err error) error {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) || !skewCodes[resp.Code] {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.signed.IsZero() || c.server.IsZero() {
		return err
	}
	return &clockError{err: err, signed: c.signed.UTC(), server: c.server.UTC()}
}

// clockError is a refusal a skewed clock may have caused, with the clocks of its exchange.
type clockError struct {
	err error
	// signed is this host's clock when it signed the request; server the Date on the store's answer.
	signed, server time.Time
}

func (e *clockError) Error() string { return e.err.Error() }

func (e *clockError) Unwrap() error { return e.err }

// skew is how far the store's clock is ahead of this host's (negative when behind).
func (e *clockError) skew() time.Duration { return e.server.Sub(e.signed) }

// skewed says whether the clocks differ by more than S3 allows.
func (e *clockError) skewed() bool { return e != nil && e.skew().Abs() > maxClockSkew }

// syncAdvice is what to do about clocks that differ.
const syncAdvice = "sync the clocks with NTP (on this machine: timedatectl set-ntp true, or chronyc makestep), " +
	"or correct the store's clock if it is the wrong one"

// skewHint explains a refusal for the request's time, naming both clocks when c holds them.
func skewHint(c *clockError) string {
	if c == nil {
		return fmt.Sprintf("this machine's clock and the store's differ by more than the %s S3 allows (RequestTimeTooSkewed): %s",
			minutes(maxClockSkew), syncAdvice)
	}
	clocks := fmt.Sprintf("this machine signed the request at %s, the store answered at %s", c.signed.Format(time.RFC3339), c.server.Format(time.RFC3339))
	if !c.skewed() {
		// The answer's Date may be a proxy's, or the store's clock may have been corrected since.
		return fmt.Sprintf("the store refused the request's time (RequestTimeTooSkewed), though %s, within the %s S3 allows: "+
			"check the clock of the store behind any proxy, then %s", clocks, minutes(maxClockSkew), syncAdvice)
	}
	way := "ahead of"
	if c.skew() < 0 {
		way = "behind"
	}
	return fmt.Sprintf("the store's clock is %s %s this machine's, more than the %s S3 allows (RequestTimeTooSkewed): %s: %s",
		c.skew().Abs().Round(time.Second), way, minutes(maxClockSkew), clocks, syncAdvice)
}

func minutes(d time.Duration) string { return fmt.Sprintf("%d minutes", int(d.Minutes())) }
