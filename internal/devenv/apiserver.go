package devenv

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentrewindv1alpha1 "github.com/agentrewind/agentrewind/api/v1alpha1"
)

// APIServer is a running envtest control plane with this project's CRDs installed.
type APIServer struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	env    *envtest.Environment
}

// Scheme returns a scheme with the built-in kinds and this project's kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(agentrewindv1alpha1.AddToScheme(s))
	return s
}

// StartAPIServer starts kube-apiserver and etcd and installs the generated CRDs from config/crd/bases.
// The binaries come from KUBEBUILDER_ASSETS, or else from the single bin/k8s/<version>/ directory.
// Call Stop when done, typically from TestMain.
func StartAPIServer() (*APIServer, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	apiserver, err := binaryFromEnvOrBin("KUBEBUILDER_ASSETS", "k8s/*/kube-apiserver", "envtest-assets")
	if err != nil {
		return nil, err
	}
	assets := apiserver
	if filepath.Base(apiserver) == "kube-apiserver" {
		assets = filepath.Dir(apiserver)
	}
	scheme := Scheme()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with the binaries in %s: %w", assets, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating a client for envtest: %w", err)
	}
	return &APIServer{Config: cfg, Client: c, Scheme: scheme, env: env}, nil
}

// Stop stops the control plane and removes its data.
func (s *APIServer) Stop() error {
	return s.env.Stop()
}

// Environment exposes the underlying envtest environment, for example to add a user for kubectl.
func (s *APIServer) Environment() *envtest.Environment {
	return s.env
}
