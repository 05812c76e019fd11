//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubectl runs the kubectl built in bin/ against the suite's cluster and returns its combined output.
func kubectl(args ...string) (string, error) {
	return kubectlIn("", args...)
}

// kubectlIn is kubectl with stdin.
func kubectlIn(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// eventually polls check every interval until it reports done, failing the test with the last error or
// the last reason check gave when timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) (done bool, reason string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var last string
	for {
		done, reason, err := check(ctx)
		if err != nil {
			last = err.Error()
		} else {
			last = reason
		}
		if done && err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not after %s: %s", what, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// testNamespace creates a namespace for one test, enforcing the restricted Pod Security Standard, and
// deletes it when the test ends (E2E_KEEP=1 keeps it for a post-mortem).
func testNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("e2e-%s-%04x", prefix, rand.IntN(1<<16)),
		Labels: restrictedLabels(),
	}}
	if err := k8s.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if os.Getenv("E2E_KEEP") != "" {
			t.Logf("keeping namespace %s (E2E_KEEP)", ns.Name)
			return
		}
		if t.Failed() {
			out, _ := kubectl("get", "all,events", "-n", ns.Name, "-o", "wide")
			t.Logf("namespace %s at failure:\n%s", ns.Name, out)
		}
		if err := k8s.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// fromYAML decodes one object from YAML (a file's contents or a literal), for namespace ns ("" keeps it).
func fromYAML(t *testing.T, manifest, ns string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096).Decode(&u.Object); err != nil {
		t.Fatalf("decoding manifest: %v", err)
	}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

// ---------------------------------------------------------------------------------------------------
// Controller e2e tests (AgentSession verify → Ready, ForkRun → Succeeded/Diverged, Checkpoint, ResumePlan
// verdicts, manager restarts) go in files of their own beside this one. Apply a custom resource the way a
// user would and wait for what the operator reports:
//
//	ns := testNamespace(t, "forkrun")
//	fr := fromYAML(t, forkRunYAML, ns)
//	got := applyAndWaitForCondition(t, fr, "Ready", metav1.ConditionTrue, 3*time.Minute)
//	phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
//
// The manager runs with a store at http://agentrewind-store.agentrewind-system.svc:7070, bucket
// agentrewind, credentials in the Secret agentrewind-manager-store (test values, created by TestMain): deploy
// the S3 server (versitygw) under that Service name, with those credentials, before tests that need it.
// ---------------------------------------------------------------------------------------------------

// applyAndWaitForCondition server-side applies obj as the suite's field owner and waits until its
// status.conditions hold condType with the wanted status and an observedGeneration no older than the
// applied generation. It returns the object as last read. On timeout it fails the test, showing the
// object's status and the events about it.
func applyAndWaitForCondition(t *testing.T, obj *unstructured.Unstructured, condType string, want metav1.ConditionStatus, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	apply(t, obj)
	return waitForCondition(t, obj, condType, want, timeout)
}

// apply server-side applies obj as the suite's field owner and updates obj with the server's answer.
func apply(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if err := k8s.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		t.Fatalf("applying %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("reading back %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	obj.Object = got.Object
}

// waitForCondition waits until obj (kind, namespace and name are used) has condition condType with the
// wanted status, observed at obj's current generation or later.
func waitForCondition(t *testing.T, obj *unstructured.Unstructured, condType string, want metav1.ConditionStatus, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(obj.GroupVersionKind())
	generation := obj.GetGeneration()
	what := fmt.Sprintf("%s %s/%s condition %s=%s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), condType, want)
	defer func() {
		if t.Failed() {
			status, _, _ := unstructured.NestedMap(got.Object, "status")
			events, _ := kubectl("get", "events", "-n", obj.GetNamespace(), "--field-selector", "involvedObject.name="+obj.GetName())
			t.Logf("%s %s/%s status: %v\nevents:\n%s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), status, events)
		}
	}()
	eventually(t, timeout, what, func(ctx context.Context) (bool, string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			return false, "", err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != condType {
				continue
			}
			observed, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			if m["status"] == string(want) && observed >= generation {
				return true, "", nil
			}
			return false, fmt.Sprintf("%s=%v reason %v (observedGeneration %d, generation %d): %v", condType, m["status"], m["reason"], observed, generation, m["message"]), nil
		}
		return false, fmt.Sprintf("no %s condition yet", condType), nil
	})
	return got
}
