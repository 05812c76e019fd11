package bundle

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// The session layout, as the session package defines it.
const (
	metaFile   = session.MetaFile
	eventsFile = session.EventsFile
	blobsDir   = session.BlobsDir
	blobPrefix = blobsDir + "/"
	vaultFile  = session.VaultFile
)

// Refusal reasons, shared by Pack and Unpack so both ends describe a problem the same way.
const (
	reasonEscapes     = "path escapes the destination"
	reasonAbsolute    = "absolute path"
	reasonBackslash   = "name contains a backslash"
	reasonEmpty       = "empty name"
	reasonSymlink     = "symbolic link"
	reasonHardlink    = "hard link"
	reasonCharDevice  = "character device"
	reasonBlockDevice = "block device"
	reasonFIFO        = "FIFO"
	reasonSocket      = "socket"
	reasonDirectory   = "directory other than blobs/"
	reasonVault       = "vault.enc holds the secrets of a recording and must never be in a bundle"
	reasonUnknown     = "not a session file (allowed: meta.json, events.jsonl, blobs/<64 lowercase hex>)"
	reasonDuplicate   = "duplicate entry"
	reasonLongerBody  = "entry body is longer than its header claims (or the archive is corrupt)"
	reasonNotRegular  = "not a regular file"
)

// nameReason says why an archive entry name is unsafe as a path, or "" if it is not. It runs before
// the allowed-set check so that the reason reported for "../x" is the escape, not "unknown file".
func nameReason(name string) string {
	switch {
	case name == "":
		return reasonEmpty
	case strings.ContainsRune(name, 0):
		// archive/tar cuts ustar and GNU names at NUL and rejects PAX paths holding one (Unpack reads
		// the raw header to say so); checked again so the rule does not depend on that.
		return reasonNULAt(strings.IndexByte(name, 0))
	case strings.Contains(name, `\`):
		// A separator on Windows and an ordinary byte elsewhere: the same archive must mean the same
		// thing on every machine.
		return reasonBackslash
	case strings.HasPrefix(name, "/") || filepath.IsAbs(name) || filepath.VolumeName(name) != "":
		return reasonAbsolute
	case hasDotDot(name):
		return reasonEscapes
	}
	return ""
}

// reasonNULAt refuses a name holding a NUL byte at offset at.
func reasonNULAt(at int) string {
	return fmt.Sprintf("name contains a NUL byte at offset %d, which no session file name has: the bundle is damaged or was made to pass one file for another", at)
}

func hasDotDot(name string) bool {
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// typeReason says why an entry's type is refused, or "" for a regular file or the blobs/ directory.
func typeReason(hdr *tar.Header) string {
	switch hdr.Typeflag {
	case tar.TypeReg:
		return ""
	case tar.TypeDir:
		if isBlobsDir(hdr.Name) {
			return ""
		}
		return reasonDirectory
	case tar.TypeSymlink:
		return reasonSymlink
	case tar.TypeLink:
		return reasonHardlink
	case tar.TypeChar:
		return reasonCharDevice
	case tar.TypeBlock:
		return reasonBlockDevice
	case tar.TypeFifo:
		return reasonFIFO
	}
	return fmt.Sprintf("unsupported entry type %q", hdr.Typeflag)
}

// modeReason is typeReason for a file found in a session directory while packing.
func modeReason(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return reasonSymlink
	case mode&fs.ModeCharDevice != 0:
		return reasonCharDevice
	case mode&fs.ModeDevice != 0:
		return reasonBlockDevice
	case mode&fs.ModeNamedPipe != 0:
		return reasonFIFO
	case mode&fs.ModeSocket != 0:
		return reasonSocket
	case mode.IsRegular() || mode.IsDir():
		return ""
	}
	return reasonNotRegular
}

func allowedFile(name string) bool {
	return name == metaFile || name == eventsFile || isBlobPath(name)
}

func isBlobsDir(name string) bool { return name == blobsDir || name == blobPrefix }

func isBlobPath(name string) bool {
	rest, ok := strings.CutPrefix(name, blobPrefix)
	return ok && isBlobName(rest)
}

// isBlobName accepts exactly 64 lowercase hex characters, the only spelling of a sha256 that the
// session format uses, so one blob cannot appear under two names.
func isBlobName(s string) bool { return session.ValidBlobHash(s) }
