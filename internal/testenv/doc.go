// Package testenv starts the real servers this project's tests run against: an envtest control plane
// (kube-apiserver and etcd built by hack/build-envtest-assets.sh) with the generated CRDs installed, and
// a versitygw S3 server on a random loopback port. It is imported only by tests; it never fakes a server
// and never downloads anything — when a binary is missing it says which make target builds it.
package testenv
