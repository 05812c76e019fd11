//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// The add-ons the suite runs beside the operator (hack/cluster/addons: the same manifests `make demo`
// uses), and the fake model the suite serves itself.
const (
	storeService = "agentrewind-store" // config/manager's --store-endpoint host
	storePort    = 7070
	storeBucket  = "agentrewind" // config/manager's --store-bucket
	// The manager's store credentials (TestMain's Secret) are the S3 server's root credentials; every
	// test namespace gets them as the Secret its engine Jobs read (--store-job-credentials-secret).
	storeAccessKey = "e2e-access-key"
	storeSecretKey = "e2e-secret-key"
	jobStoreSecret = "agentrewind-store"

	// fakeLLMService is the add-on fake model (a Deployment of `agentrewind fake-llm`): the recording
	// talks to it.
	fakeLLMService = "fake-llm"
	fakeLLMPort    = 8080
	// countedLLMService is the fake model the operator's proxies call live (--anthropic-upstream and
	// --openai-upstream): the same fakellm server, run in this process behind a Service without
	// selector, because the suite must count the requests that reach it and `agentrewind fake-llm`
	// serves no counter.
	countedLLMService = "fake-llm-counted"
	triageScript      = "examples/proxy-agent/testdata/triage.yaml"
)

var (
	storeEndpoint string          // http://<ClusterIP>:7070, reachable from this machine through kube-proxy
	countedLLM    *fakellm.Server // what the operator's forks reach upstream
)

// countedLLMURL is the in-cluster base URL of the counted fake model.
func countedLLMURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", countedLLMService, systemNamespace, fakeLLMPort)
}

// deployAddons runs the S3 server and the add-on fake model in agentrewind-system, serves the counted
// fake model from this process, and creates the store's bucket.
func deployAddons(ctx context.Context) error {
	script, err := os.ReadFile(filepath.Join(repoRoot, triageScript))
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fake-llm-script", Namespace: systemNamespace},
		Data: map[string]string{"script.yaml": string(script)}}
	if err := k8s.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for file, img := range map[string]string{"store.yaml": storeImage, "fake-llm.yaml": image} {
		if err := applyManifest(ctx, filepath.Join(repoRoot, "hack", "cluster", "addons", file), img); err != nil {
			return err
		}
	}
	if err := serveCountedLLM(ctx, script); err != nil {
		return err
	}
	for _, d := range []string{storeService, fakeLLMService} {
		if out, err := kubectl("rollout", "status", "-n", systemNamespace, "deployment/"+d, "--timeout", "120s"); err != nil {
			diag, _ := kubectl("get", "pods,events", "-n", systemNamespace, "-o", "wide")
			return fmt.Errorf("add-on %s did not roll out: %w\n%s\n%s", d, err, out, diag)
		}
	}

	var svc corev1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: storeService}, &svc); err != nil {
		return err
	}
	storeEndpoint = fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, storePort)
	deadline := time.Now().Add(time.Minute)
	for {
		octx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err = blobstore.Open(octx, storeConfig(""))
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return fmt.Errorf("creating bucket %s on the in-cluster store %s: %w", storeBucket, storeEndpoint, err)
	}
	return nil
}

// storeConfig is the in-cluster store as this machine reaches it, under prefix.
func storeConfig(prefix string) blobstore.Config {
	return blobstore.Config{Endpoint: storeEndpoint, Bucket: storeBucket, Prefix: prefix, CreateBucket: true,
		Credentials: blobstore.Credentials{AccessKeyID: storeAccessKey, SecretAccessKey: storeSecretKey}}
}

// applyManifest server-side applies every object of a YAML file, with the image of every container
// set to img (the add-ons' images are imported into the node, never pulled).
func applyManifest(ctx context.Context, file, img string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if containers, ok, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers"); ok {
			for _, c := range containers {
				c.(map[string]any)["image"] = img
			}
			if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				return err
			}
		}
		if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s from %s: %w", u.GetKind(), u.GetName(), file, err)
		}
	}
}

// serveCountedLLM serves the triage script from this process on the node's address (the cluster runs
// on this machine) and points the Service countedLLMService at it with an EndpointSlice.
func serveCountedLLM(ctx context.Context, script []byte) error {
	s, err := fakellm.Parse(script)
	if err != nil {
		return err
	}
	nodeIP, err := nodeAddress(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		return fmt.Errorf("serving the counted fake model on the node's address %s (the suite must run on the node): %w", nodeIP, err)
	}
	countedLLM = fakellm.New(s)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.Handle("/", countedLLM)
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}).Serve(ln) }()
	port := int32(ln.Addr().(*net.TCPAddr).Port)

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: countedLLMService, Namespace: systemNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: fakeLLMPort, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}}}}
	if err := k8s.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: countedLLMService, Namespace: systemNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: countedLLMService, discoveryv1.LabelManagedBy: fieldOwner}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{nodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	// A run before this one left a slice with its own port: replace it.
	_ = k8s.Delete(ctx, slice)
	return k8s.Create(ctx, slice)
}

// nodeAddress is the InternalIP of the cluster's (first) node.
func nodeAddress(ctx context.Context) (string, error) {
	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		return "", err
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address, nil
			}
		}
	}
	return "", errors.New("no node with an InternalIP")
}

// storeSecret is the Secret a namespace's engine Jobs read the store credentials from.
func storeSecret(ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: jobStoreSecret, Namespace: ns},
		StringData: map[string]string{"accessKeyID": storeAccessKey, "secretAccessKey": storeSecretKey}}
}

// countedSince is how many model requests the counted fake model got since it had seen before
// requests in all.
func countedSince(before int64) int64 { return countedLLM.Requests() - before }
