package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentrewind/agentrewind/api/v1alpha1"
)

const testDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default"}
}

func validSession(name string) *v1.AgentSession {
	return &v1.AgentSession{ObjectMeta: meta(name), Spec: v1.AgentSessionSpec{SessionID: name}}
}

func validCheckpoint(name string) *v1.Checkpoint {
	return &v1.Checkpoint{ObjectMeta: meta(name), Spec: v1.CheckpointSpec{
		SessionRef: v1.LocalObjectReference{Name: "s"}, Step: ptr.To[int64](11), TurnIndex: ptr.To[int32](3), TranscriptDigest: testDigest,
	}}
}

func validFork(name string) *v1.ForkRun {
	return &v1.ForkRun{ObjectMeta: meta(name), Spec: v1.ForkRunSpec{
		SessionRef: v1.LocalObjectReference{Name: "s"}, Mode: v1.ModeFork, Fork: v1.ForkSpec{AtStep: ptr.To[int64](4)},
	}}
}

func validReplay(name string) *v1.ForkRun {
	return &v1.ForkRun{ObjectMeta: meta(name), Spec: v1.ForkRunSpec{SessionRef: v1.LocalObjectReference{Name: "s"}, Mode: v1.ModeReplay}}
}

func validPlan(name string) *v1.ResumePlan {
	return &v1.ResumePlan{ObjectMeta: meta(name), Spec: v1.ResumePlanSpec{SessionRef: v1.LocalObjectReference{Name: "s"}}}
}

func tenantStorage() v1.StorageSpec {
	return v1.StorageSpec{Bucket: "team-a-sessions", Credentials: v1.S3Credentials{
		AccessKeyID:     v1.SecretKeyReference{Name: "s3", Key: "accessKeyID"},
		SecretAccessKey: v1.SecretKeyReference{Name: "s3", Key: "secretAccessKey"},
	}}
}

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// requireInvalid asserts that err is the API server's Invalid error and that it names the field and
// carries the human message the CRD declares.
func requireInvalid(t *testing.T, err error, field, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the API server accepted the object; want it rejected at %s with %q", field, message)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %T: %v", err, err)
	}
	if !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), message) {
		t.Fatalf("rejection does not name %s with %q:\n%v", field, message, err)
	}
}

func session(name string, edit func(*v1.AgentSession)) client.Object {
	s := validSession(name)
	edit(s)
	return s
}

func checkpoint(name string, edit func(*v1.Checkpoint)) client.Object {
	c := validCheckpoint(name)
	edit(c)
	return c
}

func fork(name string, edit func(*v1.ForkRun)) client.Object {
	f := validFork(name)
	edit(f)
	return f
}

func plan(name string, edit func(*v1.ResumePlan)) client.Object {
	p := validPlan(name)
	edit(p)
	return p
}

// raw is an object as YAML would send it: typed structs with omitzero cannot express an empty section.
func raw(kind, name string, spec map[string]any) client.Object {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1.GroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
}

func rawFork(name string, fork map[string]any) client.Object {
	return raw("ForkRun", name, map[string]any{"sessionRef": map[string]any{"name": "s"}, "mode": "Fork", "fork": fork})
}

func gitPlan(name, url string) client.Object {
	return plan(name, func(p *v1.ResumePlan) { p.Spec.Git = v1.GitEvidence{URL: url} })
}

func TestInvalidObjectsAreRejectedWithTheirMessage(t *testing.T) {
	longList := make([]string, 65)
	cases := []struct {
		name    string
		obj     client.Object
		field   string
		message string
	}{
		// AgentSession
		{"session without sessionID", session("no-id", func(s *v1.AgentSession) {
			s.Spec.SessionID, s.Spec.Retention = "", v1.RetentionSpec{Policy: v1.RetentionRetain}
		}),
			"spec.sessionID", "Required value"},
		{"session ID with a slash", session("slash-id", func(s *v1.AgentSession) { s.Spec.SessionID = "a/b" }),
			"spec.sessionID", "should match"},
		{"fork session without forkedAtStep", session("parent-only", func(s *v1.AgentSession) {
			s.Spec.ParentRef = v1.LocalObjectReference{Name: "p"}
		}), "spec", "parentRef and forkedAtStep are set together"},
		{"tenant bucket without credentials", &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1.GroupVersion.String(), "kind": "AgentSession", "metadata": map[string]any{"name": "no-creds", "namespace": "default"},
			"spec": map[string]any{"sessionID": "no-creds", "storage": map[string]any{"bucket": "team-a-sessions"}}}},
			"spec.storage", "a bucket of your own needs credentials of your own"},
		{"storage prefix with a leading slash", session("abs-prefix", func(s *v1.AgentSession) {
			s.Spec.Storage = tenantStorage()
			s.Spec.Storage.Prefix = "/team"
		}), "spec.storage.prefix", "prefix must not start or end with '/'"},
		{"storage prefix escaping with ..", session("dotdot-prefix", func(s *v1.AgentSession) {
			s.Spec.Storage = tenantStorage()
			s.Spec.Storage.Prefix = "team/../other"
		}), "spec.storage.prefix", "prefix must not contain an empty, '.' or '..' segment"},
		{"secret reference without its key", session("no-key", func(s *v1.AgentSession) {
			s.Spec.Storage = tenantStorage()
			s.Spec.Storage.Credentials.SecretAccessKey.Key = ""
		}), "spec.storage.credentials.secretAccessKey.key", "Required value"},
		{"agent command list over its bound", session("long-command", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", Command: longList}
		}), "spec.agent.command", "must have at most 64 items"},
		{"tool backend URL with credentials", session("tool-creds", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", Tools: []v1.ToolBackend{{Name: "search", URL: "https://bot:hunter2@tracker.example/search"}}}
		}), "spec.agent.tools[0].url", "url must not carry credentials"},
		{"tool backend URL that is not http", fork("tool-file", func(f *v1.ForkRun) {
			f.Spec.Agent = v1.AgentSpec{Image: "a:1", Tools: []v1.ToolBackend{{Name: "search", URL: "file:///etc/passwd"}}}
		}), "spec.agent.tools[0].url", "url must be an absolute http or https URL with a host"},
		{"tool name the gateway cannot route", session("tool-name", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", Tools: []v1.ToolBackend{{Name: "../admin", URL: "http://tracker/x"}}}
		}), "spec.agent.tools[0].name", "should match"},
		{"MCP server URL with credentials", session("mcp-creds", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", MCPServers: []v1.MCPServer{{Name: "tracker", URL: "https://bot:hunter2@tracker.example/mcp"}}}
		}), "spec.agent.mcpServers[0].url", "url must not carry credentials"},
		{"MCP server URL that is not http", fork("mcp-file", func(f *v1.ForkRun) {
			f.Spec.Agent = v1.AgentSpec{Image: "a:1", MCPServers: []v1.MCPServer{{Name: "tracker", URL: "file:///etc/passwd"}}}
		}), "spec.agent.mcpServers[0].url", "url must be an absolute http or https URL with a host"},
		{"MCP server name that would share its variable", session("mcp-name", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", MCPServers: []v1.MCPServer{{Name: "my_tracker", URL: "http://tracker/mcp"}}}
		}), "spec.agent.mcpServers[0].name", "should match"},
		{"MCP server named twice", session("mcp-twice", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", MCPServers: []v1.MCPServer{{Name: "tracker", URL: "http://a/mcp"}, {Name: "tracker", URL: "http://b/mcp"}}}
		}), "spec.agent.mcpServers[1]", "Duplicate value"},
		{"workspace subPath escaping the claim", session("escape-subpath", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", Workspace: v1.WorkspaceVolume{ClaimName: "w", SubPath: "../etc"}}
		}), "spec.agent.workspace.subPath", "subPath must not contain a '..' segment"},
		{"unknown retention policy", session("bad-retention", func(s *v1.AgentSession) {
			s.Spec.Retention = v1.RetentionSpec{Policy: "Forever"}
		}), "spec.retention.policy", `supported values: "Delete", "Retain"`},

		// Checkpoint
		{"digest in upper case", checkpoint("upper-digest", func(c *v1.Checkpoint) { c.Spec.TranscriptDigest = strings.ToUpper(testDigest) }),
			"spec.transcriptDigest", "exactly 64 lowercase hex characters"},
		{"digest one character short", checkpoint("short-digest", func(c *v1.Checkpoint) { c.Spec.TranscriptDigest = testDigest[1:] }),
			"spec.transcriptDigest", "should be at least 64 chars long"},
		{"negative turn index", checkpoint("neg-turn", func(c *v1.Checkpoint) { c.Spec.TurnIndex = ptr.To[int32](-1) }),
			"spec.turnIndex", "should be greater than or equal to 0"},
		{"checkpoint without the step to fork from", checkpoint("no-step", func(c *v1.Checkpoint) { c.Spec.Step = nil }),
			"spec.step", "Required value"},
		{"checkpoint without a turn index", checkpoint("no-turn", func(c *v1.Checkpoint) { c.Spec.TurnIndex = nil }),
			"spec.turnIndex", "Required value"},

		// ForkRun
		{"a ForkRun without a mode", fork("no-mode", func(f *v1.ForkRun) { f.Spec.Mode = "" }),
			"spec.mode", "Required value"},
		{"unknown mode", fork("bad-mode", func(f *v1.ForkRun) { f.Spec.Mode = "Rewind" }),
			"spec.mode", `supported values: "Fork", "Replay"`},
		{"fork mode without fork", fork("fork-no-fork", func(f *v1.ForkRun) { f.Spec.Fork = v1.ForkSpec{} }),
			"spec", "spec.fork is required when mode is Fork, and only then"},
		{"replay with a fork section", fork("replay-with-fork", func(f *v1.ForkRun) { f.Spec.Mode = v1.ModeReplay }),
			"spec", "spec.fork is required when mode is Fork, and only then"},
		{"fork with a replay section", fork("fork-with-replay", func(f *v1.ForkRun) { f.Spec.Replay = v1.ReplaySpec{DriftPolicy: v1.ReplayDriftWarn} }),
			"spec", "spec.replay is allowed only when mode is Replay"},
		{"fork without atStep", rawFork("no-step", map[string]any{"driftPolicy": "Warn"}), "spec.fork", "set exactly one of fork.atStep"},
		{"fork with neither atStep nor checkpointRef", fork("neither-start", func(f *v1.ForkRun) {
			f.Spec.Fork = v1.ForkSpec{DriftPolicy: v1.DriftWarn}
		}), "spec.fork", "set exactly one of fork.atStep (fork the conversation at a step) and fork.checkpointRef"},
		{"fork with both atStep and checkpointRef", fork("both-starts", func(f *v1.ForkRun) {
			f.Spec.Fork.CheckpointRef = v1.LocalObjectReference{Name: "s-step-4"}
		}), "spec.fork", "set exactly one of fork.atStep (fork the conversation at a step) and fork.checkpointRef"},
		{"checkpointRef without a name", rawFork("nameless-checkpoint", map[string]any{"checkpointRef": map[string]any{}}),
			"spec.fork.checkpointRef.name", "Required value"},
		{"negative atStep", fork("neg-step", func(f *v1.ForkRun) { f.Spec.Fork.AtStep = ptr.To[int64](-1) }),
			"spec.fork.atStep", "should be greater than or equal to 0"},
		{"replay with passthrough drift", fork("replay-passthrough", func(f *v1.ForkRun) {
			f.Spec.Mode, f.Spec.Fork = v1.ModeReplay, v1.ForkSpec{}
			f.Spec.Replay = v1.ReplaySpec{DriftPolicy: "Passthrough"}
		}), "spec.replay.driftPolicy", `supported values: "Strict", "Warn"`},
		{"live tools before a sandbox exists", fork("fork-live-tools", func(f *v1.ForkRun) {
			f.Spec.Fork.Tools = v1.ToolPolicy{OnMatch: "Live"}
		}), "spec.fork.tools.onMatch", `supported values: "ServeRecorded"`},
		{"empty overrides", rawFork("empty-overrides", map[string]any{"atStep": int64(1), "overrides": map[string]any{}}),
			"spec.fork.overrides", "should have at least 1 properties"},
		{"patch path that is not a JSON Pointer", fork("bad-pointer", func(f *v1.ForkRun) {
			f.Spec.Fork.Overrides = v1.ForkOverrides{RequestPatches: []v1.JSONPatchOperation{{Op: "replace", Path: "model", Value: rawJSON(`"m"`)}}}
		}), "spec.fork.overrides.requestPatches[0].path", "path must be a JSON Pointer"},
		{"unknown patch op", fork("bad-op", func(f *v1.ForkRun) {
			f.Spec.Fork.Overrides = v1.ForkOverrides{RequestPatches: []v1.JSONPatchOperation{{Op: "move", Path: "/model"}}}
		}), "spec.fork.overrides.requestPatches[0].op", "supported values"},
		{"system prompt over its bound", fork("huge-system", func(f *v1.ForkRun) {
			f.Spec.Fork.Overrides = v1.ForkOverrides{System: strings.Repeat("x", 65537)}
		}), "spec.fork.overrides.system", "may not be more than 65536 bytes"},
		{"provider keys naming no key", rawFork("empty-keys", map[string]any{"atStep": int64(1), "providerKeys": map[string]any{}}),
			"spec.fork.providerKeys", "should have at least 1 properties"},
		{"a provider key without the Secret's key", rawFork("keyless-key", map[string]any{"atStep": int64(1),
			"providerKeys": map[string]any{"anthropic": map[string]any{"name": "keys"}}}), "spec.fork.providerKeys.anthropic.key", "Required value"},

		// ResumePlan
		{"two sources of evidence", plan("two-evidence", func(p *v1.ResumePlan) {
			p.Spec.Git = v1.GitEvidence{URL: "https://example.com/r.git"}
			p.Spec.Workspace = v1.WorkspaceVolume{ClaimName: "w"}
		}), "spec", "give at most one source of workspace evidence"},
		{"git evidence without a URL", raw("ResumePlan", "no-url", map[string]any{"sessionRef": map[string]any{"name": "s"},
			"git": map[string]any{"ref": "main"}}), "spec.git.url", "Required value"},
		{"plain http to the metadata service", gitPlan("http-metadata", "http://169.254.169.254/latest/meta-data"),
			"spec.git.url", "url must be an https://, ssh:// or git:// URL with a host"},
		{"a local file", gitPlan("file-url", "file:///var/run/secrets/kubernetes.io/serviceaccount/token"),
			"spec.git.url", "url must be an https://, ssh:// or git:// URL with a host"},
		{"https to a link-local address", gitPlan("https-link-local", "https://169.254.169.254/repo.git"),
			"spec.git.url", "url must not point at a loopback, link-local, unspecified or metadata address"},
		{"git to loopback", gitPlan("git-loopback", "git://127.0.0.1/repo.git"),
			"spec.git.url", "url must not point at a loopback, link-local, unspecified or metadata address"},
		{"https to localhost with a user", gitPlan("localhost-user", "https://me@localhost:8443/repo.git"),
			"spec.git.url", "url must not name localhost or a metadata host"},
		{"ssh to IPv6 loopback", gitPlan("ipv6-loopback", "ssh://[::1]/repo.git"),
			"spec.git.url", "an IPv6 host must be a global unicast address"},
		{"a password sent over ssh", plan("password-ssh", func(p *v1.ResumePlan) {
			p.Spec.Git = v1.GitEvidence{URL: "ssh://git.example.com/r.git", Auth: v1.GitAuth{PasswordSecretRef: v1.SecretKeyReference{Name: "g", Key: "token"}}}
		}), "spec.git", "a password or token is only sent over https"},
		{"an SSH key without known hosts", plan("key-no-hosts", func(p *v1.ResumePlan) {
			p.Spec.Git = v1.GitEvidence{URL: "ssh://git.example.com/r.git", Auth: v1.GitAuth{SSHPrivateKeySecretRef: v1.SecretKeyReference{Name: "g", Key: "id"}}}
		}), "spec.git.auth", "an SSH key goes with sshKnownHosts"},
		{"a password and an SSH key", plan("two-auth", func(p *v1.ResumePlan) {
			p.Spec.Git = v1.GitEvidence{URL: "https://git.example.com/r.git", Auth: v1.GitAuth{
				PasswordSecretRef: v1.SecretKeyReference{Name: "g", Key: "token"}, SSHPrivateKeySecretRef: v1.SecretKeyReference{Name: "g", Key: "id"}}}
		}), "spec.git.auth", "give a password or an SSH key, not both"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireInvalid(t, apiServer.Client.Create(ctx, tc.obj), tc.field, tc.message)
		})
	}
}

// TestValidObjectsAreAccepted guards the rules above against refusing what they should let through.
func TestValidObjectsAreAccepted(t *testing.T) {
	ctx := context.Background()
	for _, obj := range []client.Object{
		gitPlan("ok-https", "https://git.example.com/team/repo.git"),
		gitPlan("ok-ssh", "ssh://git@git.example.com:2222/team/repo.git"),
		gitPlan("ok-git", "git://git.example.com/repo.git"),
		gitPlan("ok-private-host", "https://10.0.0.12/team/repo.git"),
		plan("ok-token", func(p *v1.ResumePlan) {
			p.Spec.Git = v1.GitEvidence{URL: "https://git.example.com/r.git", Auth: v1.GitAuth{Username: "bot", PasswordSecretRef: v1.SecretKeyReference{Name: "g", Key: "token"}}}
		}),
		plan("ok-key", func(p *v1.ResumePlan) {
			p.Spec.Git = v1.GitEvidence{URL: "ssh://git.example.com/r.git", Auth: v1.GitAuth{SSHPrivateKeySecretRef: v1.SecretKeyReference{Name: "g", Key: "id"},
				SSHKnownHosts: "git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}}
		}),
		session("ok-tenant-store", func(s *v1.AgentSession) { s.Spec.Storage = tenantStorage() }),
		fork("ok-step-zero", func(f *v1.ForkRun) { f.Spec.Fork.AtStep = ptr.To[int64](0) }),
		fork("ok-from-checkpoint", func(f *v1.ForkRun) {
			f.Spec.Fork.AtStep, f.Spec.Fork.CheckpointRef = nil, v1.LocalObjectReference{Name: "s-step-4"}
		}),
		validReplay("ok-bare-replay"),
		session("ok-tool-backends", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", Tools: []v1.ToolBackend{{Name: "search_issues", URL: "http://tracker.demo.svc:8090/search"}, {Name: "add.label-2", URL: "https://10.0.0.9/label?x=1"}}}
		}),
		session("ok-mcp-servers", func(s *v1.AgentSession) {
			s.Spec.Agent = v1.AgentSpec{Image: "a:1", MCPServers: []v1.MCPServer{{Name: "tracker", URL: "http://tracker.demo.svc:8090/mcp"}, {Name: "gh-2", URL: "https://10.0.0.9/mcp?x=1"}}}
		}),
		checkpoint("ok-turn-zero", func(c *v1.Checkpoint) { c.Spec.Step, c.Spec.TurnIndex = ptr.To[int64](0), ptr.To[int32](0) }),
	} {
		t.Run(obj.GetName(), func(t *testing.T) {
			if err := apiServer.Client.Create(ctx, obj); err != nil {
				t.Fatalf("the API server refused a valid object: %v", err)
			}
		})
	}
}

func TestImmutableFieldsRejectUpdates(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		obj     client.Object
		mutate  func(client.Object)
		field   string
		message string
	}{
		{"sessionID", validSession("immutable-id"), func(o client.Object) {
			o.(*v1.AgentSession).Spec.SessionID = "another-recording"
		}, "spec.sessionID", "sessionID is immutable"},
		{"a parent added to a session later", validSession("late-parent"), func(o client.Object) {
			s := o.(*v1.AgentSession)
			s.Spec.ParentRef, s.Spec.ForkedAtStep = v1.LocalObjectReference{Name: "p"}, ptr.To[int64](3)
		}, "spec", "parentRef is immutable"},
		{"a fork point moved", session("moved-fork-point", func(s *v1.AgentSession) {
			s.Spec.ParentRef, s.Spec.ForkedAtStep = v1.LocalObjectReference{Name: "p"}, ptr.To[int64](3)
		}), func(o client.Object) { o.(*v1.AgentSession).Spec.ForkedAtStep = ptr.To[int64](4) }, "spec", "forkedAtStep is immutable"},
		{"storage removed", session("drop-storage", func(s *v1.AgentSession) { s.Spec.Storage = tenantStorage() }), func(o client.Object) {
			o.(*v1.AgentSession).Spec.Storage = v1.StorageSpec{}
		}, "spec", "storage is immutable"},
		{"storage added", validSession("add-storage"), func(o client.Object) {
			o.(*v1.AgentSession).Spec.Storage = tenantStorage()
		}, "spec", "storage is immutable"},
		{"checkpoint anchor", validCheckpoint("immutable-anchor"), func(o client.Object) {
			o.(*v1.Checkpoint).Spec.TurnIndex = ptr.To[int32](9)
		}, "spec", "a Checkpoint is an immutable anchor"},
		{"a ForkRun pointed at another session", validFork("immutable-fork-session"), func(o client.Object) {
			o.(*v1.ForkRun).Spec.SessionRef.Name = "another-run"
		}, "spec", "spec.sessionRef is immutable"},
		{"a Replay turned into a Fork", validReplay("immutable-mode"), func(o client.Object) {
			fr := o.(*v1.ForkRun)
			fr.Spec.Mode, fr.Spec.Replay, fr.Spec.Fork = v1.ModeFork, v1.ReplaySpec{}, v1.ForkSpec{AtStep: ptr.To[int64](2)}
		}, "spec", "spec.mode is immutable"},
		{"a ResumePlan pointed at another session", validPlan("immutable-plan"), func(o client.Object) {
			o.(*v1.ResumePlan).Spec.SessionRef.Name = "other"
		}, "spec", "sessionRef is immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := apiServer.Client.Create(ctx, tc.obj); err != nil {
				t.Fatalf("creating the valid object: %v", err)
			}
			t.Cleanup(func() { _ = apiServer.Client.Delete(ctx, tc.obj) })
			tc.mutate(tc.obj)
			requireInvalid(t, apiServer.Client.Update(ctx, tc.obj), tc.field, tc.message)
		})
	}
	// Mutable fields of the same kinds still update, so the rules do not reject everything.
	s := validSession("mutable-retention")
	if err := apiServer.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Retention = v1.RetentionSpec{Policy: v1.RetentionRetain}
	if err := apiServer.Client.Update(ctx, s); err != nil {
		t.Fatalf("updating retention of a session: %v", err)
	}
	p := validPlan("mutable-evidence")
	if err := apiServer.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Git = v1.GitEvidence{URL: "https://git.example.com/r.git"}
	if err := apiServer.Client.Update(ctx, p); err != nil {
		t.Fatalf("adding evidence to a plan: %v", err)
	}
	// A replay suite's ForkRun whose agent a GitOps commit bumped is updated in place: it runs again.
	fr := validReplay("bumped-agent")
	if err := apiServer.Client.Create(ctx, fr); err != nil {
		t.Fatal(err)
	}
	fr.Spec.Agent = v1.AgentSpec{Image: "registry.example/triage:1.1"}
	if err := apiServer.Client.Update(ctx, fr); err != nil {
		t.Fatalf("bumping the agent image of a replay: %v", err)
	}
	if fr.Generation != 2 {
		t.Errorf("generation %d after the bump, want 2", fr.Generation)
	}
}

// TestForkRunDefaults proves the defaults a user relies on when they leave the policies out: strict
// drift, recorded tools and failing misses; an empty replay section is a strict replay. The objects are
// written as YAML would send them (`tools: {}`), which typed Go structs with omitzero cannot express.
func TestForkRunDefaults(t *testing.T) {
	ctx := context.Background()
	objects := map[string]map[string]any{
		"defaults-fork": {"sessionRef": map[string]any{"name": "s"}, "mode": "Fork",
			"fork": map[string]any{"atStep": int64(3), "tools": map[string]any{}}},
		"defaults-replay": {"sessionRef": map[string]any{"name": "s"}, "mode": "Replay", "replay": map[string]any{}},
	}
	for name, spec := range objects {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1.GroupVersion.String(), "kind": "ForkRun",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
		if err := apiServer.Client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	gotFork, gotReplay := &v1.ForkRun{}, &v1.ForkRun{}
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "defaults-fork"}, gotFork); err != nil {
		t.Fatal(err)
	}
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "defaults-replay"}, gotReplay); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(v1.DriftStrict, v1.ToolServeRecorded, v1.ToolMissError, v1.ReplayDriftStrict)
	got := fmt.Sprint(gotFork.Spec.Fork.DriftPolicy, gotFork.Spec.Fork.Tools.OnMatch, gotFork.Spec.Fork.Tools.OnMiss, gotReplay.Spec.Replay.DriftPolicy)
	if got != want {
		t.Fatalf("defaults: got %s, want %s", got, want)
	}
}

// TestGitEvidenceURLsThatReachTheNodeAreRefused: every spelling of a loopback, link-local, unspecified
// or metadata address a URL parser would accept, and the tricks around them, is refused; real git
// servers, including private and global IPv6 ones, are not.
func TestGitEvidenceURLsThatReachTheNodeAreRefused(t *testing.T) {
	ctx := context.Background()
	good := []string{"https://git.example.com/a.git", "ssh://git@git.example.com:22/a.git", "git://git.example.com/a.git",
		"https://10.0.0.5/a.git", "https://[2001:db8::1]/a.git", "https://169-254-1-1.example.com/a.git", "https://8.8.8.8/a.git"}
	bad := []string{"http://169.254.169.254/", "file:///etc/passwd", "ssh://127.0.0.1/x", "https://[::1]/x", "https://[::ffff:127.0.0.1]/x",
		"https://[::FFFF:127.0.0.1]/x", "https://[0:0:0:0:0:0:0:1]/x", "https://[0::1]/x", "https://[::]/x", "https://[FE80::1]/x",
		"https://[fe80::1%25eth0]/x", "https://[fd00:ec2::254]/x", "https://2130706433/x", "https://0x7f.1/x", "https://0177.0.0.1/x",
		"https://0/x", "https://2852039166/x", "https://127.1/x", "https://LOCALHOST/x", "https://localhost./x", "https://foo.localhost/x",
		"https://metadata.google.internal/x", "https://metadata/x", "https://100.100.100.200/x", "https://good.com@169.254.169.254/x",
		"https://good.com:pw@[::1]/x", "https://\t127.0.0.1/x", "https://git.example.com/a.git\nfile:///etc/passwd",
		"https:// 169.254.169.254/", "https://", "ssh://-oProxyCommand=id/x", "ssh://git@-oProxyCommand=id/x", "HTTPS://git.example.com/a.git"}
	for i, u := range good {
		if err := apiServer.Client.Create(ctx, gitPlan(fmt.Sprintf("url-good-%d", i), u)); err != nil {
			t.Errorf("a real git server's URL %q was refused: %v", u, err)
		}
	}
	for i, u := range bad {
		err := apiServer.Client.Create(ctx, gitPlan(fmt.Sprintf("url-bad-%d", i), u))
		if err == nil {
			t.Errorf("%q was accepted as git evidence", u)
			continue
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.git.url") {
			t.Errorf("%q was refused, but not at spec.git.url: %v", u, err)
		}
	}
}

// TestStatusesThatWouldMisleadAreRefused: a status whose outcome and conditions disagree would let a
// GitOps tool read a failed run as healthy, so the API server refuses it.
func TestStatusesThatWouldMisleadAreRefused(t *testing.T) {
	ctx := context.Background()
	now := metav1.Now()
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: reason, LastTransitionTime: now, ObservedGeneration: 1}
	}
	cases := []struct {
		name    string
		status  v1.ForkRunStatus
		message string
	}{
		{"a failed run that reads Ready", v1.ForkRunStatus{Outcome: v1.OutcomeFailed, Conditions: []metav1.Condition{cond(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonSucceeded)}},
			"a ForkRun that failed, diverged or missed its goal is Stalled"},
		{"a diverged run without conditions", v1.ForkRunStatus{Outcome: v1.OutcomeDiverged, ObservedGeneration: 1},
			"a ForkRun that failed, diverged or missed its goal is Stalled"},
		{"a passed replay that is not Ready", v1.ForkRunStatus{Outcome: v1.OutcomePassed, Conditions: []metav1.Condition{cond(v1.ConditionStalled, metav1.ConditionFalse, v1.ReasonPassed)}},
			"a ForkRun that passed, completed or reached its goal is Ready"},
		{"Ready and Stalled at once", v1.ForkRunStatus{Conditions: []metav1.Condition{cond(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonSucceeded),
			cond(v1.ConditionStalled, metav1.ConditionTrue, v1.ReasonJobFailed)}}, "an object is not Ready and Stalled at once"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := validFork(fmt.Sprintf("misleading-%d", i))
			if err := apiServer.Client.Create(ctx, f); err != nil {
				t.Fatal(err)
			}
			f.Status = tc.status
			requireInvalid(t, apiServer.Client.Status().Update(ctx, f), "status", tc.message)
		})
	}
}
