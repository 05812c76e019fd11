// Package blobstore keeps recorded sessions in S3-compatible object storage.
//
// It owns three things: the object-store key layout (layout.go, the only place a key is spelled), a
// small primitive ObjectStore interface with a minio-go implementation (timeouts, bounded retries,
// resumable reads) and an in-memory fake for unit tests, and the SessionStore above them that pushes,
// pulls, lists and streams sessions, with workspace checkpoints beside them (checkpoints.go: the
// checkpoint package's blob and manifest spaces over the same store). Blobs are content-addressed and
// shared by every session, fork and checkpoint that references them; meta.json is written last and
// its presence commits a session, just after meta.json.sha256, the record that verifies it. A
// session's log is stored as content-addressed segments listed by its segments.json (segments.go),
// so that forks, whose logs repeat their parent's lines, store only what is their own.
//
// A session's vault.enc is stored beside it, sealed: it is AES-256-GCM ciphertext that forks and
// replays in the cluster fetch to restore the secrets redaction took out. Its key is never stored:
// it lives in a Kubernetes Secret or a local 0600 key file, and this package never reads it. The
// vault is stored only when meta.json declares it (vaultHash), so every copy can be verified; an
// undeclared vault.enc stays on the machine. Bundles (internal/engine/bundle) never carry the vault.
//
// What this package must not do:
//   - store a vault's key or any credential: they stay on the machine or in the Kubernetes Secret
//     that holds them, and are never logged, printed or put in an error;
//   - serve bytes it has not verified: every blob is checked against its hash, meta.json against
//     meta.json.sha256 (and decoded strictly), each segment of a log against its digest before its
//     lines are used and the whole log against the eventsHash of meta.json, and vault.enc against
//     its vaultHash, and a mismatch is an error naming the object; nor store or write out a session
//     agentrewind verify rejects: push opens the local session with session.Open before uploading
//     anything, and pull opens the assembled copy before renaming it into place;
//   - wait without bound: every request has a bounded number of attempts, each with a deadline,
//     and a download slower than the minimum throughput is abandoned;
//   - know Kubernetes: credentials from a Secret are read by package kubecreds, not here;
//   - make a session visible before all of its objects are stored (a declared vault included), or
//     overwrite a committed session with different content;
//   - interpret events beyond finding the blobs they reference: the format belongs to
//     internal/engine/session.
package blobstore
