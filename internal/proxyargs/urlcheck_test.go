package proxyargs

import (
	"strings"
	"testing"
)

// TestURLChecksNeverShowAPassword: CheckUpstream and CheckToolURL refuse every spelling of a URL with
// user information, and their errors (which the manager logs at startup, the proxy prints into its
// pod's log and termination message, and the controller writes into status) show no part of the
// password, however the URL is refused: a wrong scheme, no host, a fragment, a bad escape or port, a
// URL that is no URL at all. A URL without credentials is still named, so the user knows which.
func TestURLChecksNeverShowAPassword(t *testing.T) {
	const pw = "hunter2pw"
	refused := []string{
		"http://u:" + pw + "@gw",
		"HTTP://u:" + pw + "@gw",
		"https://u%40corp:" + pw + "@gw/v1",
		"https://u:" + pw + "@[fe80::1%25en0]/",
		"http://u:" + pw + "@gw\xff",
		"https://u:" + pw + "@gw?x=1",
		"ftp://u:" + pw + "@gw",
		"file://u:" + pw + "@/etc/passwd",
		"htps://u:" + pw + "@gw",
		"http//u:" + pw + "@gw",
		"u:" + pw + "@gw",
		"http://u:" + pw + "@",
		"http://u:" + pw + "@/v1",
		"http:\\\\u:" + pw + "@gw",
		"http://u:" + pw + "/v1", // the @host forgotten: the password parses as a port
		"http://u:%zz" + pw + "@gw",
		"http://u:" + pw + "%zz@gw",
		"http://u:" + pw + "\\@gw",
		"http://u:" + pw + " @gw",
		" http://u:" + pw + "@gw",
		"http://u:" + pw + "@gw\x00",
		"http://gw/#u:" + pw + "@",
		"http://gw/v1#" + pw,
		"http://gw/" + pw + "%zz",
		"https://u:" + pw + "@gw:x@y",
		"http://[::1%25" + pw + "]:x/",
	}
	for _, raw := range refused {
		for name, check := range map[string]func(string) error{"CheckUpstream": CheckUpstream, "CheckToolURL": CheckToolURL} {
			err := check(raw)
			if err == nil {
				if !strings.Contains(raw, "@") && name == "CheckToolURL" {
					continue
				}
				t.Errorf("%s(%q) passed", name, raw)
				continue
			}
			if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "hunter") {
				t.Errorf("%s(%q) = %q: shows the password", name, raw, err)
			}
		}
	}
	// A URL without credentials is named in its error, and the upstream's query is not.
	for raw, want := range map[string]string{
		"ftp://gw.corp/v1":           `"ftp://gw.corp/v1": the scheme must be http or https`,
		"https://gw.corp/v1?key=abc": `"https://gw.corp/v1" (query or fragment not shown): takes no fragment, and a base URL no query`,
		"https:///v1":                `"https:///v1" has no host: write http(s)://host[:port]/path`,
	} {
		if err := CheckUpstream(raw); err == nil || err.Error() != want {
			t.Errorf("CheckUpstream(%q) = %v, want %s", raw, err, want)
		}
	}
	for _, ok := range []string{"http://gw:8080", "https://[fe80::1%25en0]/v1", "http://10.0.0.1/"} {
		if err := CheckUpstream(ok); err != nil {
			t.Errorf("CheckUpstream(%q) = %v", ok, err)
		}
	}
}
