// Package e2e is the end-to-end suite: the operator deployed from config/default as a Deployment under its
// own ServiceAccount on a real cluster (the single-node cluster of hack/cluster, or the one in
// KUBECONFIG), driven through the API like a user. Its tests carry the e2e build tag: run `make e2e`.
package e2e
