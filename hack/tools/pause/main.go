// Command pause is the only binary of the single-node cluster's sandbox image (hack/cluster): it holds a
// pod's namespaces by sleeping until it is told to stop. Built static and put in an image FROM scratch, so
// the cluster needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
