package controller

import (
	"fmt"

	"github.com/agentrewind/agentrewind/internal/proxyargs"
)

// Upstreams are the provider base URLs every rewind proxy the controllers start forwards live calls
// to: a platform team points them at its LLM gateway (or, in tests, a fake provider) once, at the
// operator, instead of in every ForkRun. Empty leaves the proxy's default for that provider.
type Upstreams struct {
	Anthropic string
	OpenAI    string
}

// Check refuses a base URL the proxy could not use, naming the flag to fix.
func (u Upstreams) Check() error {
	for _, f := range u.flags() {
		if f.url == "" {
			continue
		}
		if err := proxyargs.CheckUpstream(f.url); err != nil {
			return fmt.Errorf("--%s: %w", f.name, err)
		}
	}
	return nil
}

// proxyArgs are the proxy's flags for the upstreams that are set.
func (u Upstreams) proxyArgs() []string {
	var args []string
	for _, f := range u.flags() {
		if f.url != "" {
			args = append(args, proxyargs.Flag(f.name), f.url)
		}
	}
	return args
}

type upstreamFlag struct{ name, url string }

// flags pairs each upstream with the proxy flag (and the manager flag) of the same name.
func (u Upstreams) flags() []upstreamFlag {
	return []upstreamFlag{{proxyargs.FlagAnthropicUpstream, u.Anthropic}, {proxyargs.FlagOpenAIUpstream, u.OpenAI}}
}
