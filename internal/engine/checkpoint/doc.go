// Package checkpoint owns workspace checkpoints: capturing a directory into a content-addressed
// manifest, previewing and restoring it (overwrite-only, behind a guard checkpoint), addressing
// checkpoints by id prefix, step or "latest", and the pure prune plan.
//
// What this package must not do: delete a workspace file, follow or write through a symbolic link,
// write anything before every manifest path and blob hash has been checked, or trust a manifest it
// did not verify. Blob garbage collection and the Checkpoint controller live elsewhere.
package checkpoint
