//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentrewindv1alpha1 "github.com/agentrewind/agentrewind/api/v1alpha1"
)

// What config/default installs, and the chart as release agentrewind (helmRelease) in agentrewind-system.
const (
	systemNamespace = "agentrewind-system"
	managerName     = "agentrewind-manager" // Deployment, ServiceAccount and ClusterRole
	managerUser     = "system:serviceaccount:" + systemNamespace + ":" + managerName
	leaseName       = "agentrewind.agentrewind.io"
	// The manager's own store credentials (config/manager). The suite creates the Secret with test values.
	managerStoreSecret = "agentrewind-manager-store"
	fieldOwner         = "agentrewind-e2e"
	// syncNamespace is the manager's --store-sync-namespace: sessions pushed under its prefix of the
	// default store appear there as AgentSessions.
	syncNamespace = "e2e-sync"
)

// The suite's environment, set up once by TestMain.
var (
	repoRoot   string
	kubeconfig string // KUBECONFIG when set, else the single-node cluster's admin kubeconfig
	kubectlBin string
	image      string // the freshly built agentrewind image (E2E_IMAGE), already on the node
	agentImage string // the proxy-agent example's image (E2E_AGENT_IMAGE), already on the node
	storeImage string // versitygw FROM scratch (E2E_STORE_IMAGE), already on the node
	// The binaries the suite records with on this machine: agentrewind (E2E_AGENTREWIND) and the
	// proxy-agent example (E2E_AGENT), as `make docker-build` leaves them in bin/.
	agentrewindBin, agentBin string

	restConfig *rest.Config
	k8s        client.Client
	clientset  *kubernetes.Clientset
	scheme     = runtime.NewScheme()
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(agentrewindv1alpha1.AddToScheme(scheme))
	log.SetLogger(logr.Discard())
}

func TestMain(m *testing.M) {
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		logs, _ := kubectl("logs", "-n", systemNamespace, "deployment/"+managerName, "--tail", "80")
		fmt.Fprintf(os.Stderr, "e2e: the manager's last log lines:\n%s\n", logs)
	}
	if recordingDir != "" {
		_ = os.RemoveAll(recordingDir)
	}
	os.Exit(code)
}

func setUp() error {
	var err error
	if repoRoot, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "go.mod")); err != nil {
		return fmt.Errorf("run the suite from test/e2e (go test ./test/e2e/...): %w", err)
	}
	kubeconfig = os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = os.Getenv("E2E_KUBECONFIG")
	}
	if kubeconfig == "" {
		kubeconfig = filepath.Join(repoRoot, "bin", "cluster", "admin.kubeconfig")
	}
	if _, err := os.Stat(strings.Split(kubeconfig, string(os.PathListSeparator))[0]); err != nil {
		return fmt.Errorf("no kubeconfig at %s: start the single-node cluster with 'make cluster-up' or set KUBECONFIG", kubeconfig)
	}
	for _, v := range []struct {
		into *string
		env  string
	}{{&image, "E2E_IMAGE"}, {&agentImage, "E2E_AGENT_IMAGE"}, {&storeImage, "E2E_STORE_IMAGE"}} {
		if *v.into = os.Getenv(v.env); *v.into == "" {
			return fmt.Errorf("%s is not set: run 'make e2e', which builds the images and loads them into the cluster", v.env)
		}
	}
	agentrewindBin = envOr("E2E_AGENTREWIND", filepath.Join(repoRoot, "bin", "agentrewind"))
	agentBin = envOr("E2E_AGENT", filepath.Join(repoRoot, "bin", "proxy-agent-image", "proxy-agent"))
	for _, b := range []string{agentrewindBin, agentBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: run 'make e2e' (make docker-build builds it)", b)
		}
	}
	if kubectlBin, err = findKubectl(); err != nil {
		return err
	}

	restConfig, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	restConfig.QPS, restConfig.Burst = 50, 100
	if k8s, err = client.New(restConfig, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if clientset, err = kubernetes.NewForConfig(restConfig); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clientset.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("the cluster in %s does not answer: %w", kubeconfig, err)
	}
	if err := deploy(); err != nil {
		return err
	}
	return recordSession(context.Background())
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func findKubectl() (string, error) {
	if p := os.Getenv("KUBECTL"); p != "" {
		return p, nil
	}
	if m, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "k8s", "*", "kubectl")); len(m) > 0 {
		return m[len(m)-1], nil
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p, nil
	}
	return "", errors.New("no kubectl: run 'make envtest-assets' or set KUBECTL")
}

// deploy installs the operator with the freshly built image the way a user would, and waits for the
// manager's rollout: with Helm (charts/agentrewind, the default), or with E2E_INSTALL=kustomize
// config/default (kubectl apply -k). Either way the manager gets the flags of managerArgs.
func deploy() error {
	ctx := context.Background()
	start := time.Now()
	mode := envOr("E2E_INSTALL", "helm")
	if mode != "helm" && mode != "kustomize" {
		return fmt.Errorf("E2E_INSTALL=%q: want helm (charts/agentrewind) or kustomize (config/default)", mode)
	}
	// The namespace and the manager's store Secret first, so the manager's first pod can start. The
	// namespace carries the same labels as in config/manager; apply -k takes it over, Helm leaves it be.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace, Labels: restrictedLabels()}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: managerStoreSecret, Namespace: systemNamespace},
		StringData: map[string]string{"accessKeyID": "e2e-access-key", "secretAccessKey": "e2e-secret-key"},
	}
	if err := k8s.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
		if err := sameStoreCredentials(ctx, secret); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	// The store sync's namespace, with the store Secret its sessions' engine Jobs read.
	sync := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: syncNamespace, Labels: restrictedLabels()}}
	if err := k8s.Create(ctx, sync); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := k8s.Create(ctx, storeSecret(syncNamespace)); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := deployAddons(ctx); err != nil {
		return err
	}

	if mode == "helm" {
		if err := helmInstallOperator(); err != nil {
			return err
		}
	} else if err := kustomizeOperator(); err != nil {
		return err
	}
	if out, err := kubectl("rollout", "status", "-n", systemNamespace, "deployment/"+managerName, "--timeout", "180s"); err != nil {
		diag, _ := kubectl("get", "pods,replicasets,events", "-n", systemNamespace, "-o", "wide")
		logs, _ := kubectl("logs", "-n", systemNamespace, "deployment/"+managerName, "--tail", "50")
		return fmt.Errorf("the manager did not roll out: %w\n%s\n%s\n%s", err, out, diag, logs)
	}
	what := "config/default"
	if mode == "helm" {
		what = "charts/agentrewind (Helm release " + helmRelease + ")"
	}
	fmt.Fprintf(os.Stderr, "e2e: deployed %s with %s in %s\n", what, image, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// kustomizeOperator applies config/default with the image under test and managerArgs (writeOverlay).
func kustomizeOperator() error {
	if err := uninstallSuiteRelease(); err != nil {
		return err
	}
	overlay, err := writeOverlay()
	if err != nil {
		return err
	}
	defer os.RemoveAll(overlay)
	if out, err := kubectl("apply", "--server-side", "--force-conflicts", "--field-manager", fieldOwner, "-k", overlay); err != nil {
		return fmt.Errorf("kubectl apply -k config/default: %w\n%s", err, out)
	}
	return nil
}

// writeOverlay writes a kustomization over config/default that sets the image under test, in a
// temporary directory under bin/ (kustomize wants a relative path to config/default), and adds the
// manager flags the suite needs: the store sync into syncNamespace every few seconds, the counted fake
// model as every proxy's Anthropic and OpenAI upstream, a short retry after a Job failed for a passing
// reason, and a garbage collection pass every few seconds.
func writeOverlay() (string, error) {
	if err := os.MkdirAll(filepath.Join(repoRoot, "bin"), 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(filepath.Join(repoRoot, "bin"), "e2e-overlay-")
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, filepath.Join(repoRoot, "config", "default"))
	if err != nil {
		return "", err
	}
	name, tag := splitImage(image)
	// The replacement is config/default's: it runs there before this overlay's image is set, so the
	// overlay copies the image into --engine-image again.
	k := fmt.Sprintf(`resources:
  - %s
images:
  - name: agentrewind
    newName: %s
    newTag: %s
replacements:
  - source:
      kind: Deployment
      name: %s
      fieldPath: spec.template.spec.containers.[name=manager].image
    targets:
      - select:
          kind: Deployment
          name: %s
        fieldPaths:
          - spec.template.spec.containers.[name=manager].args.4
        options:
          delimiter: "="
          index: 1
patches:
  - target:
      kind: Deployment
      name: %s
    patch: |-
%s
  # As the Helm install's checkpointPolicy.namespaceSelector: the Checkpoint policy leaves the namespace
  # of the upgrade test's release (another operator) alone.
  - target:
      kind: ValidatingAdmissionPolicyBinding
      name: agentrewind-checkpoint-minter
    patch: |-
      - op: add
        path: /spec/matchResources
        value: {namespaceSelector: {matchExpressions: [{key: %q, operator: DoesNotExist}]}}
`, rel, name, tag, managerName, managerName, managerName, argPatches(managerArgs()), otherOperatorLabel)
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// managerArgs are the flags the suite adds to config/manager's.
func managerArgs() []string {
	return []string{
		"--store-sync-namespace=" + syncNamespace,
		"--store-sync-interval=3s",
		"--anthropic-upstream=" + countedLLMURL(),
		"--openai-upstream=" + countedLLMURL(),
		"--job-retry-after=5s",
		// Garbage collection passes every few seconds; deletion still waits for each session's grace.
		"--gc-interval=5s",
	}
}

// argPatches are JSON patch operations appending args to the manager container, indented for the
// overlay's patch block.
func argPatches(args []string) string {
	var b strings.Builder
	for _, a := range args {
		fmt.Fprintf(&b, "      - op: add\n        path: /spec/template/spec/containers/0/args/-\n        value: %q\n", a)
	}
	return b.String()
}

// splitImage splits NAME[:TAG] (NAME may hold a host:port) into name and tag ("latest" when absent).
func splitImage(ref string) (name, tag string) {
	slash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > slash {
		return ref[:colon], ref[colon+1:]
	}
	return ref, "latest"
}

func restrictedLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":             "agentrewind",
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
		"pod-security.kubernetes.io/audit":   "restricted",
	}
}

// sameStoreCredentials fails, saying what to do, when the cluster already holds the manager's store
// Secret with other credentials: another install (`make demo`) runs its own store and operator here,
// and the suite's would neither reach that store nor run alone beside that operator.
func sameStoreCredentials(ctx context.Context, want *corev1.Secret) error {
	var got corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(want), &got); err != nil {
		return err
	}
	for k, v := range want.StringData {
		if string(got.Data[k]) != v {
			return fmt.Errorf("secret %s/%s already holds other store credentials: another install of agentrewind (make demo?) "+
				"runs on this cluster; start the suite on a cluster of its own: make cluster-down, then make e2e", got.Namespace, got.Name)
		}
	}
	return nil
}
