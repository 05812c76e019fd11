package checkpoint

import (
	"errors"
	"fmt"
	"strings"
)

// ManifestError says a manifest cannot be trusted: a path that escapes or is malformed, a bad hash,
// an unknown schema. Nothing is written once one is returned.
type ManifestError struct {
	Path   string
	Reason string
}

func (e *ManifestError) Error() string {
	if e.Path == "" {
		return "checkpoint manifest refused: " + e.Reason
	}
	return fmt.Sprintf("checkpoint manifest refused: path %q: %s", e.Path, e.Reason)
}

// BadName is a workspace name, or a symbolic link's target, that a manifest cannot record.
type BadName struct {
	Path   string // the workspace path, as its bytes are
	Target string // the link target at fault, "" when the name itself is
}

func (b BadName) String() string {
	if b.Target != "" {
		return fmt.Sprintf("symbolic link %q (target %q)", b.Path, b.Target)
	}
	return fmt.Sprintf("%q", b.Path)
}

// MaxBadNames bounds the names a NameError lists; Count says how many there were.
const MaxBadNames = 20

// NameError says a restore's guard met workspace names, or symbolic link targets, that a manifest
// cannot record (JSON carries only valid UTF-8) at paths the restore would overwrite: the guard could
// not undo the restore. Nothing is stored; renaming the paths lets the guard pass. An ordinary
// capture leaves such paths out instead (CaptureStats.Unrecordable).
type NameError struct {
	// Names are the first MaxBadNames, in walk order; a directory stands for everything below it.
	Names []BadName
	Count int
}

func (e *NameError) Error() string {
	if len(e.Names) == 1 && e.Count <= 1 {
		if b := e.Names[0]; b.Target != "" {
			return fmt.Sprintf("symbolic link %q has a target %q that is not valid UTF-8: a checkpoint manifest cannot record it", b.Path, b.Target)
		}
		return fmt.Sprintf("file name %q is not valid UTF-8: a checkpoint manifest cannot record it", e.Names[0].Path)
	}
	names := make([]string, len(e.Names))
	for i, b := range e.Names {
		names[i] = b.String()
	}
	more := ""
	if e.Count > len(e.Names) {
		more = fmt.Sprintf(" and %d more", e.Count-len(e.Names))
	}
	return fmt.Sprintf("%d file names or link targets are not valid UTF-8, which a checkpoint manifest cannot record: %s%s", e.Count, strings.Join(names, ", "), more)
}

// TamperedError says a stored manifest's bytes, or those of one of its chunks, do not hash to the
// name they are stored under.
type TamperedError struct {
	ID string
	// Chunk, when set, names the chunk at fault: the root named ID verified, the chunk did not.
	Chunk  string
	Actual string
}

func (e *TamperedError) Error() string {
	if e.Chunk != "" {
		return fmt.Sprintf("checkpoint %s: chunk %s hashes to %s: corrupt or tampered with", e.ID, e.Chunk, e.Actual)
	}
	return fmt.Sprintf("checkpoint %s: manifest hashes to %s: corrupt or tampered with", e.ID, e.Actual)
}

// BlobHashError says a blob's bytes do not hash to its name, or the blob is missing.
type BlobHashError struct {
	Path   string
	Hash   string
	Actual string // "" when the blob is missing
}

func (e *BlobHashError) Error() string {
	if e.Actual == "" {
		return fmt.Sprintf("blob %s of %q is missing from the store", e.Hash, e.Path)
	}
	return fmt.Sprintf("blob %s of %q hashes to %s: corrupt or tampered with", e.Hash, e.Path, e.Actual)
}

// UnsafeDestinationError says a restore would have to write through a symbolic link or over
// something that is not a regular file.
type UnsafeDestinationError struct {
	Path   string // the manifest path being restored
	At     string // the workspace path that is unsafe (the path itself or an ancestor)
	Reason string
}

func (e *UnsafeDestinationError) Error() string {
	return fmt.Sprintf("restore of %q refused: %q is %s", e.Path, e.At, e.Reason)
}

// UnwritableError says the workspace would refuse a write a restore needs: At (the directory written
// into, or the file replaced) is on a read-only file system, immutable, or not writable by the
// caller. It is found before anything is written, so a restore never stops halfway for it.
type UnwritableError struct {
	Path string // the manifest path being restored
	At   string // the workspace path that refuses the write
	Err  error
}

func (e *UnwritableError) Error() string {
	return fmt.Sprintf("restore of %q refused: %q cannot be written: %v", e.Path, e.At, e.Err)
}
func (e *UnwritableError) Unwrap() error { return e.Err }

// Attribute is an inode attribute (chattr) that stops a restore from writing.
type Attribute string

const (
	// AttributeAppendOnly ("a"): the file may only be appended to, never replaced; in a directory,
	// entries may be created but never renamed or removed.
	AttributeAppendOnly Attribute = "append-only"
	// AttributeImmutable ("i"): the file or directory may not be changed at all.
	AttributeImmutable Attribute = "immutable"
)

// Letter is the attribute's letter, as lsattr shows it and chattr sets and clears it.
func (a Attribute) Letter() string {
	if a == AttributeImmutable {
		return "i"
	}
	return "a"
}

// AttributeError is the Err of an UnwritableError whose path carries an inode attribute the kernel
// enforces even for root: rename(2) cannot replace such a file, nor write into such a directory.
type AttributeError struct {
	Attribute Attribute
}

func (e *AttributeError) Error() string {
	return fmt.Sprintf("it is %s (attribute %q, see lsattr), which the kernel enforces even for root", e.Attribute, e.Attribute.Letter())
}

// NoSpaceError says a file system a restore writes to lacks the free space or inodes the restore
// needs. It is found before anything is written, so a restore never stops halfway for it.
type NoSpaceError struct {
	// At is the workspace directory on that file system ("." for the workspace itself), or the
	// store's directory when only the guard goes there.
	At string
	// Need and Available are bytes, or inodes when Inodes is set. GuardNeed is the part of Need the
	// guard checkpoint takes, when the store shares the file system.
	Need, GuardNeed, Available uint64
	Inodes                     bool
}

func (e *NoSpaceError) Error() string {
	unit := "bytes"
	if e.Inodes {
		unit = "inodes"
	}
	guard := ""
	if e.GuardNeed > 0 {
		guard = fmt.Sprintf(" (%d of them for the guard checkpoint stored there)", e.GuardNeed)
	}
	return fmt.Sprintf("restore refused: it needs %d free %s on the file system of %q%s, and %d are available; nothing was written", e.Need, unit, e.At, guard, e.Available)
}

// UnknownPathsError says a selective restore named paths the checkpoint does not hold.
type UnknownPathsError struct {
	ID    string
	Paths []string
}

func (e *UnknownPathsError) Error() string {
	return fmt.Sprintf("checkpoint %s does not hold %s", short(e.ID), strings.Join(e.Paths, ", "))
}

// AmbiguousError says an id prefix names more than one checkpoint.
type AmbiguousError struct {
	Query      string
	Candidates []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%q matches %d checkpoints: %s", e.Query, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// ErrNotFound says no checkpoint matches an address.
var ErrNotFound = errors.New("no checkpoint matches")

// GuardError says the guard checkpoint required before a restore could not be taken.
type GuardError struct{ Err error }

func (e *GuardError) Error() string {
	return "guard checkpoint before restore failed (nothing was restored): " + e.Err.Error()
}
func (e *GuardError) Unwrap() error { return e.Err }

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ErrRestoreInProgress says a restore into the same workspace is running. Two restores at once would
// interleave their writes (each file atomic, the workspace neither checkpoint) and the second guard
// would hold the first restore half done; a capture meanwhile would hold half of each. So a restore
// is refused while another restore or a capture runs, and a capture while a restore runs, before
// either reads or writes anything.
var ErrRestoreInProgress = errors.New("a restore into this workspace is running (or, for a restore, a capture of it): wait for it to finish and try again")
