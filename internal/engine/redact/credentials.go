package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// urlUserinfo finds "scheme://userinfo@" in text: the userinfo runs to the last '@' before the host
// ends ('/', '?', '#', whitespace or a quote), so a password holding a raw '@' is kept whole.
var urlUserinfo = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://([^/?#\s"'<>@]*(?:@[^/?#\s"'<>@]*)*)@`)

// minCredentialLen is the shortest password returned: shorter ones could not be redacted without
// redacting ordinary text.
const minCredentialLen = 4

// CredentialsInValue returns the credentials written in the URLs of v (an environment value such as
// DATABASE_URL=postgres://app:pw@host/db): for each URL with a password, the password and
// "user:password", as written and, when it differs, percent-decoded. Passwords shorter than 4 bytes
// are left out (their "user:password" is still returned). Any text is accepted; text without such a
// URL gives nil.
func CredentialsInValue(v string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, m := range urlUserinfo.FindAllStringSubmatch(v, -1) {
		userinfo := m[1]
		user, password, ok := strings.Cut(userinfo, ":")
		if !ok || password == "" {
			continue
		}
		if len(password) >= minCredentialLen {
			add(password)
		}
		add(userinfo)
		if dec, err := url.PathUnescape(password); err == nil && dec != password {
			if len(dec) >= minCredentialLen {
				add(dec)
			}
			if du, err := url.PathUnescape(user); err == nil {
				add(du + ":" + dec)
			}
		}
	}
	return out
}
