// Package devenv starts the servers this project builds from the Go module proxy: an envtest control
// plane (kube-apiserver and etcd from hack/build-envtest-assets.sh) with the generated CRDs installed,
// and a versitygw S3 server on a loopback port. The demo and the tests (through package testenv) use
// it; it never fakes a server and never downloads anything — a missing binary names its make target.
package devenv
