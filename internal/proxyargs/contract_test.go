package proxyargs

import (
	"slices"
	"testing"
)

// The builders spell each flag as the proxy reads it: --name, and name=url for a backend.
func TestTheBuildersSpellTheFlags(t *testing.T) {
	for _, tc := range []struct{ got, want []string }{
		{Tool("search", "http://tracker/search"), []string{"--tool", "search=http://tracker/search"}},
		{MCPServer("tracker", "http://tracker/mcp"), []string{"--mcp-server", "tracker=http://tracker/mcp"}},
		{MCPServer("tracker", ""), []string{"--mcp-server", "tracker"}},
		{[]string{Flag(FlagListen)}, []string{"--listen"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}
