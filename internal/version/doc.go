// Package version reports the build's version, stamped by the Makefile with -ldflags -X. It owns no
// logic beyond formatting what the build recorded.
package version
