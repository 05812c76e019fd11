package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// kubectlFlags are kubectl's own flags for finding the cluster: --kubeconfig, --context and
// -n/--namespace. A kubectl plugin gets none of kubectl's flags, only the arguments after its name, so
// it reads them itself.
type kubectlFlags struct {
	kubeconfig, context, namespace string
}

func (f *kubectlFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty uses $KUBECONFIG, ~/.kube/config or the in-cluster config")
	fl.StringVar(&f.context, "context", "", "the kubeconfig context to use; empty uses its current context")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "the namespace; empty uses the context's")
	_ = cmd.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return f.contexts(), cobra.ShellCompDirectiveNoFileComp
	})
}

func (f kubectlFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: f.context, Context: clientcmdapi.Context{Namespace: f.namespace}})
}

// client connects as kubectl would and returns the namespace to use: --namespace, else the context's.
// The client can watch, which fork --wait does.
func (f kubectlFlags) client() (client.WithWatch, string, error) {
	cc := f.clientConfig()
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the cluster configuration: %w (set --kubeconfig, KUBECONFIG or --context)", err)
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

// contexts lists the kubeconfig's contexts, for completing --context.
func (f kubectlFlags) contexts() []string {
	raw, err := f.clientConfig().RawConfig()
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(raw.Contexts))
	for n := range raw.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// completionTimeout bounds a completion's cluster read: a shell waits for it at every Tab.
const completionTimeout = 5 * time.Second

// completeNames completes the first argument with names list reads from the cluster (the flags are
// parsed by then, so --namespace and --context count). Nothing is offered when the cluster cannot be
// read: a completion never prints an error into the command line.
func completeNames(f *kubectlFlags, list func(ctx context.Context, c client.Client, ns string) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		// The API discovery the client does first takes no context: untilDone holds the timeout
		// against a server that accepts the connection and never answers.
		found := make(chan []string, 1)
		err := untilDone(ctx, func() error {
			c, ns, err := f.client()
			if err != nil {
				return err
			}
			names, err := list(ctx, c, ns)
			found <- names
			return err
		})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return <-found, cobra.ShellCompDirectiveNoFileComp
	}
}

// sessionNames lists the AgentSessions of a namespace.
func sessionNames(ctx context.Context, c client.Client, ns string) ([]string, error) {
	var list v1alpha1.AgentSessionList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names, nil
}

// suiteNames lists the replay suites of a namespace: the values of the suite label on its ForkRuns.
func suiteNames(ctx context.Context, c client.Client, ns string) ([]string, error) {
	var list v1alpha1.ForkRunList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.HasLabels{LabelSuite}); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var names []string
	for _, fr := range list.Items {
		if s := fr.Labels[LabelSuite]; s != "" && !seen[s] {
			seen[s] = true
			names = append(names, s)
		}
	}
	sort.Strings(names)
	return names, nil
}

// fixedCompletion completes a flag with a fixed list of values.
func fixedCompletion(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// checkObjectName refuses a name no AgentSession, Checkpoint or ResumePlan can have (the API server
// holds custom objects to DNS subdomain names) before the cluster is asked about it, naming the
// argument at fault: "", A_B, ../x and a name with control characters say what is wrong with them.
func checkObjectName(what, name string) error {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("%s %q is not a valid object name: %s", what, name, strings.Join(msgs, "; "))
	}
	return nil
}
