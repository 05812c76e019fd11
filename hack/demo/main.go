package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
)

// What the demo deploys, as the chart (release agentrewind) and the add-ons name it.
const (
	systemNamespace = "agentrewind-system"
	demoNamespace   = "agentrewind-demo"
	managerName     = "agentrewind-manager"
	storeService    = "agentrewind-store"
	storeBucket     = "agentrewind"
	// The store's root credentials: the manager's (agentrewind-manager-store) and, in the demo
	// namespace, its engine Jobs' (hack/demo/manifests/01-namespace.yaml).
	storeAccessKey = "demo-access-key"
	storeSecretKey = "demo-secret-key"
	fakeModelURL   = "http://fake-llm." + systemNamespace + ".svc:8080"
	triageScript   = "examples/proxy-agent/testdata/triage.yaml"
)

type options struct {
	image, agentImage, storeImage string
	kubeconfig, kubectl, cli      string
	helm                          string
}

func main() {
	var o options
	flag.StringVar(&o.image, "image", "", "the agentrewind image, already in the cluster's containerd")
	flag.StringVar(&o.agentImage, "agent-image", "", "the proxy-agent example's image, already in the cluster's containerd")
	flag.StringVar(&o.storeImage, "store-image", "", "the versitygw image, already in the cluster's containerd")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "bin/cluster/admin.kubeconfig", "the cluster's admin kubeconfig")
	flag.StringVar(&o.kubectl, "kubectl", "", "the kubectl to drive the cluster with")
	flag.StringVar(&o.cli, "agentrewind", "bin/agentrewind", "the agentrewind binary, for `agentrewind suite status`")
	flag.StringVar(&o.helm, "helm", "", "the helm that installs the operator's chart")
	flag.Parse()
	if o.image == "" || o.agentImage == "" || o.storeImage == "" || o.kubectl == "" || o.helm == "" {
		fmt.Fprintln(os.Stderr, "demo: -image, -agent-image, -store-image, -kubectl and -helm are required: run it with 'make demo'")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	k := kubectl{bin: o.kubectl, kubeconfig: o.kubeconfig}

	step("Installing the operator with its Helm chart (charts/agentrewind), with an S3 server and a fake model beside it (hack/cluster/addons)")
	if err := deployOperator(ctx, k, o); err != nil {
		return err
	}
	if err := createBucket(ctx, k); err != nil {
		return err
	}

	step("A namespace for the demo (restricted Pod Security) and the issue tracker the agent's tools call")
	// A demo run before this one left its namespace: delete it first (the operator's finalizers delete
	// its sessions from the store), so that this run records afresh.
	if err := k.show(ctx, "delete", "namespace", demoNamespace, "--ignore-not-found", "--wait", "--timeout", "180s"); err != nil {
		return err
	}
	if err := k.applyFile(ctx, "hack/demo/manifests/01-namespace.yaml", o); err != nil {
		return err
	}
	if err := k.applyFile(ctx, "hack/demo/manifests/02-tracker.yaml", o); err != nil {
		return err
	}
	if err := k.show(ctx, "rollout", "status", "-n", demoNamespace, "deployment/tracker", "--timeout", "120s"); err != nil {
		return k.diagnose(ctx, err, demoNamespace)
	}

	step("An AgentSession that asks to be recorded: the operator runs the triage agent beside the rewind proxy")
	if err := k.applyFile(ctx, "hack/demo/manifests/03-session.yaml", o); err != nil {
		return err
	}
	if err := k.show(ctx, "wait", "-n", demoNamespace, "--for=condition=Ready", "agentsession/triage-42", "--timeout", "300s"); err != nil {
		return k.diagnose(ctx, err, demoNamespace)
	}
	for _, cond := range []string{"--for=create", "--for=condition=Ready"} {
		if err := k.show(ctx, "wait", "-n", demoNamespace, cond, "resumeplan/triage-42", "--timeout", "180s"); err != nil {
			return k.diagnose(ctx, err, demoNamespace)
		}
	}
	if err := k.show(ctx, "get", "-n", demoNamespace, "agentsessions,resumeplans"); err != nil {
		return err
	}
	// The agent finished both steps it declared, and the recorder saw the tools do them (the tracker's
	// search_issues over MCP, add_label): nothing is left to resume, and the run may be collected.
	if err := showVerdict(ctx, k, "triage-42", "Complete"); err != nil {
		return err
	}

	step("The recorded timeline, read from the store: the agent's MCP session with the tracker (tracker/initialize, tracker/tools/call) beside its model and tool calls")
	if err := showTimeline(ctx, k, o, "triage-42", mcpSearch); err != nil {
		return err
	}

	step("The agent labelled a crash in owned code \"bug\": fork it at that decision with a one-line prompt fix, and replay it as a regression test")
	if err := k.applyFile(ctx, "hack/demo/manifests/04-forkruns.yaml", o); err != nil {
		return err
	}
	for _, fr := range []string{"triage-42-prompt-fix", "triage-42-replay"} {
		if err := k.show(ctx, "wait", "-n", demoNamespace, "--for=condition=Ready", "forkrun/"+fr, "--timeout", "300s"); err != nil {
			return k.diagnose(ctx, err, demoNamespace)
		}
	}
	if err := k.show(ctx, "get", "-n", demoNamespace, "forkruns", "-o", "wide"); err != nil {
		return err
	}
	// The fork's live calls are the model's (its tail); every tool and MCP call was answered from the
	// recording or stubbed. The replay made no live call at all.
	if err := k.show(ctx, "get", "-n", demoNamespace, "forkrun/triage-42-prompt-fix", "-o",
		`jsonpath=outcome={.status.outcome} childSession={.status.childSessionRef.name} liveTokens={.status.usage.live.totalTokens} liveCalls={.status.provenance.live} replayedCalls={.status.provenance.recorded} stubbedCalls={.status.provenance.stub}{"\n"}`); err != nil {
		return err
	}
	if err := k.show(ctx, "get", "-n", demoNamespace, "forkrun/triage-42-replay", "-o",
		`jsonpath=outcome={.status.outcome} liveCalls={.status.provenance.live} replayedCalls={.status.provenance.recorded}{"\n"}`); err != nil {
		return err
	}
	child, err := k.output(ctx, "get", "-n", demoNamespace, "forkrun/triage-42-prompt-fix", "-o", "jsonpath={.status.childSessionRef.name}")
	if err != nil {
		return err
	}
	// The fork's child is a session of its own: verified, then judged in a ResumePlan made once it is.
	for _, args := range [][]string{
		{"--for=condition=Ready", "agentsession/" + child},
		{"--for=create", "resumeplan/" + child},
		{"--for=condition=Ready", "resumeplan/" + child},
	} {
		if err := k.show(ctx, append(append([]string{"wait", "-n", demoNamespace}, args...), "--timeout", "180s")...); err != nil {
			return k.diagnose(ctx, err, demoNamespace)
		}
	}

	// The fork's child is judged like any session.
	if err := showVerdict(ctx, k, child, ""); err != nil {
		return err
	}

	step("The replay suite \"nightly\", as CI would check it")
	if err := runShown(ctx, o.cli, "suite", "status", "nightly", "-n", demoNamespace, "--kubeconfig", o.kubeconfig); err != nil {
		return err
	}

	step("Everything agentrewind in the demo namespace (kubectl get agentrewind)")
	if err := k.show(ctx, "get", "agentrewind", "-n", demoNamespace); err != nil {
		return err
	}

	step("What the garbage collector would delete, and when: COMPLETE and UNRESUMABLE runs once their grace (the chart's gc.grace, 7 days) is over; RESUMABLE and DIVERGED runs never")
	if err := runShown(ctx, o.cli, "gc", "report", "--sessions", "-n", demoNamespace, "--kubeconfig", o.kubeconfig); err != nil {
		return err
	}

	step("The cluster stays up. Explore it, then stop it with 'make cluster-down':")
	fmt.Printf("  export KUBECONFIG=%s\n  %s get agentrewind -n %s\n  %s describe forkrun triage-42-prompt-fix -n %s\n",
		o.kubeconfig, o.kubectl, demoNamespace, o.kubectl, demoNamespace)
	return nil
}

// deployOperator installs the add-ons (the in-cluster S3 server and the scripted fake model), then the
// operator the way the README's quickstart does: the Helm chart, with the demo's image (loaded into the
// node, never pulled), the in-cluster store and every live model call sent to the fake model. It
// prints the helm command, and waits for every rollout.
func deployOperator(ctx context.Context, k kubectl, o options) error {
	if err := k.applyText(ctx, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels:
    pod-security.kubernetes.io/enforce: restricted
---
apiVersion: v1
kind: Secret
metadata:
  name: agentrewind-manager-store
  namespace: %[1]s
stringData:
  accessKeyID: %[2]s
  secretAccessKey: %[3]s
`, systemNamespace, storeAccessKey, storeSecretKey)); err != nil {
		return err
	}
	dir, err := writeAddons(o)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := k.show(ctx, "apply", "--server-side", "--force-conflicts", "-k", dir); err != nil {
		return err
	}
	// A cluster that ran config/default (make e2e with E2E_INSTALL=kustomize, or an older demo) holds a
	// manager Deployment whose selector, immutable, the chart's differs from: it goes, and the release
	// takes over the rest of that installation (--take-ownership).
	if out, err := k.output(ctx, "get", "deployment", managerName, "-n", systemNamespace, "--ignore-not-found",
		"-o", "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}"); err == nil && out != "" && out != "Helm" {
		if err := k.show(ctx, "delete", "deployment", managerName, "-n", systemNamespace, "--wait"); err != nil {
			return err
		}
	}
	args := helmArgs(o)
	fmt.Printf("$ helm %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, o.helm, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		return k.diagnose(ctx, fmt.Errorf("helm upgrade --install agentrewind charts/agentrewind: %w", err), systemNamespace)
	}
	for _, d := range []string{managerName, storeService, "fake-llm"} {
		if err := k.show(ctx, "rollout", "status", "-n", systemNamespace, "deployment/"+d, "--timeout", "180s"); err != nil {
			return k.diagnose(ctx, err, systemNamespace)
		}
	}
	return nil
}

// upstreamProviders are the providers whose upstream the chart sets (values.yaml upstreams): every
// one is the fake model, so that no live call of a fork, whatever API its session speaks, leaves the
// cluster.
var upstreamProviders = []string{"anthropic", "openai"}

// helmArgs install the chart as the demo runs it: the demo's image (never pulled), the in-cluster
// store, and the fake model as every provider's upstream.
func helmArgs(o options) []string {
	img, tag := splitImage(o.image)
	args := []string{"upgrade", "--install", "agentrewind", "charts/agentrewind", "--namespace", systemNamespace,
		"--set", "image.repository=" + img, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never",
		"--set", "store.endpoint=http://" + storeService + "." + systemNamespace + ".svc:7070", "--set", "store.bucket=" + storeBucket}
	for _, p := range upstreamProviders {
		args = append(args, "--set", "upstreams."+p+"="+fakeModelURL)
	}
	return append(args,
		// The manager reads its store credentials at start: a cluster that ran with others rolls it over.
		"--set-string", "manager.podAnnotations.agentrewind\\.io/store-credentials="+credentialsDigest(),
		"--take-ownership", "--wait", "--timeout", "4m")
}

// writeAddons writes the kustomization of the add-ons under bin/ (kustomize wants them below its root):
// the store with the demo's image, the fake model with its script as a ConfigMap.
func writeAddons(o options) (string, error) {
	if err := os.MkdirAll("bin", 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("bin", "demo-addons-")
	if err != nil {
		return "", err
	}
	for _, f := range []struct{ from, to string }{
		{"hack/cluster/addons/store.yaml", "store.yaml"},
		{"hack/cluster/addons/fake-llm.yaml", "fake-llm.yaml"},
		{triageScript, "script.yaml"},
	} {
		data, err := os.ReadFile(f.from)
		if err != nil {
			return dir, err
		}
		if err := os.WriteFile(filepath.Join(dir, f.to), data, 0o644); err != nil {
			return dir, err
		}
	}
	img, tag := splitImage(o.image)
	storeImg, storeTag := splitImage(o.storeImage)
	k := fmt.Sprintf(`resources:
  - store.yaml
  - fake-llm.yaml
configMapGenerator:
  - name: fake-llm-script
    namespace: %[1]s
    files: [script.yaml]
    options:
      disableNameSuffixHash: true
images:
  - name: agentrewind
    newName: %[2]s
    newTag: %[3]s
  - name: agentrewind.local/versitygw
    newName: %[4]s
    newTag: %[5]s
patches:
  # The store reads the credentials at start: a cluster that ran with others (make e2e) rolls it over.
  - target: {kind: Deployment, name: agentrewind-store}
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: any}
      spec: {template: {metadata: {annotations: {agentrewind.io/store-credentials: "%[6]s"}}}}
`, systemNamespace, img, tag, storeImg, storeTag, credentialsDigest())
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// credentialsDigest names the demo's store credentials without showing them.
func credentialsDigest() string {
	sum := sha256.Sum256([]byte(storeAccessKey + "\x00" + storeSecretKey))
	return hex.EncodeToString(sum[:8])
}

// createBucket creates the store's bucket through the store's ClusterIP, which this machine (the node)
// reaches through kube-proxy, as an administrator would before the first session is stored.
func createBucket(ctx context.Context, k kubectl) error {
	ip, err := k.output(ctx, "get", "service", "-n", systemNamespace, storeService, "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		return err
	}
	cfg := blobstore.Config{Endpoint: "http://" + ip + ":7070", Bucket: storeBucket, CreateBucket: true,
		Credentials: blobstore.Credentials{AccessKeyID: storeAccessKey, SecretAccessKey: storeSecretKey}}
	deadline := time.Now().Add(time.Minute)
	for {
		octx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := blobstore.Open(octx, cfg)
		cancel()
		if err == nil {
			fmt.Printf("bucket %s ready on the in-cluster store (%s)\n", storeBucket, cfg.Endpoint)
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("creating bucket %s on %s: %w", storeBucket, cfg.Endpoint, err)
		}
		time.Sleep(time.Second)
	}
}

// mcpSearch is the agent's search on the tracker's MCP server as the timeline names it.
const mcpSearch = "tracker/tools/call"

// showTimeline prints AgentSession session's timeline as `agentrewind rewind inspect` reads it from
// the in-cluster store, through the store's ClusterIP as createBucket reaches it, and fails unless the
// timeline holds want.
func showTimeline(ctx context.Context, k kubectl, o options, session, want string) error {
	ip, err := k.output(ctx, "get", "service", "-n", systemNamespace, storeService, "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		return err
	}
	args := []string{"rewind", "inspect", session, "-n", demoNamespace, "--kubeconfig", o.kubeconfig,
		"--store", "s3://" + storeBucket, "--endpoint", "http://" + ip + ":7070"}
	fmt.Printf("$ agentrewind %s\n", strings.Join(args, " "))
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, o.cli, args...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+storeAccessKey, "AWS_SECRET_ACCESS_KEY="+storeSecretKey)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	fmt.Print(out.String())
	if err != nil {
		return fmt.Errorf("agentrewind rewind inspect %s: %w", session, err)
	}
	if !strings.Contains(out.String(), want) {
		return fmt.Errorf("the timeline of %s holds no %s: the agent did not call the tracker's MCP server", session, want)
	}
	return nil
}

// showVerdict prints ResumePlan name's verdict, residual and reachability, and fails unless the verdict
// is want ("" takes any).
func showVerdict(ctx context.Context, k kubectl, name, want string) error {
	if err := k.show(ctx, "get", "-n", demoNamespace, "resumeplan/"+name, "-o",
		`jsonpath=verdict={.status.verdict} ({.status.reason}) residualSteps={.status.residualSteps} reachability={.status.reachability.state} ({.status.reachability.reason}){"\n"}`); err != nil {
		return err
	}
	got, err := k.output(ctx, "get", "-n", demoNamespace, "resumeplan/"+name, "-o", "jsonpath={.status.verdict}")
	if err != nil {
		return err
	}
	if want != "" && got != want {
		msg, _ := k.output(ctx, "get", "-n", demoNamespace, "resumeplan/"+name, "-o", "jsonpath={.status.message}")
		return fmt.Errorf("ResumePlan %s says %s, want %s: %s", name, got, want, msg)
	}
	return nil
}

// splitImage splits NAME[:TAG] (NAME may hold a host:port) into name and tag ("latest" when absent).
func splitImage(ref string) (name, tag string) {
	slash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > slash {
		return ref[:colon], ref[colon+1:]
	}
	return ref, "latest"
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }

// kubectl runs the cluster's kubectl, showing each command as a user would type it.
type kubectl struct{ bin, kubeconfig string }

func (k kubectl) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
}

// show runs kubectl with its output on the terminal.
func (k kubectl) show(ctx context.Context, args ...string) error {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	cmd := k.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	return cmd.Run()
}

func (k kubectl) output(ctx context.Context, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := k.command(ctx, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// applyFile applies a manifest of hack/demo with the demo's agent image in place of AGENT_IMAGE.
func (k kubectl) applyFile(ctx context.Context, file string, o options) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	fmt.Printf("$ kubectl apply -f %s\n", file)
	return k.apply(ctx, strings.ReplaceAll(string(data), "AGENT_IMAGE", o.agentImage))
}

func (k kubectl) applyText(ctx context.Context, manifest string) error {
	fmt.Println("$ kubectl apply -f - <<EOF ... EOF")
	return k.apply(ctx, manifest)
}

func (k kubectl) apply(ctx context.Context, manifest string) error {
	cmd := k.command(ctx, "apply", "--server-side", "--force-conflicts", "--field-manager", "agentrewind-demo", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	return cmd.Run()
}

// diagnose adds what the namespace shows to a failed wait: its objects, recent events and Jobs' logs.
func (k kubectl) diagnose(ctx context.Context, cause error, namespace string) error {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "agentrewind,jobs,pods", "-n", namespace, "-o", "wide"},
		{"get", "events", "-n", namespace, "--sort-by", ".lastTimestamp"},
		{"logs", "-n", systemNamespace, "deployment/" + managerName, "--tail", "30"},
	} {
		out, _ := k.command(ctx, args...).CombinedOutput()
		fmt.Fprintf(&b, "\n$ kubectl %s\n%s", strings.Join(args, " "), out)
	}
	return errors.Join(cause, errors.New(b.String()))
}

// runShown runs a command with its output on the terminal.
func runShown(ctx context.Context, bin string, args ...string) error {
	fmt.Printf("$ agentrewind %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	return cmd.Run()
}
