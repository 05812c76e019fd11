package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGTERM is how the kubelet stops a pod: cancel the context so the manager releases its lease.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The binary is also the kubectl plugin: named kubectl-rewind, it runs the plugin's commands.
	err := commandFor(os.Args[0], os.Args[1:]).ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(exitCode(err))
	}
}
