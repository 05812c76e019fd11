// Package checkpoint owns workspace checkpoints (seed 001): capturing a directory into a
// content-addressed manifest (or, in a git work tree, a commit object that moves no branch, tag or
// HEAD and touches no index; its own ref under refs/agentrewind/checkpoints/ keeps git gc from
// collecting it), previewing and restoring it behind a guard checkpoint, addressing checkpoints by id
// prefix, step or "latest", and the pure prune plan.
//
// What it must not do: delete a workspace file, follow or write through a symbolic link, write
// anything before every manifest path, blob hash, destination's writability (permissions, read-only
// mounts, append-only and immutable attributes) and file system's free space has been checked, or
// trust a stored manifest whose bytes do not hash to its id; or let two restores, or a restore and a
// capture, of one workspace run at once (an flock on its top directory refuses the later one).
// Sweeping unreferenced blobs and the Checkpoint controller live elsewhere.
package checkpoint
