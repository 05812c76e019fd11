package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
)

// inspectOptions are the flags and argument of kubectl rewind inspect.
type inspectOptions struct {
	kubectlFlags
	store   storeFlags
	output  string
	session string
	prices  priceOptions
}

func newKubectlInspectCommand() *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:   "inspect SESSION [--store s3://<bucket>/<prefix>]",
		Short: "Print an AgentSession's timeline, read from the store it lives in",
		Long: `Print the timeline of the AgentSession SESSION (step, kind, lane, call site, fingerprint, tokens,
cost, provenance), as agentrewind inspect prints a session directory, with the same price flags. The recording is read from the store
the session lives in and verified on the way, as pull does; nothing is left on disk.

A session with spec.storage lives in that bucket and prefix. Any other lives in the operator's store,
under <prefix>/<namespace>/: --store names that store as the manager's --store-bucket and
--store-prefix do, s3://<bucket>/<prefix> (default $` + envStore + `). The endpoint comes from
--endpoint or $` + blobstore.EnvEndpoint + `, the credentials from AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.

Exit codes: 0 when the timeline was printed; 2 when the stored session is corrupt or incomplete; 1
otherwise (no such AgentSession, the store unreadable, the session not in it).

` + storeTimeHelp,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(&o.kubectlFlags, sessionNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.session = args[0]
			// The store flags check their output as text or json; this command prints yaml too.
			o.output, o.store.output = o.store.output, "text"
			if err := checkOutputYAML(o.output); err != nil {
				return err
			}
			if err := checkObjectName("SESSION", o.session); err != nil {
				return err
			}
			if _, err := o.prices.table(); err != nil {
				return err
			}
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), c, ns, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.store.register(cmd, true)
	o.kubectlFlags.register(cmd)
	o.prices.register(cmd.Flags())
	out := cmd.Flags().Lookup("output")
	out.Usage = "output format: text, json or yaml"
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("text", "json", "yaml"))
	return cmd
}

// sessionStore is where AgentSession s lives: its own bucket (spec.storage), else the operator's
// store (operatorStore, s3://bucket/prefix) under the namespace's prefix, as the operator puts it.
func sessionStore(s *v1alpha1.AgentSession, operatorStore string) (string, error) {
	if st := s.Spec.Storage; st.Bucket != "" {
		return blobstore.StoreURL{Bucket: st.Bucket, Prefix: st.Prefix}.String(), nil
	}
	if operatorStore == "" {
		return "", fmt.Errorf("AgentSession %s lives in the operator's store: pass --store s3://<bucket>/<prefix>, the manager's --store-bucket and --store-prefix (or set %s)",
			s.Name, envStore)
	}
	loc, err := blobstore.ParseStoreURL(operatorStore)
	if err != nil {
		return "", fmt.Errorf("--store: %w", err)
	}
	loc.Prefix = path.Join(loc.Prefix, s.Namespace)
	return loc.String(), nil
}

func (o *inspectOptions) run(ctx context.Context, c client.Client, ns string, out, errOut io.Writer) error {
	var s v1alpha1.AgentSession
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.session}, &s); err != nil {
		return sessionGetError(err, o.session, ns)
	}
	if o.store.store == "" {
		o.store.store = os.Getenv(envStore)
	}
	loc, err := sessionStore(&s, o.store.store)
	if err != nil {
		return err
	}
	o.store.store = loc
	ctx, cancel := o.store.context(ctx)
	defer cancel()
	store, _, err := o.store.open(ctx, nil)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "agentrewind-inspect-*")
	if err != nil {
		return fmt.Errorf("making a directory to read the session into: %w (set TMPDIR to a writable directory)", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	dir := filepath.Join(tmp, "session")
	id := s.Spec.SessionID
	if _, err := store.Pull(ctx, id, dir); err != nil {
		if errors.Is(err, blobstore.ErrSessionNotFound) {
			err = fmt.Errorf("%w: AgentSession %s records it in %s, but it is not there (still recording, or --store is not the operator's store)", err, s.Name, loc)
		}
		return classify(storeAdvice(fmt.Errorf("reading session %s from %s: %w", id, loc, err)))
	}
	sess, err := openSession(dir)
	if err != nil {
		return err
	}
	prices, err := o.prices.table()
	if err != nil {
		return err
	}
	return printInspect(out, errOut, o.output, sess, prices, map[string]any{"agentSession": s.Name, "namespace": s.Namespace, "store": loc})
}
