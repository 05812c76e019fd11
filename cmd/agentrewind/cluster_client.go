package main

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterFlags are how a command that reads the cluster finds it, as kubectl's flags of the same name.
type clusterFlags struct {
	kubeconfig, namespace string
}

// client connects as kubectl would: --kubeconfig, else $KUBECONFIG or ~/.kube/config, else in-cluster.
// It returns the namespace to use: --namespace, else the kubeconfig context's.
func (f clusterFlags) client() (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: f.namespace}})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the cluster configuration: %w (set --kubeconfig or KUBECONFIG)", err)
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}
