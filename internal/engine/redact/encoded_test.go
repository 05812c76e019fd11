package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// TestALiteralIsRedactedInItsEncodings: a learned literal is redacted when it travels base64 or
// base64url encoded (padded or raw) or percent-encoded (either hex case), in text and in JSON strings.
func TestALiteralIsRedactedInItsEncodings(t *testing.T) {
	for _, secret := range []string{"PROVKEY-7f3a9c2e5b1d4a6f0c8e", `lrnd<&>Sec"ret+/=42Q`, "a b/c?d=é"} {
		forms := map[string]string{
			"base64":        base64.StdEncoding.EncodeToString([]byte(secret)),
			"base64 raw":    base64.RawStdEncoding.EncodeToString([]byte(secret)),
			"base64url":     base64.URLEncoding.EncodeToString([]byte(secret)),
			"base64url raw": base64.RawURLEncoding.EncodeToString([]byte(secret)),
			"query":         url.QueryEscape(secret),
			"path":          url.PathEscape(secret),
			"query lower":   strings.ToLower(url.QueryEscape(secret)),
		}
		r := New(nil)
		r.AddLiteral("declared-secret", secret)
		for name, form := range forms {
			if strings.ToLower(secret) != secret && name == "query lower" {
				continue // lower-casing changed the secret's own letters, not just the hex
			}
			text := r.String("x=" + form + "&y=1")
			if strings.Contains(text, form) || !strings.Contains(text, TokenPrefix) {
				t.Errorf("%q as %s: String left %q", secret, name, text)
			}
			doc, _ := json.Marshal(map[string]string{"v": "pre " + form + " post"})
			out, err := r.JSON(doc)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), form) {
				t.Errorf("%q as %s: JSON left %s", secret, name, out)
			}
		}
	}
	// Ordinary text is untouched.
	r := New(nil)
	r.AddLiteral("declared-secret", "dummy-secret-value")
	if got := r.String("a dummy value, ZHVtbXk="); got != "a dummy value, ZHVtbXk=" {
		t.Errorf("ordinary text redacted: %q", got)
	}
}
