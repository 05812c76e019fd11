package main

import (
	"fmt"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/proxy"
)

// parseMCPServers reads the proxy's --mcp-server name=URL flags.
func parseMCPServers(specs []string) (map[string]string, error) {
	servers := map[string]string{}
	for i, spec := range specs {
		name, url, ok := strings.Cut(spec, "=")
		if !ok || !mcp.ServerName.MatchString(name) {
			// Not shown: a URL given without its name= may carry a password, and land in a pod's log.
			return nil, fmt.Errorf("--mcp-server number %d has no valid name: use name=http(s)://host/path, the name 1 to 64 of A-Z a-z 0-9 . _ -", i+1)
		}
		if _, dup := servers[name]; dup {
			return nil, fmt.Errorf("--mcp-server %s is given twice", name)
		}
		servers[name] = url
	}
	if err := proxy.CheckMCPServers(servers); err != nil {
		return nil, fmt.Errorf("--mcp-server: %w", err)
	}
	return servers, nil
}
