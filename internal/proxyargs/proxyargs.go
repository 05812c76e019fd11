package proxyargs

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// The proxy's flags the operator's Job builders write, and the proxy's command registers.
const (
	FlagMode              = "mode"
	FlagProvider          = "provider"
	FlagListen            = "listen"
	FlagHealthListen      = "health-listen"
	FlagTool              = "tool"
	FlagMCPServer         = "mcp-server"
	FlagLearnSecretsFrom  = "learn-secrets-from"
	FlagAnthropicUpstream = "anthropic-upstream"
	FlagOpenAIUpstream    = "openai-upstream"
)

// Flag is --name.
func Flag(name string) string { return "--" + name }

// Tool is the --tool flag of a tool backend: name=url.
func Tool(name, url string) []string { return []string{Flag(FlagTool), name + "=" + url} }

// MCPServer is the --mcp-server flag of an MCP server: name=url, or the name alone for a server a
// fork or replay serves from the recording.
func MCPServer(name, url string) []string {
	if url == "" {
		return []string{Flag(FlagMCPServer), name}
	}
	return []string{Flag(FlagMCPServer), name + "=" + url}
}

// ToolName is what a tool name may look like, in --tool and in /v1/tools/{name}.
var ToolName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// CheckUpstream refuses a base URL the proxy could not forward to safely: it must be an absolute http
// or https URL with a host, and carry no credentials, query or fragment, since a base URL travels in
// pod specs and logs and every endpoint path is appended to it.
func CheckUpstream(raw string) error {
	return checkURL(raw, false)
}

// CheckToolURL refuses a tool backend URL the proxy could not call safely: an absolute http or https
// URL with a host and no credentials. Unlike a base URL it may carry a query, which is sent as it is.
func CheckToolURL(raw string) error {
	return checkURL(raw, true)
}

func checkURL(raw string, queryAllowed bool) error {
	u, err := url.Parse(raw)
	if err == nil && u.User != nil {
		return errors.New("the URL carries credentials: give the key as a Secret, never in the URL")
	}
	shown := shownURL(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%s is not a URL: %s", shown, parseProblem(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s: the scheme must be http or https", shown)
	case u.Host == "":
		return fmt.Errorf("%s has no host: write http(s)://host[:port]/path", shown)
	case !queryAllowed && (u.RawQuery != "" || u.ForceQuery), u.Fragment != "":
		return fmt.Errorf("%s: takes no fragment, and a base URL no query", shown)
	}
	return nil
}

// shownURL is how an error shows a URL it refuses: the error lands in logs, events, status and
// termination messages, so only what parsed and cannot hold a secret is shown: scheme://host[:port]
// and a path of plain characters. A URL with an "@" anywhere, or one that does not parse, is not shown
// at all (where a password ends in text that is no URL cannot be told: "http://u:hunter2/x" fails as
// a bad port); a query or fragment is cut off and never shown.
func shownURL(raw string) string {
	if strings.Contains(raw, "@") {
		return "[URL not shown: it may carry credentials]"
	}
	head, _, cut := strings.Cut(strings.ReplaceAll(raw, "#", "?"), "?")
	u, err := url.Parse(head)
	if err != nil || u.Scheme == "" || u.Opaque != "" || !plainHost.MatchString(u.Host) {
		return "[URL not shown: it does not parse]"
	}
	shown := strconv.Quote(u.Scheme + "://" + u.Host)
	switch {
	case u.Path == "":
	case !strings.ContainsFunc(u.Path, func(r rune) bool { return !strings.ContainsRune(plainPathChars, r) }):
		shown = strconv.Quote(u.Scheme + "://" + u.Host + u.Path)
	default:
		shown += " (path not shown)"
	}
	if cut {
		shown += " (query or fragment not shown)"
	}
	return shown
}

// plainHost is a host an error may show: a hostname or IPv4 address, or a bracketed IPv6 address, and
// an optional port (url.Parse accepts more: "u:hunter2:" parses as a host with an empty port).
var plainHost = regexp.MustCompile(`^([A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\])(:[0-9]+)?$`)

// plainPathChars are the characters of a path an error may show.
const plainPathChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_/"

// parseProblem is why url.Parse refused a URL, without any of the URL: its messages quote the input,
// a bad escape or a bad port, which may be part of a password.
func parseProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var esc url.EscapeError
	var host url.InvalidHostError
	switch msg := err.Error(); {
	case errors.As(err, &esc):
		return "a % that begins no %XX escape"
	case errors.As(err, &host):
		return "a character no host may hold"
	case strings.HasPrefix(msg, "invalid port"):
		return "a port that is not a number"
	case !strings.ContainsAny(msg, "\"'`"):
		return msg
	}
	return "it does not parse"
}
