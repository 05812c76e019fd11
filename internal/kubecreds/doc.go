// Package kubecreds reads the credentials the operator's controllers and Jobs need from Kubernetes
// Secrets, so the object store (package blobstore) knows nothing about Kubernetes. Errors name the
// Secret and the key, never a value.
package kubecreds
