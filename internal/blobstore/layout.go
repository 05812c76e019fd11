package blobstore

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Layout spells every object key under a store prefix. It is the only place keys are built, so the
// layout documented in DESIGN.md ("Storage") has exactly one implementation:
//
//	<prefix>/blobs/sha256/<hh>/<hash>        content-addressed, shared by sessions, forks and checkpoints
//	<prefix>/sessions/<id>/meta.json         written last, only where none is: its presence commits the session
//	<prefix>/sessions/<id>/meta.json.<sha256>.sha256  written just before it: the record that verifies it
//	<prefix>/sessions/<id>/segments.<eventsHash>.json  the log as content-addressed segments (blobs), in order
//	<prefix>/sessions/<id>/vault.<vaultHash>.enc  the sealed vault, when meta.json declares one
//	<prefix>/sessions/<id>/events.jsonl, segments.json, vault.enc, meta.json.sha256  as older agentrewinds stored them
//	<prefix>/checkpoints/<id>/manifest.json
//	<prefix>/results/<uid>.json
//	<prefix>/gc/marks.bin                    the blob sweep's cache of what each session and manifest references
//	<prefix>/gc/windows/<opened>-<n>s-<holder>  a sweep's delete window, recorded before it re-marks (fence.go)
//
// Every session object but meta.json is named by its content's hash, and meta.json is created only
// where none is, so two pushes racing for one id never overwrite each other: one commits, the other
// finds meta.json taken and fails (commit.go).
//
// vault.enc is AES-256-GCM ciphertext: forks and replays in the cluster fetch it to restore redacted
// secrets. Its key lives in a Kubernetes Secret or a local key file and has no key here, by design.
type Layout struct {
	prefix string // "" or a clean prefix without leading or trailing slash
}

const (
	blobsDir       = "blobs/sha256"
	sessionsDir    = "sessions"
	checkpointsDir = "checkpoints"
	resultsDir     = "results"
	gcDir          = "gc"
	manifestFile   = "manifest.json"
)

// NewLayout checks and normalises a key prefix ("team-a/prod", with or without surrounding slashes).
// Empty path segments, "." and ".." are refused: S3 would store them literally and two spellings of
// one prefix would silently become two stores.
func NewLayout(prefix string) (Layout, error) {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return Layout{}, nil
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return Layout{}, fmt.Errorf("store prefix %q has an empty, \".\" or \"..\" path segment: use a plain path like team/prod", prefix)
		}
	}
	return Layout{prefix: p}, nil
}

// Prefix is the normalised prefix, without slashes around it.
func (l Layout) Prefix() string { return l.prefix }

func (l Layout) join(parts ...string) string {
	if l.prefix != "" {
		parts = append([]string{l.prefix}, parts...)
	}
	return strings.Join(parts, "/")
}

// Blob is the key of the blob with sha256 hex digest hash; callers check it with session.ValidBlobHash.
// The two-character fan-out keeps listings and per-prefix request rates of big stores manageable.
func (l Layout) Blob(hash string) string {
	fan := hash
	if len(fan) > 2 {
		fan = fan[:2]
	}
	return l.join(blobsDir, fan, hash)
}

// BlobsPrefix is the key prefix under which every blob lives.
func (l Layout) BlobsPrefix() string { return l.join(blobsDir) + "/" }

// SessionsPrefix is the key prefix under which every session's objects live.
func (l Layout) SessionsPrefix() string { return l.join(sessionsDir) + "/" }

// SessionPrefix is the key prefix of every object of session id.
func (l Layout) SessionPrefix(id string) string { return l.join(sessionsDir, id) + "/" }

// SessionMeta is the key of a session's meta.json, the commit marker.
func (l Layout) SessionMeta(id string) string { return l.join(sessionsDir, id, session.MetaFile) }

// SessionMetaSum is the key of the record that verifies a session's meta.json whose SHA-256 is
// metaHash. It is an object rather than user metadata on meta.json because S3-compatible servers,
// gateways and copy tools may drop or rewrite user metadata, never an object's bytes. Its name holds
// the hash, so a push that loses a race for the id stores a record of its own beside the winner's
// instead of replacing it: no object of a session is ever overwritten by another session's push.
func (l Layout) SessionMetaSum(id, metaHash string) string {
	return l.join(sessionsDir, id, session.MetaFile+"."+metaHash+metaSumSuffix)
}

// SessionMetaSumsPrefix is the key prefix of a session's meta.json records, the legacy one included.
func (l Layout) SessionMetaSumsPrefix(id string) string {
	return l.join(sessionsDir, id, session.MetaFile) + "."
}

// SessionLegacyMetaSum is the key of the record an older agentrewind wrote, named without the hash.
func (l Layout) SessionLegacyMetaSum(id string) string {
	return l.join(sessionsDir, id, session.MetaFile+metaSumSuffix)
}

// MetaSumFromKey reads which meta.json a record under SessionMetaSumsPrefix vouches for: the hash
// its name holds, or legacy for the older record, whose hash is in its bytes.
func (l Layout) MetaSumFromKey(id, key string) (metaHash string, legacy, ok bool) {
	rest, ok := strings.CutPrefix(key, l.SessionMetaSumsPrefix(id))
	if !ok {
		return "", false, false
	}
	if rest == metaSumSuffix[1:] {
		return "", true, true
	}
	h, ok := strings.CutSuffix(rest, metaSumSuffix)
	if !ok || !session.ValidBlobHash(h) {
		return "", false, false
	}
	return h, false, true
}

// metaSumSuffix names the records that verify meta.json.
const metaSumSuffix = ".sha256"

// SessionEvents is the key of a session's events.jsonl.
func (l Layout) SessionEvents(id string) string { return l.join(sessionsDir, id, session.EventsFile) }

// SessionSegments is the key of a session's segment index (segments.go) for the log whose SHA-256 is
// eventsHash. The hash in the name keeps a losing push's index from replacing the winner's.
func (l Layout) SessionSegments(id, eventsHash string) string {
	return l.join(sessionsDir, id, "segments."+eventsHash+".json")
}

// SessionLegacySegments is the key of the segment index an older agentrewind wrote.
func (l Layout) SessionLegacySegments(id string) string {
	return l.join(sessionsDir, id, "segments.json")
}

// IsSessionIndex says whether key is one of session id's segment indexes, legacy or named by hash.
func (l Layout) IsSessionIndex(id, key string) bool {
	if key == l.SessionLegacySegments(id) {
		return true
	}
	rest, ok := strings.CutPrefix(key, l.join(sessionsDir, id, "segments."))
	h, json := strings.CutSuffix(rest, ".json")
	return ok && json && session.ValidBlobHash(h)
}

// StrayOf says whether key is an object of session id, named by a hash, that the session committed by
// meta (whose bytes hash to metaHash) does not name: a record, segment index or vault a push stored
// before it lost the id and was stopped before it removed them.
func (l Layout) StrayOf(id, key, metaHash string, meta session.Meta) bool {
	if h, legacy, ok := l.MetaSumFromKey(id, key); ok {
		return !legacy && h != metaHash
	}
	if key != l.SessionLegacySegments(id) && l.IsSessionIndex(id, key) {
		return key != l.SessionSegments(id, meta.EventsHash)
	}
	rest, ok := strings.CutPrefix(key, l.join(sessionsDir, id, "vault."))
	h, enc := strings.CutSuffix(rest, ".enc")
	return ok && enc && session.ValidBlobHash(h) && h != meta.VaultHash
}

// SessionVault is the key of a session's sealed vault, vault.enc, whose SHA-256 is vaultHash. Only
// ciphertext is stored under it.
func (l Layout) SessionVault(id, vaultHash string) string {
	return l.join(sessionsDir, id, "vault."+vaultHash+".enc")
}

// SessionLegacyVault is the key of the sealed vault an older agentrewind wrote.
func (l Layout) SessionLegacyVault(id string) string {
	return l.join(sessionsDir, id, session.VaultFile)
}

// SessionIDFromMetaKey returns the session id of a key that is some session's meta.json.
func (l Layout) SessionIDFromMetaKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, l.SessionsPrefix())
	if !ok {
		return "", false
	}
	id, file, ok := strings.Cut(rest, "/")
	if !ok || file != session.MetaFile || ValidateID(id) != nil {
		return "", false
	}
	return id, true
}

// CheckpointManifest is the key of a checkpoint's manifest; callers check id with ValidateID.
func (l Layout) CheckpointManifest(id string) string { return l.join(checkpointsDir, id, manifestFile) }

// CheckpointSettled is the key of the mark a capture leaves once every blob of checkpoint id was found
// stored after the last blob sweep that could delete it: only a checkpoint so marked is the next
// capture's baseline.
func (l Layout) CheckpointSettled(id string) string { return l.join(checkpointsDir, id, "settled") }

// CheckpointsPrefix is the key prefix under which every checkpoint's manifest lives.
func (l Layout) CheckpointsPrefix() string { return l.join(checkpointsDir) + "/" }

// CheckpointIDFromManifestKey returns the checkpoint id of a key that is some checkpoint's manifest.
func (l Layout) CheckpointIDFromManifestKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, l.CheckpointsPrefix())
	if !ok {
		return "", false
	}
	id, file, ok := strings.Cut(rest, "/")
	if !ok || file != manifestFile || ValidateID(id) != nil {
		return "", false
	}
	return id, true
}

// Result is the key of an engine Job's output document; callers check uid with ValidateID.
func (l Layout) Result(uid string) string { return l.join(resultsDir, uid+".json") }

// SweepMarks is the key of the blob sweep's mark cache: the blob references of every events.jsonl
// and checkpoint manifest it read, by key and ETag, so the next sweep reads only what is new.
func (l Layout) SweepMarks() string { return l.join(gcDir, "marks.bin") }

// idRE admits Kubernetes names, UUIDs and the like: one key segment that cannot be "." or "..".
var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// ValidateID checks that a session, checkpoint or result id can be one segment of a key.
func ValidateID(id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("id %q cannot name objects in the store: use letters, digits, '.', '_' and '-' (up to 253), starting with a letter or digit", id)
	}
	return nil
}

// BlobHashFromKey returns the hash a blob key names, or false for a key that is not a blob key.
func (l Layout) BlobHashFromKey(key string) (string, bool) {
	h := path.Base(key)
	if !session.ValidBlobHash(h) || l.Blob(h) != key {
		return "", false
	}
	return h, true
}

// SweepWindowsPrefix is the key prefix of the records of sweeps' delete windows.
func (l Layout) SweepWindowsPrefix() string { return l.join(gcDir, "windows") + "/" }

// SweepWindow is the key of the record of a delete window a sweep opened. The record is empty: its
// name says when the window opened, how long it lasts and whose it is, so that one listing tells a
// writer every window, with no read. holder must pass ValidateID.
func (l Layout) SweepWindow(w DeleteWindow, holder string) string {
	return l.SweepWindowsPrefix() + fmt.Sprintf("%s-%ds-%s", w.Opened.UTC().Format(amzDate), int64(w.Length/time.Second), holder)
}

// SweepWindowFromKey reads a window record's key back into the window it records.
func (l Layout) SweepWindowFromKey(key string) (DeleteWindow, bool) {
	rest, ok := strings.CutPrefix(key, l.SweepWindowsPrefix())
	if !ok {
		return DeleteWindow{}, false
	}
	parts := strings.SplitN(rest, "-", 3)
	if len(parts) != 3 || ValidateID(parts[2]) != nil {
		return DeleteWindow{}, false
	}
	opened, err := time.Parse(amzDate, parts[0])
	if err != nil {
		return DeleteWindow{}, false
	}
	secs, ok := strings.CutSuffix(parts[1], "s")
	n, err := strconv.ParseInt(secs, 10, 32)
	if !ok || err != nil || n < 1 {
		return DeleteWindow{}, false
	}
	return DeleteWindow{Opened: opened, Length: time.Duration(n) * time.Second}, true
}
