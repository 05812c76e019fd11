package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version and Commit are set at build time; a plain `go build` leaves the defaults.
var (
	Version = "dev"
	Commit  = "unknown"
)

// Info is the build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build's identity, falling back to the VCS stamp Go embeds when -ldflags set none.
func Get() Info {
	commit := Commit
	if commit == "unknown" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					commit = s.Value[:12]
				}
			}
		}
	}
	return Info{
		Version:   Version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String renders the identity on one line, as `agentrewind version` prints it.
func (i Info) String() string {
	return fmt.Sprintf("agentrewind %s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}
