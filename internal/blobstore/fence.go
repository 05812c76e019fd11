package blobstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// A blob sweep deletes only inside delete windows: spans that the store itself enforces, so that a
// sweep paused for any length of time cannot delete once its window has closed. On S3 a window is a
// presigned multi-object delete: the server refuses it once its X-Amz-Expires has passed by the
// server's own clock, whatever the sweeping host's clock or pauses. A writer that must know when
// the last delete of a sweep can land reads the window from the record the sweep stores before it
// re-marks (Layout.SweepWindow), and compares it with the store's time (ServerTime).

// DeleteWindow is a span of the store's time within which deletes signed for it are accepted.
type DeleteWindow struct {
	// Opened is the time written into the window's signature, in whole seconds; the store accepts
	// its deletes until Opened+Length by its own clock.
	Opened time.Time
	Length time.Duration
	signed *url.URL // the presigned multi-object delete, on S3
}

// Closes is the last moment of the store's time at which one of the window's deletes is accepted.
func (w DeleteWindow) Closes() time.Time { return w.Opened.Add(w.Length) }

// ErrWindowClosed is wrapped when the store refused a delete because its window had closed.
var ErrWindowClosed = errors.New("the delete window had closed")

// amzDate is the layout of X-Amz-Date.
const amzDate = "20060102T150405Z"

// OpenDeleteWindow signs a multi-object delete valid for length (whole seconds, at least one).
// Signing is local: nothing is sent.
func (s *S3ObjectStore) OpenDeleteWindow(ctx context.Context, length time.Duration) (DeleteWindow, error) {
	length = length.Truncate(time.Second)
	if length < time.Second {
		return DeleteWindow{}, fmt.Errorf("a delete window of %s is shorter than a second", length)
	}
	u, err := s.client.Presign(ctx, http.MethodPost, s.bucket, "", length, url.Values{"delete": {""}})
	if err != nil {
		return DeleteWindow{}, fmt.Errorf("signing a delete window for %s: %w", s.URL(""), err)
	}
	opened, err := time.Parse(amzDate, u.Query().Get("X-Amz-Date"))
	if err != nil {
		return DeleteWindow{}, fmt.Errorf("signing a delete window for %s: the signature's date: %w", s.URL(""), err)
	}
	return DeleteWindow{Opened: opened, Length: length, signed: u}, nil
}

// DeleteKeysIn removes keys with multi-object delete requests signed for w, at most ListPageSize keys
// each; a missing object is not an error. Once the window has closed the store refuses them, and the
// error wraps ErrWindowClosed; the keys not reported deleted may still be stored.
func (s *S3ObjectStore) DeleteKeysIn(ctx context.Context, w DeleteWindow, keys []string) error {
	if w.signed == nil {
		return errors.New("delete window not signed by this store")
	}
	for batch := range slices.Chunk(keys, ListPageSize) {
		body, err := deleteRequestBody(batch)
		if err != nil {
			return err
		}
		sum := md5.Sum(body)
		err = s.do(ctx, "delete", batch[0], int64(len(body)), s.retry.MaxAttempts, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.signed.String(), bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.ContentLength = int64(len(body))
			req.Header.Set("Content-Type", "application/xml")
			req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
			resp, err := s.http.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return windowRefusal(resp, data)
			}
			return deleteResultErrors(data)
		})
		if err != nil {
			var closed *windowClosedError
			if errors.As(err, &closed) {
				return fmt.Errorf("delete %s: %w (it closed at %s by the store's clock): %s",
					s.URL(batch[0]), ErrWindowClosed, w.Closes().UTC().Format(time.RFC3339), closed.message)
			}
			return err
		}
	}
	return nil
}

// windowClosedError is the store's refusal of a request whose signature has expired.
type windowClosedError struct{ message string }

func (e *windowClosedError) Error() string { return e.message }

// windowRefusal turns a refused delete into an error: an expired signature (403, "expired" in the
// message, as S3 and versitygw word it) into *windowClosedError, which is never retried, else the
// store's error response.
func windowRefusal(resp *http.Response, data []byte) error {
	var er minio.ErrorResponse
	_ = xml.Unmarshal(data, &er)
	er.StatusCode = resp.StatusCode
	if er.Code == "" {
		er.Code = resp.Status
	}
	if resp.StatusCode == http.StatusForbidden && strings.Contains(strings.ToLower(er.Message), "expired") {
		return &windowClosedError{message: er.Code + ": " + er.Message}
	}
	return er
}

// deleteRequestBody is the XML of a quiet multi-object delete of keys.
func deleteRequestBody(keys []string) ([]byte, error) {
	type object struct {
		Key string `xml:"Key"`
	}
	req := struct {
		XMLName xml.Name `xml:"Delete"`
		Quiet   bool     `xml:"Quiet"`
		Objects []object `xml:"Object"`
	}{Quiet: true}
	for _, k := range keys {
		req.Objects = append(req.Objects, object{Key: k})
	}
	return xml.Marshal(req)
}

// deleteResultErrors reads a multi-object delete's answer: the keys it failed to delete, other than
// those already missing.
func deleteResultErrors(data []byte) error {
	var res struct {
		Errors []struct {
			Key, Code, Message string
		} `xml:"Error"`
	}
	if err := xml.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("reading the answer to a multi-object delete: %w", err)
	}
	var errs []error
	for _, e := range res.Errors {
		if e.Code != "NoSuchKey" {
			errs = append(errs, fmt.Errorf("%s: %s: %s", e.Key, e.Code, e.Message))
		}
	}
	return errors.Join(errs...)
}

// ServerTime is the store's clock now, in whole seconds: the Date of its answer to a request sent
// for the purpose. Deadlines a store enforces (a delete window's end) are compared with it, never
// with this host's clock, which may be skewed or may have stood still while suspended. Only the
// fresh answer counts: one answer with a Date far ahead (a proxy, another node) must not stay.
func (s *S3ObjectStore) ServerTime(ctx context.Context) (time.Time, error) {
	var date time.Time
	err := s.do(ctx, "check bucket", "", 0, s.retry.MaxAttempts, func(ctx context.Context) error {
		u, err := s.client.Presign(ctx, http.MethodHead, s.bucket, "", time.Minute, nil)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
		if err != nil {
			return err
		}
		resp, err := s.http.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return minio.ErrorResponse{StatusCode: resp.StatusCode, Code: resp.Status, Message: "the bucket's HEAD was refused"}
		}
		if date, err = http.ParseTime(resp.Header.Get("Date")); err != nil {
			return fmt.Errorf("the store at %s answers without a Date header, so its clock cannot be read", s.URL(""))
		}
		return nil
	})
	return date.UTC(), err
}

// OpenDeleteWindow opens a window of length from the store's clock now.
func (m *MemObjectStore) OpenDeleteWindow(ctx context.Context, length time.Duration) (DeleteWindow, error) {
	if err := ctx.Err(); err != nil {
		return DeleteWindow{}, err
	}
	length = length.Truncate(time.Second)
	if length < time.Second {
		return DeleteWindow{}, fmt.Errorf("a delete window of %s is shorter than a second", length)
	}
	return DeleteWindow{Opened: m.now().Truncate(time.Second), Length: length}, nil
}

// DeleteKeysIn removes keys while the window is open by the store's clock, as a server would.
func (m *MemObjectStore) DeleteKeysIn(ctx context.Context, w DeleteWindow, keys []string) error {
	for batch := range slices.Chunk(keys, ListPageSize) {
		if m.now().After(w.Closes()) {
			return fmt.Errorf("delete %s: %w (it closed at %s)", batch[0], ErrWindowClosed, w.Closes().UTC().Format(time.RFC3339))
		}
		if err := m.DeleteKeys(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// ServerTime is the store's clock.
func (m *MemObjectStore) ServerTime(ctx context.Context) (time.Time, error) {
	return m.now(), ctx.Err()
}
