package proxy

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServerURLNeverReachesTheRecordingOrTheAgent: a server URL may carry its key in the query
// (CheckToolURL allows one). When the server cannot be reached, or times out, the call's error is
// recorded in the session and answered to the agent: neither may hold the URL, which Go's HTTP
// client writes into every transport error.
func TestMCPServerURLNeverReachesTheRecordingOrTheAgent(t *testing.T) {
	const token = "mcpQueryKey7f3a9c"
	for _, tc := range unansweringBackends(t, "/mcp?token="+token) {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rec")
			rec := start(t, Options{Mode: Record, Dir: dir, ID: "rec", MCPServers: map[string]string{"weather": tc.url},
				Client: &http.Client{Timeout: 200 * time.Millisecond}})
			cl := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "agent", Version: "v0.1"}, nil)
			_, err := cl.Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: rec.url + "/mcp/weather", MaxRetries: -1}, nil)
			if err == nil || !strings.Contains(err.Error(), "the MCP server is not available") {
				t.Fatalf("connecting through the proxy to a server it cannot reach: %v, want the server unavailable", err)
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("the agent's error shows the server's URL: %v", err)
			}
			if out := rec.stop(t); out.Err != nil {
				t.Fatal(out.Err)
			}
			assertNotIn(t, dir, token)
		})
	}
}

// assertNotIn fails if any file under dir holds s.
func assertNotIn(t *testing.T, dir, s string) {
	t.Helper()
	files := 0
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		files++
		data, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(data), s) {
			t.Errorf("%s holds %q", path, s)
		}
		return err
	})
	if err != nil || files == 0 {
		t.Fatalf("reading %s: %v (%d files)", dir, err, files)
	}
}
