// Package blobsweep is the blob sweep's I/O: under a single-owner lock it marks every blob the
// store's sessions and checkpoint manifests reference, the chunks a manifest names and the files
// they name included (reusing its mark cache for those an earlier sweep read), lists blobs/, and
// deletes what gc.Sweep says is unreferenced and older than the
// safety margin. It must not decide what is garbage itself (gc does), delete anything before
// marking completed, or delete, or write its cache, without holding the lock.
package blobsweep
