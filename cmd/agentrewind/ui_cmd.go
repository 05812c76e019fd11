package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/ui"
)

// defaultUIAddr is where agentrewind ui listens unless told otherwise: loopback only.
const defaultUIAddr = "127.0.0.1:8790"

// uiOptions are the flags and argument of agentrewind ui.
type uiOptions struct {
	kubectlFlags
	store          storeFlags
	dir            string
	checkpointsDir string
	addr           string
	cluster        bool
	prices         priceOptions
}

func newUICommand() *cobra.Command {
	var o uiOptions
	cmd := &cobra.Command{
		Use:   "ui [SESSION-DIR | --store s3://<bucket>/<prefix> | --cluster]",
		Short: "Serve a read-only web timeline of recorded sessions, their forks and verdicts",
		Long: `Serve a read-only web page over recorded sessions: the list with their resume verdicts, a session's
timeline (steps, lanes, kinds, call sites, latency, tokens, cost, drift and error markers, ledger
records), the context sent at a step, the diff between two steps and between a fork and its parent,
the resume plan and the checkpoints.

The sessions come from one of:
  SESSION-DIR   a directory of session directories (as the proxy's --session-dir), or one session;
                --checkpoints-dir adds a local checkpoint store (as checkpoint --store-dir)
  --store       an object store, as push and pull take it (endpoint and credentials likewise)
  --cluster     the AgentSessions, ForkRuns, ResumePlans and Checkpoints of a namespace, through your
                kubeconfig; the recordings are read from the store each session lives in, as
                kubectl rewind inspect reads them (--store names the operator's store)

The page is served on ` + defaultUIAddr + ` unless --addr says otherwise, answers GET and HEAD only, and
never opens a session's vault: redacted secrets show as their redaction tokens.

A model call's cost is its tokens at the list price of its model, or the cost the recording states; a
model without a price shows "unknown", never $0: --price and --price-file add prices.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.dir = args[0]
			}
			if _, err := o.prices.table(); err != nil {
				return err
			}
			src, cleanup, err := o.source(cmd.Context())
			if err != nil {
				return err
			}
			defer cleanup()
			return o.serve(cmd.Context(), src, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.store.register(cmd, true)
	_ = cmd.Flags().MarkHidden("output") // the page is the output
	o.kubectlFlags.register(cmd)
	cmd.Flags().StringVar(&o.addr, "addr", defaultUIAddr, "the address to serve on; anything but a loopback address lets others on the network read the sessions")
	cmd.Flags().StringVar(&o.checkpointsDir, "checkpoints-dir", "", "with SESSION-DIR: a local checkpoint store whose checkpoints are listed with their sessions")
	cmd.Flags().BoolVar(&o.cluster, "cluster", false, "show the cluster's AgentSessions, ForkRuns, ResumePlans and Checkpoints (see --kubeconfig, --context, -n)")
	o.prices.register(cmd.Flags())
	return cmd
}

// source checks that exactly one source was named and opens it; cleanup releases it.
func (o *uiOptions) source(ctx context.Context) (ui.Source, func(), error) {
	noop := func() {}
	storeSet := o.store.store != "" || os.Getenv(envStore) != ""
	switch {
	case o.dir != "" && (o.cluster || o.store.store != ""):
		return nil, noop, errors.New("SESSION-DIR, --store and --cluster name different sources: pass one")
	case o.checkpointsDir != "" && o.dir == "":
		return nil, noop, errors.New("--checkpoints-dir goes with SESSION-DIR (a store or the cluster lists its own checkpoints)")
	case o.dir != "":
		src, err := ui.NewDirSource(o.dir, o.checkpointsDir)
		return src, noop, err
	case o.cluster:
		src, err := o.clusterSource()
		if err != nil {
			return nil, noop, err
		}
		return src, src.close, nil
	case storeSet:
		store, _, err := o.store.open(ctx, nil)
		if err != nil {
			return nil, noop, err
		}
		src, err := ui.NewStoreSource(store, "")
		if err != nil {
			return nil, noop, err
		}
		return src, func() { _ = src.Close() }, nil
	}
	return nil, noop, fmt.Errorf("name the sessions to show: a SESSION-DIR, --store s3://<bucket>/<prefix> (or $%s), or --cluster", envStore)
}

// serve listens on --addr and serves src until ctx ends.
func (o *uiOptions) serve(ctx context.Context, src ui.Source, out, errOut io.Writer) error {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", o.addr, err)
	}
	loopback := isLoopbackAddr(ln.Addr())
	if !loopback {
		fmt.Fprintf(errOut, "warning: serving on %s, not a loopback address: anyone who can reach it can read these sessions\n", ln.Addr())
	}
	prices, err := o.prices.table()
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv := &http.Server{Handler: ui.NewServer(src, ui.Options{LoopbackOnly: loopback, Prices: prices}), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "agentrewind ui: serving http://%s/ (read-only; Ctrl-C stops)\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

func isLoopbackAddr(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
