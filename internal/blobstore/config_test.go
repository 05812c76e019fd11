package blobstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStoreURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    StoreURL
		wantErr string
	}{
		{in: "s3://my-bucket/team/prod", want: StoreURL{"my-bucket", "team/prod"}},
		{in: "s3://my-bucket/team/prod/", want: StoreURL{"my-bucket", "team/prod"}},
		{in: "s3://my-bucket", want: StoreURL{"my-bucket", ""}},
		{in: "https://my-bucket/x", wantErr: "s3://bucket/prefix"},
		{in: "my-bucket/x", wantErr: "s3://bucket/prefix"},
		{in: "s3://AK:SK@my-bucket/x", wantErr: "credentials do not belong in the URL"},
		{in: "s3://my-bucket/x?region=eu", wantErr: "query"},
		{in: "s3://My_Bucket/x", wantErr: "bucket"},
		{in: "s3://my-bucket/a//b", wantErr: "empty"},
	} {
		got, err := ParseStoreURL(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseStoreURL(%q) = %v, %v; want an error about %q", tc.in, got, err, tc.wantErr)
			}
			if strings.Contains(fmt.Sprint(err), "SK") {
				t.Errorf("ParseStoreURL(%q) echoes the secret: %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseStoreURL(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if got.String() != strings.TrimSuffix(tc.in, "/") {
			t.Errorf("StoreURL.String() = %q, want %q", got.String(), strings.TrimSuffix(tc.in, "/"))
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in      string
		host    string
		secure  bool
		wantErr string
	}{
		{in: "https://s3.example.com", host: "s3.example.com", secure: true},
		{in: "s3.example.com:9000", host: "s3.example.com:9000", secure: true},
		{in: "http://127.0.0.1:9000/", host: "127.0.0.1:9000"},
		{in: "", wantErr: "AGENTREWIND_S3_ENDPOINT"},
		{in: "ftp://x", wantErr: "scheme"},
		{in: "https://s3.example.com/bucket", wantErr: "only scheme, host and port"},
		{in: "https://ak:sk@s3.example.com", wantErr: "credentials do not belong"},
	} {
		host, secure, err := parseEndpoint(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseEndpoint(%q): %v, want an error about %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || host != tc.host || secure != tc.secure {
			t.Errorf("parseEndpoint(%q) = %q, %v, %v; want %q, %v", tc.in, host, secure, err, tc.host, tc.secure)
		}
	}
}

func validConfig() Config {
	return Config{Endpoint: "https://s3.example.com", Bucket: "sessions", Prefix: "p",
		Credentials: Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI-secret", SessionToken: "FwoGZXIvYXdz-token"}}
}

func TestConfigValidateSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"valid", func(*Config) {}, ""},
		{"no endpoint", func(c *Config) { c.Endpoint = "" }, "--endpoint"},
		{"bad bucket", func(c *Config) { c.Bucket = "x" }, "bucket"},
		{"bad prefix", func(c *Config) { c.Prefix = "a/../b" }, "segment"},
		{"no secret", func(c *Config) { c.Credentials.SecretAccessKey = "" }, "AWS_SECRET_ACCESS_KEY"},
		{"TLS options on plain HTTP", func(c *Config) { c.Endpoint = "http://h:1"; c.TLS.InsecureSkipVerify = true }, "https://"},
	} {
		c := validConfig()
		tc.mutate(&c)
		err := c.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate() = %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestSecretsNeverShow prints, formats, marshals and logs a configuration every way a careless
// caller might, and checks that neither the secret key nor the session token appears.
func TestSecretsNeverShow(t *testing.T) {
	c := validConfig()
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("Opened store", "config", c, "secret", c.Credentials.SecretAccessKey)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("Opened store", "creds", c.Credentials, "token", c.Credentials.SessionToken)
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	bad := c
	bad.Endpoint = ""
	outputs := map[string]string{
		"String": c.String(), "%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c),
		"%s creds": fmt.Sprintf("%s", c.Credentials), "%q secret": fmt.Sprintf("%q", c.Credentials.SecretAccessKey),
		"%x secret": fmt.Sprintf("%x", c.Credentials.SecretAccessKey), "json": string(js), "slog": logged.String(),
		"error": fmt.Sprint(fmt.Errorf("opening %v: %w", c, bad.Validate())),
	}
	for how, out := range outputs {
		for _, secret := range []string{"wJalrXUtnFEMI", "FwoGZXIvYXdz", hexOf("wJalrXUtnFEMI")} {
			if strings.Contains(out, secret) {
				t.Errorf("%s shows a secret: %s", how, out)
			}
		}
	}
	if !strings.Contains(c.String(), "AKIDEXAMPLE") || !strings.Contains(c.String(), "[redacted]") {
		t.Errorf("String() should name the access key and mark the secret redacted: %s", c.String())
	}
	if c.Credentials.SecretAccessKey.Reveal() != "wJalrXUtnFEMI-secret" {
		t.Error("Reveal does not return the secret")
	}
}

func hexOf(s string) string { return fmt.Sprintf("%x", s) }

func TestCredentialsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // error substring; empty for success
	}{
		{"keys and token", map[string]string{EnvAccessKeyID: "AK", EnvSecretAccessKey: "SK", EnvSessionToken: "TOK"}, ""},
		{"keys only", map[string]string{EnvAccessKeyID: "AK", EnvSecretAccessKey: "SK"}, ""},
		{"nothing", map[string]string{}, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
		{"no secret", map[string]string{EnvAccessKeyID: "AK"}, "AWS_SECRET_ACCESS_KEY is not"},
		{"no id", map[string]string{EnvSecretAccessKey: "SK"}, "AWS_ACCESS_KEY_ID is not"},
	} {
		creds, err := CredentialsFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil || creds.AccessKeyID != "AK" || creds.SecretAccessKey.Reveal() != "SK" || creds.SessionToken.Reveal() != tc.env[EnvSessionToken] {
			t.Errorf("%s: %v, %v", tc.name, creds, err)
		}
	}
}

func TestTLSOptionsBuildTheTransport(t *testing.T) {
	c := validConfig().withDefaults()
	c.TLS.InsecureSkipVerify = true
	tr, err := c.transport(true)
	if err != nil || !tr.TLSClientConfig.InsecureSkipVerify || tr.ResponseHeaderTimeout != c.RequestTimeout {
		t.Fatalf("insecure transport: %v, %v", tr, err)
	}
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	_ = os.WriteFile(notPEM, []byte("not a certificate"), 0o644)
	c.TLS.CAFile = notPEM
	if _, err := c.transport(true); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without PEM: %v", err)
	}
	c.TLS.CAFile = filepath.Join(dir, "missing.pem")
	if _, err := c.transport(true); err == nil || !strings.Contains(err.Error(), "CA bundle") {
		t.Errorf("a missing CA file: %v", err)
	}
}

func TestMalformedURLsWithCredentialsNeverEchoThem(t *testing.T) {
	const secret = "wJalrXUtnFEMI"
	for _, raw := range []string{"ftp://AKIA:" + secret + "@host", "https://AKIA:" + secret + "%zz@host"} {
		if _, _, err := parseEndpoint(raw); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("endpoint %q: %v", raw, err)
		}
	}
	for _, raw := range []string{"s4://AKIA:" + secret + "@bucket/p", "s3://AKIA:" + secret + "%zz@bucket/p"} {
		if _, err := ParseStoreURL(raw); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("store URL %q: %v", raw, err)
		}
	}
}

// TestURLsNeverShowUserinfoOrQuery runs endpoints and store URLs carrying generated secrets (the
// base64 alphabet plus #?@:%, so no delimiter marks where a secret ends) through every error path
// of the configuration, and checks that no piece of a secret shows.
func TestURLsNeverShowUserinfoOrQuery(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=#?@:%"
	rng := rand.New(rand.NewPCG(19, 19))
	for range 200 {
		var b strings.Builder
		b.WriteString("Zq9")
		for range 30 + rng.IntN(20) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		secret := b.String()
		var runs []string
		for _, r := range strings.FieldsFunc(secret, func(c rune) bool { return !strings.ContainsRune(alphabet[:62], c) }) {
			if len(r) >= 5 {
				runs = append(runs, r)
			}
		}
		endpoints := []string{
			"https://AKIAUSERINFO:" + secret + "@s3.example.com", "AKIAUSERINFO:" + secret + "@s3.example.com:9000",
			"ftp://AKIAUSERINFO:" + secret + "@h", "https://s3.example.com/?X-Amz-Signature=" + secret,
			"http://h:1?" + secret, "https://h#" + secret, "https://h:x/" + secret + "@",
			// URLs that do not parse, or parse with a secret outside scheme://host[:port]: what is
			// after the first character that fails to parse may be anything, so none of it shows.
			"http://u:" + secret, "http://127.0.0.1:1/%zz" + secret, "http://127.0.0.1:1/X-Amz-Signature=" + secret,
			"http://h:1;X-Amz-Signature=" + secret, "u:" + secret, "https://h/" + secret,
		}
		stores := []string{"s3://AKIAUSERINFO:" + secret + "@bucket/p", "s4://u:" + secret + "@b", "s3://bucket/p?x=" + secret, "s3://B_b/p#" + secret,
			"s3://u:" + secret, "s3://bkt:" + secret + "/team", "s3://bkt/te%zz" + secret, "s3://bkt/X-Amz-Signature=" + secret,
			"s3:" + secret, "s3://bkt;X-Amz-Signature=" + secret + "/p"}
		var outs []string
		for _, ep := range endpoints {
			_, _, err := parseEndpoint(ep)
			cfg := validConfig()
			cfg.Endpoint = ep
			cfg.TLS.InsecureSkipVerify = true
			_, openErr := Open(context.Background(), cfg)
			outs = append(outs, fmt.Sprint(err), fmt.Sprint(cfg.Validate()), fmt.Sprint(openErr), cfg.String(), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg))
		}
		for _, st := range stores {
			_, err := ParseStoreURL(st)
			outs = append(outs, fmt.Sprint(err))
		}
		all := strings.Join(outs, "\n")
		for _, s := range append(runs, "AKIAUSERINFO") {
			if strings.Contains(all, s) {
				t.Fatalf("a piece %q of the secret %q shows:\n%s", s, secret, all)
			}
		}
	}
}
