// Package checkpoint owns workspace checkpoints (seed 001): capturing a directory into a
// content-addressed manifest whose bytes live in the blob space, reading again only the files whose
// stat changed since the previous checkpoint (Unchanged, git's index quick-check), storing the
// manifest as content-addressed chunks under a small root so that only the chunks a change touched
// are uploaded (chunk.go; the blob sweep follows ManifestChunks and ChunkRefs), previewing and
// restoring it behind a guard checkpoint, addressing checkpoints by id prefix, step or "latest", and
// the pure prune plan. Git checkpoints an earlier version wrote as commits in the workspace's
// repository are still read, restored and pruned.
//
// What it must not do: delete a workspace file, follow or write through a symbolic link, capture or
// write anything below a .git (a repository's own data), write anything before every manifest path,
// blob hash, destination's writability (permissions, read-only mounts, append-only and immutable
// attributes) and file system's free space has been checked, or trust a stored manifest whose bytes
// do not hash to its id; or let two restores, or a restore and a capture, of one workspace run at
// once (an flock on its top directory refuses the later one). Sweeping unreferenced blobs and the
// Checkpoint controller live elsewhere.
package checkpoint
