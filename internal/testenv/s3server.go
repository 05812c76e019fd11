package testenv

import (
	"fmt"
	"testing"

	"github.com/agentrewind/agentrewind/internal/devenv"
)

// The servers themselves live in package devenv, which the demo uses too; this package adds what only
// a test needs: a server tied to the test's life, and failures reported through testing.TB.
type (
	S3Server  = devenv.S3Server
	APIServer = devenv.APIServer
)

// StartAPIServer starts kube-apiserver and etcd with the generated CRDs installed (devenv.StartAPIServer).
func StartAPIServer() (*APIServer, error) { return devenv.StartAPIServer() }

// RepoRoot returns the root of this repository.
func RepoRoot() (string, error) { return devenv.RepoRoot() }

// StartS3Server starts versitygw (from $VERSITYGW or bin/versitygw-*) with fresh root credentials and
// waits until it answers S3 requests. The server is stopped and its directory removed when tb ends;
// its output is printed if the test failed.
func StartS3Server(tb testing.TB) *S3Server {
	tb.Helper()
	s, err := devenv.LaunchS3Server(tb.TempDir(), tb.Logf)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("versitygw output:\n%s", s.Logs())
		}
	})
	return s
}

// FreeLoopbackAddr returns 127.0.0.1:<port> with a port that was free a moment ago.
func FreeLoopbackAddr(tb testing.TB) string {
	tb.Helper()
	port, err := devenv.FreeLoopbackPort()
	if err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}
