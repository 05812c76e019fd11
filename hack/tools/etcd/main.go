// Command etcd is the upstream etcd server (the line Kubernetes 1.37 ships with), built for envtest.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
