package blobstore

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestS3ClockSkewIsNamedNotBlamedOnCredentials: a store whose clock is 20 minutes ahead refuses
// every request. Open (a HEAD, whose bodiless 403 minio-go reads as AccessDenied) and a push
// (RequestTimeTooSkewed) both name the clocks of the refused exchange and say to sync them.
func TestS3ClockSkewIsNamedNotBlamedOnCredentials(t *testing.T) {
	env := startS3(t)
	env.open(t, env.config("")) // creates the bucket
	ctx := context.Background()

	t.Run("open", func(t *testing.T) {
		proxy := startFaultProxy(t, env.srv.Endpoint, 1, map[fault]int{faultSkewed: 1}, 1<<30)
		proxy.skew = 20 * time.Minute
		_, err := Open(ctx, env.config(proxy.addr))
		assertSkewNamed(t, err, "this machine's, more than the 15 minutes", "if that is not it, check the credentials")
	})
	t.Run("push", func(t *testing.T) {
		proxy := startFaultProxy(t, env.srv.Endpoint, 1, map[fault]int{faultSkewed: 1}, 1<<30)
		proxy.skew = 20 * time.Minute
		proxy.only = func(r *http.Request) bool { return r.Method == http.MethodPut && isBlob(r) }
		store := env.storeVia(t, proxy.addr, "team/prod", 0)
		dir := filepath.Join(t.TempDir(), "run-1")
		writeSession(t, dir, "run-1", "", payloads(1, 3, 8<<10))
		_, err := store.Push(ctx, dir)
		if proxy.counts()["skewed"] == 0 {
			t.Fatal("the proxy refused no upload")
		}
		assertSkewNamed(t, err, "RequestTimeTooSkewed")
		if strings.Contains(err.Error(), "credentials") {
			t.Errorf("push refused for its time: %v, want no word of the credentials", err)
		}
	})
}

// assertSkewNamed checks that err says the store's clock is 20 minutes ahead, naming both clocks.
func assertSkewNamed(t *testing.T, err error, more ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error through a store whose clock is 20 minutes ahead")
	}
	msg := err.Error()
	// The store's answer is dated to the second, after the request was signed: 20m0s or 20m1s.
	if !strings.Contains(msg, "the store's clock is 20m") || !strings.Contains(msg, "ahead of this machine's") {
		t.Errorf("error %q\ndoes not say the store's clock is 20 minutes ahead", msg)
	}
	m := clocksNamed.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("error %q\nnames neither clock", msg)
	}
	signed, _ := time.Parse(time.RFC3339, m[1])
	server, _ := time.Parse(time.RFC3339, m[2])
	if d := server.Sub(signed); d < 20*time.Minute || d > 20*time.Minute+2*time.Second || time.Since(signed).Abs() > time.Minute {
		t.Errorf("error %q\nnames the clocks %s and %s; want this machine's now and the store's 20 minutes ahead", msg, signed, server)
	}
	for _, w := range append([]string{"NTP"}, more...) {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q\nlacks %q", msg, w)
		}
	}
}

var clocksNamed = regexp.MustCompile(`signed the request at (\S+), the store answered at (\S+):`)
