// Package gc owns the garbage collector's decisions, as pure functions over facts a caller gathered:
// Collect says which sessions are reachable (and the root that keeps each) and which are deleted now,
// Sweep which listed blobs a blob sweep deletes. It must not read a clock, the cluster or the store:
// the GC controller and the blob sweep (package gc/blobsweep) do the I/O and act on the plans.
package gc
