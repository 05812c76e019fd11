package blobstore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrewind/agentrewind/internal/fsutil"
)

// A pull assembles the session in a temporary directory beside its destination, named
// .<dir>.pull-<random>, and renames it into place. A pull that is killed leaves that directory
// behind; the next pull into the same place removes it, but only when it is clearly a pull's and
// clearly abandoned: it holds the marker a pull writes, naming the same destination, and the
// process that wrote it is gone (same host) or it is older than stalePullAge.

const (
	pullTempInfix = ".pull-"
	pullMarker    = ".agentrewind-pull"
	// stalePullAge is the age after which a pull's temporary directory is abandoned whoever made
	// it: no pull takes a day, and a host that shares the file system may have another PID space.
	stalePullAge = 24 * time.Hour
)

type pullOwner struct {
	Dir  string `json:"dir"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
}

// markPull writes the marker that lets a later pull into dir recognise tmp as an abandoned pull's.
func markPull(tmp, dir string) error {
	host, _ := os.Hostname()
	data, err := json.Marshal(pullOwner{Dir: dir, Host: host, PID: os.Getpid()})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(tmp, pullMarker), data, 0o644)
}

// removeStalePulls removes the temporary directories that killed pulls into dir left beside it and
// returns them. Anything it cannot read or recognise is left alone.
func removeStalePulls(dir string) []string {
	parent, prefix := filepath.Dir(dir), "."+filepath.Base(dir)+pullTempInfix
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	host, _ := os.Hostname()
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		tmp := filepath.Join(parent, e.Name())
		if stalePull(tmp, dir, host) && os.RemoveAll(tmp) == nil {
			removed = append(removed, tmp)
		}
	}
	return removed
}

func stalePull(tmp, dir, host string) bool {
	marker := filepath.Join(tmp, pullMarker)
	fi, err := os.Lstat(marker)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return false
	}
	data, err := os.ReadFile(marker)
	if err != nil {
		return false
	}
	var owner pullOwner
	if json.Unmarshal(data, &owner) != nil || owner.Dir != dir || owner.PID <= 0 {
		return false
	}
	if time.Since(fi.ModTime()) > stalePullAge {
		return true
	}
	return owner.Host == host && owner.PID != os.Getpid() && fsutil.ProcessGone(owner.PID)
}
