package session

import (
	"path"
	"regexp"
)

// File names inside a session directory. The object store mirrors them under sessions/<id>/, with
// blobs shared across sessions.
const (
	MetaFile   = "meta.json"
	EventsFile = "events.jsonl"
	BlobsDir   = "blobs"
	VaultFile  = "vault.enc"
)

// BlobThreshold is the serialised size above which an event field is stored as a blob.
const BlobThreshold = 16 << 10

var blobNameRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidBlobHash reports whether h is a blob name: 64 lowercase hex characters.
func ValidBlobHash(h string) bool { return blobNameRE.MatchString(h) }

// BlobPath is the slash-separated path of a blob inside a session directory.
func BlobPath(hash string) string { return path.Join(BlobsDir, hash) }
