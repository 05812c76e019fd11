// Package blobstore keeps recorded sessions in S3-compatible object storage.
//
// It owns three things: the object-store key layout (layout.go, the only place a key is spelled), a
// small primitive ObjectStore interface with a minio-go implementation (timeouts, bounded retries,
// resumable reads) and an in-memory fake for unit tests, and the SessionStore above them that pushes,
// pulls, lists and streams sessions. Blobs are content-addressed and shared by every session, fork and
// checkpoint that references them; meta.json is written last and its presence commits a session.
//
// What this package must not do:
//   - upload vault.enc (the sealed secret map) or any credential: secrets stay on the machine or in
//     the Kubernetes Secret that holds them, and are never logged, printed or put in an error;
//   - serve bytes it has not verified: every blob is checked against its hash and events.jsonl
//     against the eventsHash of meta.json, and a mismatch is an error naming the object;
//   - make a session visible before all of its objects are stored, or overwrite a committed session
//     with different content;
//   - interpret events beyond finding the blobs they reference: the format belongs to
//     internal/engine/session.
package blobstore
