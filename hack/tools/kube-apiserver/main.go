// Command kube-apiserver is the upstream API server built from the k8s.io/kubernetes module, so that
// envtest can run on a machine that can reach only the Go module proxy.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
