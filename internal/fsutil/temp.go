package fsutil

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A command writes its output beside the target and renames it into place. The temporary carries its
// owner in its name, .<target>.<purpose>-<pid>-<host>-<random> (host: 8 hex digits of the hostname's
// sha256), so that when the command is killed the next one writing the same target can tell the
// leftover is its own kind's and abandoned: its name parses, and its process is gone (same host) or
// it was last modified more than StaleTempAge ago. Nothing else is removed.

// StaleTempAge is the age after which a temporary is abandoned whoever made it: no command takes a
// day, and a host that shares the file system may have another PID space.
const StaleTempAge = 24 * time.Hour

// ownerRE is what follows a temporary's prefix: pid, host tag, os.CreateTemp's random digits.
var ownerRE = regexp.MustCompile(`^([0-9]+)-([0-9a-f]{8})-[0-9]+$`)

// CreateTemp creates a temporary file beside target for the given purpose ("tmp", "unpack"), named
// as its owner's.
func CreateTemp(target, purpose string) (*os.File, error) {
	return os.CreateTemp(filepath.Dir(target), tempPrefix(target, purpose)+strconv.Itoa(os.Getpid())+"-"+hostTag()+"-*")
}

// MkdirTemp creates a temporary directory beside target for the given purpose, named as its owner's
// (mode 0700, as os.MkdirTemp makes it).
func MkdirTemp(target, purpose string) (string, error) {
	return os.MkdirTemp(filepath.Dir(target), tempPrefix(target, purpose)+strconv.Itoa(os.Getpid())+"-"+hostTag()+"-*")
}

// RemoveStaleTemps removes the temporaries of the given purpose that killed commands left beside
// target, judged at now, and returns their paths. Anything it cannot read or recognise, a link
// included, is left alone; so are the temporaries of this process and of live ones.
func RemoveStaleTemps(target, purpose string, now time.Time) []string {
	parent, prefix := filepath.Dir(target), tempPrefix(target, purpose)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	host := hostTag()
	var removed []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		m := ownerRE.FindStringSubmatch(rest)
		if !ok || m == nil || !(e.Type().IsRegular() || e.IsDir()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if !staleTemp(pid, m[2] == host, now.Sub(info.ModTime())) {
			continue
		}
		path := filepath.Join(parent, e.Name())
		if os.RemoveAll(path) == nil {
			removed = append(removed, path)
		}
	}
	return removed
}

// staleTemp decides whether another process's temporary is abandoned.
func staleTemp(pid int, sameHost bool, age time.Duration) bool {
	return age > StaleTempAge || (sameHost && ProcessGone(pid))
}

func tempPrefix(target, purpose string) string {
	return "." + filepath.Base(target) + "." + purpose + "-"
}

// hostTag names this host in a temporary's name without spelling its name.
func hostTag() string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host))
	return hex.EncodeToString(sum[:4])
}
