package blobstore

// ForkFamily is forkFamily for the external tests of this directory (blobstore_test), which may
// import packages that import blobstore.
var ForkFamily = forkFamily
