package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// mountEntry is one line of /proc/self/mountinfo: the file system (major:minor), the directory of it
// that is mounted (root) and where (point).
type mountEntry struct {
	dev, root, point string
}

// readMountInfo parses /proc/self/mountinfo; nil where there is none.
func readMountInfo() []mountEntry {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, mountEntry{dev: fields[2], root: unescapeMount(fields[3]), point: unescapeMount(fields[4])})
	}
	return out
}

// unescapeMount undoes the octal escapes (\040 a space, \011 a tab, \012 a newline, \134 a
// backslash) mountinfo writes in paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// inFileSystem is where the resolved absolute path p lies: the file system of the mount it is under
// (the deepest mount point above it, the latest mounted of equal ones) and its path inside that
// file system. A bind mount of a subdirectory shows it under an unrelated path whose parents are
// not its real ones; this undoes that. ok is false when no mount is known.
func inFileSystem(mounts []mountEntry, p string) (dev, inner string, ok bool) {
	best := -1
	for i, m := range mounts {
		if !within(p, m.point) {
			continue
		}
		if best < 0 || len(m.point) >= len(mounts[best].point) {
			best = i
		}
	}
	if best < 0 {
		return "", "", false
	}
	m := mounts[best]
	rel, err := filepath.Rel(m.point, p)
	if err != nil {
		return "", "", false
	}
	return m.dev, filepath.Join(m.root, rel), true
}

// overlapThroughMounts reports whether the resolved paths a and b are one directory, or one inside
// the other, in the file system they lie in, whatever mount (a bind mount of a subdirectory too)
// each is reached through.
func overlapThroughMounts(a, b string) bool {
	mounts := readMountInfo()
	da, ia, ok1 := inFileSystem(mounts, a)
	db, ib, ok2 := inFileSystem(mounts, b)
	return ok1 && ok2 && da == db && (within(ia, ib) || within(ib, ia))
}
