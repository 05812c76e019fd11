package blobstore

import (
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// TestHintNamesClockSkew: a store refusing a request's time is a clock to sync, not credentials to
// check; a refusal skew may also cause names it as a possible cause, or as the cause when the
// clocks of the exchange were read and are too far apart.
func TestHintNamesClockSkew(t *testing.T) {
	signed := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	refused := func(code string) error { return minio.ErrorResponse{Code: code, StatusCode: 403, Message: "refused"} }
	clocked := func(code string, skew time.Duration) error {
		return &clockError{err: refused(code), signed: signed, server: signed.Add(skew)}
	}
	for _, tc := range []struct {
		name      string
		err       error
		want, not []string
	}{
		{"skewed, clocks unread", refused("RequestTimeTooSkewed"),
			[]string{"clock and the store's differ by more than the 15 minutes", "RequestTimeTooSkewed", "NTP"}, []string{"credentials"}},
		{"skewed, store ahead", clocked("RequestTimeTooSkewed", 20*time.Minute),
			[]string{"store's clock is 20m0s ahead of this machine's", "2025-03-01T10:00:00Z", "2025-03-01T10:20:00Z", "NTP"}, []string{"credentials"}},
		{"skewed, store behind", clocked("RequestTimeTooSkewed", -time.Hour),
			[]string{"store's clock is 1h0m0s behind this machine's", "2025-03-01T09:00:00Z", "NTP"}, []string{"credentials"}},
		{"skewed, clocks agree", clocked("RequestTimeTooSkewed", time.Minute),
			[]string{"within the 15 minutes", "2025-03-01T10:01:00Z", "NTP"}, []string{"more than", "credentials"}},
		{"access denied, clocks unread", refused("AccessDenied"),
			[]string{"check the credentials", "or whether this machine's clock and the store's differ by more than 15 minutes (RequestTimeTooSkewed)", "NTP"}, nil},
		{"signature mismatch, clocks unread", refused("SignatureDoesNotMatch"),
			[]string{"check the credentials", "(RequestTimeTooSkewed)"}, nil},
		{"access denied, clocks apart", clocked("AccessDenied", 30*time.Minute),
			[]string{"store's clock is 30m0s ahead", "2025-03-01T10:30:00Z", "if that is not it, check the credentials"}, nil},
		{"access denied, clocks agree", clocked("AccessDenied", 2*time.Second),
			[]string{"check the credentials"}, []string{"clock"}},
		{"unknown key", refused("InvalidAccessKeyId"),
			[]string{"check the credentials"}, []string{"clock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hint := hintFor(&OpError{Op: "put", Object: "s3://b/k", Attempts: 1, Err: tc.err})
			for _, w := range tc.want {
				if !strings.Contains(hint, w) {
					t.Errorf("hint %q\nlacks %q", hint, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(hint, n) {
					t.Errorf("hint %q\nholds %q", hint, n)
				}
			}
		})
	}
}
