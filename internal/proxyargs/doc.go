// Package proxyargs is the rewind proxy's command-line contract: the flags the operator's Job builders
// write and the proxy's command reads, and the rules a tool name and a backend or upstream URL must
// follow. Both sides import it, so the manager checks and builds a proxy's arguments without linking
// the proxy itself.
package proxyargs
