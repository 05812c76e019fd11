package main

import (
	"fmt"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/mcp"
	"github.com/agentrewind/agentrewind/internal/proxy"
)

// parseMCPServers reads the proxy's --mcp-server flags: name=URL, or, replaying or forking, the name
// alone, which mounts the server to be answered from the recording only (a fork's new calls as
// --on-miss says) with no URL a fork's tail could call.
func parseMCPServers(specs []string, mode proxy.Mode) (map[string]string, error) {
	servers := map[string]string{}
	for i, spec := range specs {
		name, url, withURL := strings.Cut(spec, "=")
		if !mcp.ServerName.MatchString(name) {
			// Not shown: a URL given without its name= may carry a password, and land in a pod's log.
			return nil, fmt.Errorf("--mcp-server number %d has no valid name: use name=http(s)://host/path, the name 1 to 64 of A-Z a-z 0-9 . _ -", i+1)
		}
		if !withURL && mode == proxy.Record {
			return nil, fmt.Errorf("--mcp-server %s has no URL: a recording calls the server, use %s=http(s)://host/path", name, name)
		}
		if _, dup := servers[name]; dup {
			return nil, fmt.Errorf("--mcp-server %s is given twice", name)
		}
		servers[name] = url
	}
	if err := proxy.CheckMCPServers(servers, mode); err != nil {
		return nil, fmt.Errorf("--mcp-server: %w", err)
	}
	return servers, nil
}
