package redact

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCredentialsInValueFindsURLPasswords(t *testing.T) {
	tests := []struct {
		name, value string
		want        []string
	}{
		{"database URL", "postgres://app:s3cret-pw@db.internal:5432/app?sslmode=require", []string{"s3cret-pw", "app:s3cret-pw"}},
		{"raw @ in the password", "mysql://root:p@ss@word@host/db", []string{"p@ss@word", "root:p@ss@word"}},
		{"percent-encoded password", "redis://u:p%40ss%2Fword@cache:6379", []string{"p%40ss%2Fword", "u:p%40ss%2Fword", "p@ss/word", "u:p@ss/word"}},
		{"several URLs in one value", "a=amqp://guest:guestpass@mq b=https://x:tok3n-value@example.com/", []string{"guestpass", "guest:guestpass", "tok3n-value", "x:tok3n-value"}},
		{"short password: only user:password", "postgres://app:pw@host/db", []string{"app:pw"}},
		{"user without password", "https://token-only@example.com/", nil},
		{"empty password", "https://user:@example.com/", nil},
		{"no userinfo", "https://example.com/a@b?c=d@e", nil},
		{"not a URL", "user:password@host", nil},
		{"quoted", `url="postgres://a:b-long-pw@h/d"`, []string{"b-long-pw", "a:b-long-pw"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, CredentialsInValue(tt.value)); diff != "" {
				t.Errorf("CredentialsInValue(%q) (-want +got):\n%s", tt.value, diff)
			}
		})
	}
}

// TestCredentialsInValueIsSafeOnGarbage: arbitrary bytes neither panic nor yield a credential that is
// not in the value.
func TestCredentialsInValueIsSafeOnGarbage(t *testing.T) {
	inputs := []string{"", "://", "a://:@", "a://@@@", "x://" + strings.Repeat(":@", 5000), "\xff\xfe://\xff:\xff\xff\xff\xff@h", strings.Repeat("s://u:p@", 2000)}
	for _, in := range inputs {
		for _, c := range CredentialsInValue(in) {
			if !strings.Contains(in, c) {
				t.Errorf("credential %q is not from %q", c, in)
			}
		}
	}
}

// TestCredentialsInValueFeedAddLiteral: what the recorder learns from DATABASE_URL is redacted when
// the agent passes the URL, or the password alone, on.
func TestCredentialsInValueFeedAddLiteral(t *testing.T) {
	r := New(BuiltinPatterns())
	for _, c := range CredentialsInValue("postgres://app:Tr0ub4dor-3@db/app") {
		r.AddLiteral("env-secret", c)
	}
	out := r.String(`psql "postgres://app:Tr0ub4dor-3@db/app" -c 'select 1' # password Tr0ub4dor-3`)
	if strings.Contains(out, "Tr0ub4dor") {
		t.Fatalf("the password survived: %q", out)
	}
}
