package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// TestKubectlInspectReadsTheTimelineFromTheSessionsStore pushes a recording into a real S3 server
// where the operator keeps it (the operator's store under the namespace's prefix, or a tenant's own
// bucket) and inspects the AgentSession that names it: the timeline is the one agentrewind inspect
// prints of the directory, -o yaml parses back, and a store without the session, or no --store for a
// session in the operator's store, is an error that says so.
func TestKubectlInspectReadsTheTimelineFromTheSessionsStore(t *testing.T) {
	storeServer(t)
	c, kubeconfig := apiServerWithKubeconfig(t, "inspector")
	ns := newNamespace(t, c)
	dir := fixtureSession(t)
	if _, _, err := runStoreCommand(t, newPushCommand, dir, "--store", "s3://ops-bucket/agentrewind/"+ns, "--create-bucket"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStoreCommand(t, newPushCommand, dir, "--store", "s3://tenant-bucket/team-a", "--create-bucket"); err != nil {
		t.Fatal(err)
	}
	verifiedSession(t, c, ns, "triage", 3, v1alpha1.AgentSessionSpec{SessionID: "fixture"})
	creds := v1alpha1.S3Credentials{AccessKeyID: v1alpha1.SecretKeyReference{Name: "tenant-s3", Key: "id"},
		SecretAccessKey: v1alpha1.SecretKeyReference{Name: "tenant-s3", Key: "secret"}}
	verifiedSession(t, c, ns, "tenant", 3, v1alpha1.AgentSessionSpec{SessionID: "fixture",
		Storage: v1alpha1.StorageSpec{Bucket: "tenant-bucket", Prefix: "team-a", Credentials: creds}})
	verifiedSession(t, c, ns, "elsewhere", 3, v1alpha1.AgentSessionSpec{SessionID: "not-pushed"})
	args := func(a ...string) []string {
		return append([]string{"inspect", "--kubeconfig", kubeconfig, "-n", ns}, a...)
	}

	local, err := runCLI(t, "inspect", dir)
	if err != nil {
		t.Fatal(err)
	}
	r := runPlugin(t, args("triage", "--store", "s3://ops-bucket/agentrewind")...)
	if r.code != 0 || r.stdout != local {
		t.Errorf("inspect of AgentSession triage: exit %d; want the local timeline\n%s\ngot\n%s%s", r.code, local, r.stdout, r.stderr)
	}
	t.Setenv(envStore, "s3://ops-bucket/agentrewind")
	r = runPlugin(t, args("triage", "-o", "yaml")...)
	var doc struct {
		AgentSession string        `json:"agentSession"`
		Store        string        `json:"store"`
		Meta         session.Meta  `json:"meta"`
		Events       []timelineRow `json:"events"`
	}
	if err := yaml.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
		t.Fatalf("inspect -o yaml: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if doc.AgentSession != "triage" || doc.Store != "s3://ops-bucket/agentrewind/"+ns || doc.Meta.ID != "fixture" || len(doc.Events) != 6 ||
		doc.Events[2].What != "search" || len(doc.Events[1].Fingerprint) != 64 {
		t.Errorf("inspect -o yaml: %+v", doc)
	}

	t.Setenv(envStore, "")
	if r = runPlugin(t, args("tenant", "-o", "json")...); r.code != 0 || !strings.Contains(r.stdout, `"store": "s3://tenant-bucket/team-a"`) {
		t.Errorf("inspect of a session in its own bucket needs no --store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no store", args("triage"), "AgentSession triage lives in the operator's store: pass --store s3://<bucket>/<prefix>"},
		{"not in the store", args("elsewhere", "--store", "s3://ops-bucket/agentrewind"),
			"AgentSession elsewhere records it in s3://ops-bucket/agentrewind/" + ns + ", but it is not there"},
		{"no session", args("nope", "--store", "s3://ops-bucket/agentrewind"), "AgentSession nope not found in namespace " + ns},
		{"bad output", args("triage", "-o", "wide"), `--output "wide" is not supported: use text, json or yaml`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runPlugin(t, tc.args...)
			if r.code != exitError || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", r.code, exitError, tc.want, r.stderr)
			}
		})
	}
}

// TestInspectPrintsYAML checks that agentrewind inspect of a directory prints the same document as
// yaml as it does as json.
func TestInspectPrintsYAML(t *testing.T) {
	dir := fixtureSession(t)
	out, err := runCLI(t, "inspect", dir, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Meta   session.Meta  `json:"meta"`
		Events []timelineRow `json:"events"`
	}
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("inspect -o yaml: %v\n%s", err, out)
	}
	if doc.Meta.ID != "fixture" || len(doc.Events) != 6 || doc.Events[3].What != "fake-1" || doc.Events[3].InputTokens != 30 {
		t.Errorf("inspect -o yaml: %+v", doc)
	}
}
