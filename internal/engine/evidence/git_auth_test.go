package evidence

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
)

// gitHTTPServer serves the repositories under root with git's own smart-HTTP backend, behind basic
// auth with one user and password, and counts the requests that carried the right credentials.
func gitHTTPServer(t *testing.T, root, user, password string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git is not installed: %v", err)
	}
	backend := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	var authorised atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		authorised.Add(1)
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &authorised
}

func TestCloneGitWithAPasswordOverHTTPS(t *testing.T) {
	repo := gittest.New(t)
	head := repo.Commit("first", map[string]string{"a.txt": "a"})
	srv, authorised := gitHTTPServer(t, filepath.Dir(repo.Dir), "bot", "s3cret-token")
	// The test server's certificate is self-signed: trust it the way a cluster trusts its CA bundle.
	restore := trustTestServer(t, srv)
	defer restore()
	url := srv.URL + "/" + filepath.Base(repo.Dir)
	ctx := context.Background()

	if _, err := CloneGit(ctx, url, "", filepath.Join(t.TempDir(), "anon")); err == nil {
		t.Fatal("an anonymous clone of a repository behind auth succeeded")
	}
	if _, err := CloneGitWithAuth(ctx, url, "", filepath.Join(t.TempDir(), "wrong"), GitAuth{Username: "bot", Password: "wrong"}); err == nil {
		t.Fatal("a clone with the wrong password succeeded")
	}
	ws, err := CloneGitWithAuth(ctx, url, "", filepath.Join(t.TempDir(), "ok"), GitAuth{Username: "bot", Password: "s3cret-token"})
	if err != nil {
		t.Fatalf("clone with the right password: %v", err)
	}
	if ws.Head() != head || authorised.Load() == 0 {
		t.Fatalf("cloned head %s (want %s), %d authorised requests", ws.Head(), head, authorised.Load())
	}
}

func TestGitCredentialsAreNeverSentWhereTheyShouldNotGo(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		auth      GitAuth
		want      string
	}{
		{"a password over plain http", "http://git.example.com/r.git", GitAuth{Password: "p"}, "only sent over https"},
		{"a password over ssh", "ssh://git.example.com/r.git", GitAuth{Password: "p"}, "only sent over https"},
		{"an SSH key without known hosts", "ssh://git.example.com/r.git", GitAuth{SSHPrivateKey: []byte("k")}, "needs the server's known hosts"},
		{"a password and a key", "https://git.example.com/r.git", GitAuth{Password: "p", SSHPrivateKey: []byte("k")}, "not both"},
		{"a key that is not a key", "ssh://git.example.com/r.git", GitAuth{SSHPrivateKey: []byte("not a key"), SSHKnownHosts: []byte("git.example.com ssh-ed25519 AAAA")}, "the SSH private key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CloneGitWithAuth(context.Background(), tc.url, "", filepath.Join(t.TempDir(), "c"), tc.auth)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// trustTestServer makes go-git's https transport use the test server's client, which trusts its
// self-signed certificate, until the returned function puts the default back.
func trustTestServer(t *testing.T, srv *httptest.Server) func() {
	t.Helper()
	client.InstallProtocol("https", githttp.NewClient(srv.Client()))
	return func() { client.InstallProtocol("https", githttp.DefaultClient) }
}
