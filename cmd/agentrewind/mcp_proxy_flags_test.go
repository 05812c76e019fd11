package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/proxy"
)

func TestParseMCPServersNamesTheBadFlagWithoutItsURL(t *testing.T) {
	got, err := parseMCPServers([]string{"weather=http://127.0.0.1:9000/mcp", "files=https://files.example/mcp"}, proxy.Record)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"weather": "http://127.0.0.1:9000/mcp", "files": "https://files.example/mcp"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		specs []string
		want  string
	}{
		{[]string{"https://user:pw@host/mcp"}, "--mcp-server number 1 has no valid name"},
		{[]string{"we/ather=http://h/mcp"}, "--mcp-server number 1 has no valid name"},
		{[]string{"a=http://h/1", "a=http://h/2"}, "--mcp-server a is given twice"},
		{[]string{"a=ftp://h/mcp"}, "--mcp-server: MCP server a:"},
		{[]string{"a"}, "--mcp-server a has no URL: a recording calls the server"},
	} {
		_, err := parseMCPServers(tc.specs, proxy.Record)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "pw@") {
			t.Errorf("parseMCPServers(%q) = %v, want an error saying %q (and no password)", tc.specs, err, tc.want)
		}
	}
}

// A replay or a fork may mount a server by name alone: answered from the recording, with no URL to call.
func TestParseMCPServersTakesTheNameAloneOutsideARecording(t *testing.T) {
	got, err := parseMCPServers([]string{"tracker", "files=https://files.example/mcp"}, proxy.Fork)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"tracker": "", "files": "https://files.example/mcp"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parseMCPServers([]string{"https://user:pw@host/mcp"}, proxy.Fork); err == nil || strings.Contains(err.Error(), "pw@") {
		t.Errorf("a URL without its name: %v, want an error without the password", err)
	}
}
