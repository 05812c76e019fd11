package blobstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Environment variables the store configuration is read from.
const (
	EnvEndpoint        = "AGENTREWIND_S3_ENDPOINT"
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
)

// Config says where the store is and how to reach it. Printing it, logging it or wrapping it in an
// error never shows the secret key or the session token.
type Config struct {
	// Endpoint is https://host[:port], http://host[:port] (plain HTTP: a loopback or in-cluster
	// server only) or host[:port], which means HTTPS.
	Endpoint string
	// Region is the bucket's region (default us-east-1).
	Region string
	// Bucket holds the store.
	Bucket string
	// Prefix is the key prefix of the store inside the bucket; empty for the whole bucket.
	Prefix string
	// TLS tunes certificate checking of an https endpoint.
	TLS TLSConfig
	// Credentials sign every request.
	Credentials Credentials
	// CreateBucket creates the bucket when it does not exist, instead of failing.
	CreateBucket bool
	// RequestTimeout bounds one attempt of a request without a body, and how long a download may
	// wait for its next byte (default 30s); an upload attempt also gets one second per MinThroughput
	// bytes. With the retries, a silent endpoint fails a request after NoAnswerBudget.
	RequestTimeout time.Duration
	// MinThroughput is the slowest transfer, in bytes per second, that is not abandoned (default
	// 1 MiB/s): a download that has averaged less once NoAnswerBudget is over, counting every resumed
	// attempt, fails with ErrTooSlow; an upload attempt that takes longer than its size allows at this
	// rate is retried, up to the attempts of Retry.
	MinThroughput int64
	// Retry bounds the attempts of each request.
	Retry RetryPolicy
	// wrapTransport, when set (by tests in this package), wraps the HTTP transport of the client,
	// to count or watch the requests a store makes.
	wrapTransport func(http.RoundTripper) http.RoundTripper
}

// TLSConfig tunes certificate checking.
type TLSConfig struct {
	// CAFile is a PEM bundle trusted in addition to the system roots (a private CA).
	CAFile string
	// InsecureSkipVerify accepts any server certificate. Only for testing: anyone on the path can
	// then read and change what is stored.
	InsecureSkipVerify bool
}

// Credentials sign requests: static keys, optionally temporary ones with a session token.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey Secret
	SessionToken    Secret
}

// String names the access key only.
func (c Credentials) String() string {
	return fmt.Sprintf("access key %q, secret key %v, session token %v", c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
}

// Secret is a credential value. It prints as "[redacted]" under every fmt verb, in JSON and in slog,
// so structures holding one can be printed and logged; Reveal returns the value to the one place
// that signs requests with it.
type Secret string

func (s Secret) redacted() string {
	if s == "" {
		return "[unset]"
	}
	return "[redacted]"
}

// Reveal returns the secret value. Never print or log it.
func (s Secret) Reveal() string { return string(s) }

// Format prints "[redacted]" (or "[unset]") whatever the verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.redacted()) }

// MarshalJSON encodes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.redacted()) }

// LogValue logs the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.redacted()) }

// String describes the configuration without its secrets.
func (c Config) String() string {
	return fmt.Sprintf("s3 store %s at %s (region %s; %v)", StoreURL{Bucket: c.Bucket, Prefix: c.Prefix}, shownEndpoint(c.Endpoint), c.Region, c.Credentials)
}

// CredentialsFromEnv reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the optional
// AWS_SESSION_TOKEN through lookup (os.LookupEnv outside tests).
func CredentialsFromEnv(lookup func(string) (string, bool)) (Credentials, error) {
	id, _ := lookup(EnvAccessKeyID)
	secret, _ := lookup(EnvSecretAccessKey)
	token, _ := lookup(EnvSessionToken)
	switch {
	case id == "" && secret == "":
		return Credentials{}, fmt.Errorf("no S3 credentials: set %s and %s (and %s for temporary credentials)", EnvAccessKeyID, EnvSecretAccessKey, EnvSessionToken)
	case id == "":
		return Credentials{}, fmt.Errorf("%s is set but %s is not: set both", EnvSecretAccessKey, EnvAccessKeyID)
	case secret == "":
		return Credentials{}, fmt.Errorf("%s is set but %s is not: set both", EnvAccessKeyID, EnvSecretAccessKey)
	}
	return Credentials{AccessKeyID: id, SecretAccessKey: Secret(secret), SessionToken: Secret(token)}, nil
}

func (c Config) withDefaults() Config {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.MinThroughput <= 0 {
		c.MinThroughput = 1 << 20
	}
	c.Retry = c.Retry.withDefaults()
	return c
}

// NoAnswerBudget is how long a request, and so a command, takes to fail when the endpoint accepts
// connections and never answers: RetryPolicy.Budget of the request timeout.
func (c Config) NoAnswerBudget() time.Duration {
	c = c.withDefaults()
	return c.Retry.Budget(c.RequestTimeout)
}

// GoString keeps %#v from printing the endpoint whole.
func (c Config) GoString() string { return c.String() }

// Validate checks the configuration without contacting the server.
func (c Config) Validate() error {
	if _, _, err := parseEndpoint(c.Endpoint); err != nil {
		return err
	}
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		return fmt.Errorf("bucket %q: %v", c.Bucket, err)
	}
	if _, err := NewLayout(c.Prefix); err != nil {
		return err
	}
	if c.Credentials.AccessKeyID == "" || c.Credentials.SecretAccessKey == "" {
		return fmt.Errorf("no S3 credentials: set %s and %s, or name a credentials Secret", EnvAccessKeyID, EnvSecretAccessKey)
	}
	if _, secure, _ := parseEndpoint(c.Endpoint); !secure && (c.TLS.CAFile != "" || c.TLS.InsecureSkipVerify) {
		return fmt.Errorf("endpoint %s is plain HTTP but TLS options are set: use an https:// endpoint or drop the TLS options", shownEndpoint(c.Endpoint))
	}
	return nil
}

// parseEndpoint splits an endpoint into the host:port minio-go takes and whether it uses TLS. Its
// errors show the endpoint only through shownEndpoint: scheme://host[:port], nothing that did not parse.
func parseEndpoint(endpoint string) (host string, secure bool, err error) {
	if endpoint == "" {
		return "", false, fmt.Errorf("no S3 endpoint: pass --endpoint https://host[:port] or set %s", EnvEndpoint)
	}
	if carriesCredentials(endpoint) {
		return "", false, errors.New("S3 endpoint: credentials do not belong in the URL: use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a Secret")
	}
	shown := shownEndpoint(endpoint)
	if strings.ContainsAny(endpoint, "?#") {
		return "", false, fmt.Errorf("S3 endpoint %q: a query or fragment is not part of an endpoint (a presigned URL is not one): give only scheme, host and port, like https://s3.example.com:9000", shown)
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		// url.Parse's message quotes the whole input; say what is wrong without it.
		return "", false, fmt.Errorf("S3 endpoint %q is not a valid URL: give only scheme, host and port, like https://s3.example.com:9000", shown)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, fmt.Errorf("S3 endpoint %q: the scheme is not http or https", shown)
	case u.User != nil:
		return "", false, errors.New("S3 endpoint: credentials do not belong in the URL: use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a Secret")
	case u.Host == "":
		return "", false, fmt.Errorf("S3 endpoint %q: give only scheme, host and port, like https://s3.example.com:9000", shown)
	case u.Path != "" && u.Path != "/": // the path is not shown: a presigned URL may carry a signature there
		return "", false, fmt.Errorf("S3 endpoint %q has a path, which an endpoint does not: give only scheme, host and port, like https://s3.example.com:9000", shown)
	}
	return u.Host, u.Scheme == "https", nil
}

// transport is minio-go's default transport with the configured trust and timeouts.
func (c Config) transport(secure bool) (*http.Transport, error) {
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	tr.ResponseHeaderTimeout = c.RequestTimeout
	tr.MaxIdleConnsPerHost = 64
	if !secure {
		return tr, nil
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.InsecureSkipVerify = c.TLS.InsecureSkipVerify
	if c.TLS.CAFile != "" {
		pem, err := os.ReadFile(c.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA bundle: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA bundle %s holds no PEM certificate: give a PEM file", c.TLS.CAFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return tr, nil
}

// Open connects to the store's bucket, creating it when cfg.CreateBucket is set, and checks that it
// exists and the credentials may use it.
func Open(ctx context.Context, cfg Config) (*S3ObjectStore, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, secure, _ := parseEndpoint(cfg.Endpoint)
	tr, err := cfg.transport(secure)
	if err != nil {
		return nil, err
	}
	creds := cfg.Credentials
	var rt http.RoundTripper = tr
	if cfg.wrapTransport != nil {
		rt = cfg.wrapTransport(rt)
	}
	rt = clockReader{next: rt}
	client, err := minio.New(host, &minio.Options{
		Creds:     credentials.NewStaticV4(creds.AccessKeyID, creds.SecretAccessKey.Reveal(), creds.SessionToken.Reveal()),
		Secure:    secure,
		Transport: rt,
		Region:    cfg.Region,
		// One attempt per call: this package owns retries, with its own deadlines and bounds.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", shownEndpoint(cfg.Endpoint), err)
	}
	s := &S3ObjectStore{client: client, core: minio.Core{Client: client}, bucket: cfg.Bucket,
		timeout: cfg.RequestTimeout, minThroughput: cfg.MinThroughput, retry: cfg.Retry,
		http: &http.Client{Transport: rt}}
	if err := s.ensureBucket(ctx, cfg.Region, cfg.CreateBucket); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *S3ObjectStore) ensureBucket(ctx context.Context, region string, create bool) error {
	var exists bool
	err := s.do(ctx, "check bucket", "", 0, s.retry.MaxAttempts, func(ctx context.Context) error {
		var err error
		exists, err = s.client.BucketExists(ctx, s.bucket)
		return err
	})
	if err == nil && !exists {
		// A HEAD answer has no body, so minio-go takes any 404 for NoSuchBucket, and some servers
		// answer 404 to an access key they do not know (versitygw). A listing's answer names its error.
		exists, err = s.confirmBucketMissing(ctx)
	}
	switch {
	case err != nil:
		return err
	case exists:
		return nil
	case !create:
		return fmt.Errorf("bucket %q: %w: create it, or push with --create-bucket", s.bucket, ErrBucketNotFound)
	}
	return s.do(ctx, "create bucket", "", 0, s.retry.MaxAttempts, func(ctx context.Context) error {
		err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
		if minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
			return nil // created by a concurrent attempt, or by a retried request whose answer was lost
		}
		return err
	})
}

// confirmBucketMissing lists at most one key of the bucket: it exists when that works, is missing
// when the server says NoSuchBucket, and any other answer (bad credentials) is the error.
func (s *S3ObjectStore) confirmBucketMissing(ctx context.Context) (exists bool, err error) {
	err = s.do(ctx, "check bucket", "", 0, s.retry.MaxAttempts, func(ctx context.Context) error {
		for oi := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{MaxKeys: 1}) {
			return oi.Err
		}
		return nil
	})
	if errors.Is(err, ErrBucketNotFound) {
		return false, nil
	}
	return err == nil, err
}

// StoreURL is a store location written s3://bucket/prefix.
type StoreURL struct {
	Bucket string
	Prefix string
}

func (u StoreURL) String() string {
	if u.Prefix == "" {
		return "s3://" + u.Bucket
	}
	return "s3://" + u.Bucket + "/" + u.Prefix
}

// ParseStoreURL parses s3://bucket[/prefix]. The endpoint is not part of it: S3-compatible servers
// are many, so it comes from --endpoint or AGENTREWIND_S3_ENDPOINT. Its errors show the URL only
// through shownStoreURL: s3://bucket/prefix, nothing that did not parse.
func ParseStoreURL(s string) (StoreURL, error) {
	if carriesCredentials(s) {
		return StoreURL{}, errors.New("store URL: credentials do not belong in the URL: use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a Secret")
	}
	shown := shownStoreURL(s)
	if strings.ContainsAny(s, "?#") {
		return StoreURL{}, fmt.Errorf("store URL %q: a query or fragment is not supported: write it as s3://bucket/prefix", shown)
	}
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse's message quotes the whole input; say what is wrong without it.
		return StoreURL{}, fmt.Errorf("store URL %q is not a valid URL: write it as s3://bucket/prefix", shown)
	}
	switch {
	case u.Scheme != "s3" || u.Opaque != "":
		return StoreURL{}, fmt.Errorf("store URL %q: write it as s3://bucket/prefix", shown)
	case u.User != nil:
		return StoreURL{}, errors.New("store URL: credentials do not belong in the URL: use AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a Secret")
	}
	if err := s3utils.CheckValidBucketNameStrict(u.Host); err != nil {
		return StoreURL{}, fmt.Errorf("store URL %q: the bucket name is not valid: %v", shown, err)
	}
	layout, err := NewLayout(u.Path)
	if err != nil { // its message quotes the prefix, which may be anything
		return StoreURL{}, fmt.Errorf("store URL %q: the prefix has an empty, \".\" or \"..\" path segment: use a plain path like s3://bucket/team/prod", shown)
	}
	return StoreURL{Bucket: u.Host, Prefix: layout.Prefix()}, nil
}

// carriesCredentials reports whether a URL may hold user information: any "@" at all. It looks at
// the raw text before any parsing, and does not try to find where the authority ends: a secret key
// may itself contain "/", "?", "#" or "@" (AWS keys are base64), so no delimiter can be trusted to
// end it. Endpoints and store URLs have no other use for "@".
func carriesCredentials(raw string) bool {
	return strings.Contains(raw, "@")
}

// shownEndpoint is how an error shows an endpoint: scheme://host[:port] once it parsed, never its
// userinfo, path, query or fragment, nor any part of one that did not parse (see shownURL).
func shownEndpoint(raw string) string {
	if !carriesCredentials(raw) && !strings.Contains(raw, "://") {
		raw = "https://" + raw // as parseEndpoint reads it
	}
	return shownURL(raw, false)
}

// shownStoreURL is how an error shows a store URL: s3://bucket and its prefix once it parsed.
func shownStoreURL(raw string) string { return shownURL(raw, true) }

// shownURL shows only what parsed and cannot hold a secret: scheme://host[:port] with a host of
// hostname or IP characters, and, when withPath, a path of the characters a key prefix uses. A URL
// with an "@" anywhere, or that does not parse, is not shown at all: in text that is not a URL, where
// a secret ends cannot be told ("http://u:hunter2" fails as a bad port, "/%zzhunter2" as a bad
// escape). A query or fragment is cut off before parsing and never shown.
func shownURL(raw string, withPath bool) string {
	if carriesCredentials(raw) {
		return "[a URL with credentials, not shown]"
	}
	head, _, cut := strings.Cut(strings.ReplaceAll(raw, "#", "?"), "?")
	u, err := url.Parse(head)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.User != nil || !plainHostRE.MatchString(u.Host) {
		return "[a URL that does not parse, not shown]"
	}
	shown := u.Scheme + "://" + u.Host
	switch {
	case !withPath || u.Path == "":
	case onlyChars(u.Path, pathChars):
		shown += u.Path
	default:
		shown += "/[path not shown]"
	}
	if cut {
		shown += "[query not shown]"
	}
	return shown
}

// plainHostRE is a host a URL may show: a hostname or IPv4 address, or a bracketed IPv6 address,
// and an optional port. url.Parse accepts more ("u:hunter2:" parses as a host with an empty port).
var plainHostRE = regexp.MustCompile(`^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]+)?$`)

// pathChars are the characters of a path a store URL may show: those of a plain key prefix.
const pathChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_/"

func onlyChars(s, allowed string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return !strings.ContainsRune(allowed, r) })
}
