package proxy

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestNewRefusesMCPServersTheProxyCouldNotServe: Options.MCPServers is checked by New itself, not
// only by the CLI's flag parser, so a program building the proxy gets the same refusals: a recording
// with a server it has no URL for (whose every call would fail and be recorded failing), a name a
// tool name cannot carry, a URL with credentials or another scheme. A replay or fork may mount by name.
func TestNewRefusesMCPServersTheProxyCouldNotServe(t *testing.T) {
	recorded := &session.Session{Meta: session.Meta{ID: "parent"}}
	for _, tc := range []struct {
		name    string
		opts    Options
		want    string // in the error; "" when New must accept
		notShow string
	}{
		{name: "recording by name alone", opts: Options{Mode: Record, MCPServers: map[string]string{"tracker": ""}}, want: "MCP server tracker has no URL: a recording calls the server"},
		{name: "a name with a slash", opts: Options{Mode: Record, MCPServers: map[string]string{"a/b": "http://127.0.0.1:1/mcp"}}, want: `MCP server name "a/b"`},
		{name: "credentials", opts: Options{Mode: Record, MCPServers: map[string]string{"tracker": "http://u:hunter2@127.0.0.1:1/mcp"}}, want: "carries credentials", notShow: "hunter2"},
		{name: "another scheme", opts: Options{Mode: Record, MCPServers: map[string]string{"tracker": "file:///etc/passwd"}}, want: "the scheme must be http or https"},
		{name: "a fragment", opts: Options{Mode: Record, MCPServers: map[string]string{"tracker": "http://[::1]:8090/mcp#x"}}, want: "takes no fragment"},
		{name: "recording by URL, IPv6", opts: Options{Mode: Record, MCPServers: map[string]string{"tracker": "http://[::1]:8090/mcp"}}},
		{name: "replaying by name alone", opts: Options{Mode: Replay, Session: recorded, MCPServers: map[string]string{"tracker": ""}}},
		{name: "forking by name alone", opts: Options{Mode: Fork, Session: recorded, MCPServers: map[string]string{"tracker": ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.Mode == Record {
				tc.opts.Dir = filepath.Join(t.TempDir(), "rec")
			}
			_, err := New(tc.opts)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v, want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want an error saying %q", err, tc.want)
			case tc.notShow != "" && strings.Contains(err.Error(), tc.notShow):
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}
