package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		SessionRef: v1.LocalObjectReference{Name: "s"}, TurnIndex: 3, TranscriptDigest: testDigest,
	}}
}

func validFork(name string) *v1.ForkRun {
	return &v1.ForkRun{ObjectMeta: meta(name), Spec: v1.ForkRunSpec{
		SessionRef: v1.LocalObjectReference{Name: "s"}, AtStep: 4,
	}}
}

func validPlan(name string) *v1.ResumePlan {
	return &v1.ResumePlan{ObjectMeta: meta(name), Spec: v1.ResumePlanSpec{SessionRef: v1.LocalObjectReference{Name: "s"}}}
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

func TestInvalidObjectsAreRejectedWithTheirMessage(t *testing.T) {
	longList := make([]string, 65)
	cases := []struct {
		name    string
		obj     client.Object
		field   string
		message string
	}{
		// AgentSession
		{"session without sessionID", func() client.Object { s := validSession("no-id"); s.Spec.SessionID = ""; return s }(),
			"spec.sessionID", "should be at least 1 chars long"},
		{"session ID with a slash", func() client.Object { s := validSession("slash-id"); s.Spec.SessionID = "a/b"; return s }(),
			"spec.sessionID", "should match"},
		{"fork session without forkedAtStep", func() client.Object {
			s := validSession("parent-only")
			s.Spec.ParentRef = &v1.LocalObjectReference{Name: "p"}
			return s
		}(), "spec", "parentRef and forkedAtStep are set together"},
		{"storage prefix with a leading slash", func() client.Object {
			s := validSession("abs-prefix")
			s.Spec.Storage = &v1.StorageSpec{Prefix: "/team"}
			return s
		}(), "spec.storage.prefix", "prefix must not start or end with '/'"},
		{"storage prefix escaping with ..", func() client.Object {
			s := validSession("dotdot-prefix")
			s.Spec.Storage = &v1.StorageSpec{Prefix: "team/../other"}
			return s
		}(), "spec.storage.prefix", "prefix must not contain a '..' segment"},
		{"agent command list over its bound", func() client.Object {
			s := validSession("long-command")
			s.Spec.Agent = &v1.AgentSpec{Image: "a:1", Command: longList}
			return s
		}(), "spec.agent.command", "must have at most 64 items"},
		{"workspace subPath escaping the claim", func() client.Object {
			s := validSession("escape-subpath")
			s.Spec.Agent = &v1.AgentSpec{Image: "a:1", Workspace: &v1.WorkspaceVolume{ClaimName: "w", SubPath: "../etc"}}
			return s
		}(), "spec.agent.workspace.subPath", "subPath must not contain a '..' segment"},

		// Checkpoint
		{"digest in upper case", func() client.Object {
			c := validCheckpoint("upper-digest")
			c.Spec.TranscriptDigest = strings.ToUpper(testDigest)
			return c
		}(), "spec.transcriptDigest", "exactly 64 lowercase hex characters"},
		{"digest one character short", func() client.Object {
			c := validCheckpoint("short-digest")
			c.Spec.TranscriptDigest = testDigest[1:]
			return c
		}(), "spec.transcriptDigest", "exactly 64 lowercase hex characters"},
		{"negative turn index", func() client.Object { c := validCheckpoint("neg-turn"); c.Spec.TurnIndex = -1; return c }(),
			"spec.turnIndex", "should be greater than or equal to 0"},

		// ForkRun
		{"negative atStep", func() client.Object { f := validFork("neg-step"); f.Spec.AtStep = -1; return f }(),
			"spec.atStep", "atStep must be zero or greater"},
		{"replay with overrides", func() client.Object {
			f := validFork("replay-overrides")
			f.Spec.Mode = v1.ModeReplay
			f.Spec.Overrides = &v1.ForkOverrides{Model: ptr.To("claude-sonnet-4-5")}
			return f
		}(), "spec", "mode Replay replays the recording exactly and cannot take overrides"},
		{"replay with live tools", func() client.Object {
			f := validFork("replay-live-tools")
			f.Spec.Mode = v1.ModeReplay
			f.Spec.Tools = &v1.ToolPolicy{OnMatch: v1.ToolLive}
			return f
		}(), "spec", "mode Replay makes zero live calls: tools.onMatch must be ServeRecorded"},
		{"replay with passthrough drift", func() client.Object {
			f := validFork("replay-passthrough")
			f.Spec.Mode = v1.ModeReplay
			f.Spec.DriftPolicy = v1.DriftPassthrough
			return f
		}(), "spec", "driftPolicy Passthrough would send unmatched requests live"},
		{"live tools before a sandbox exists", func() client.Object {
			f := validFork("fork-live-tools")
			f.Spec.Tools = &v1.ToolPolicy{OnMatch: v1.ToolLive}
			return f
		}(), "spec.tools", "tools.onMatch: Live is not supported yet"},
		{"unknown mode", func() client.Object { f := validFork("bad-mode"); f.Spec.Mode = "Rewind"; return f }(),
			"spec.mode", `supported values: "Fork", "Replay"`},
		{"empty overrides", func() client.Object {
			f := validFork("empty-overrides")
			f.Spec.Overrides = &v1.ForkOverrides{}
			return f
		}(), "spec.overrides", "should have at least 1 properties"},
		{"patch path that is not a JSON Pointer", func() client.Object {
			f := validFork("bad-pointer")
			f.Spec.Overrides = &v1.ForkOverrides{RequestPatches: []v1.JSONPatchOperation{{Op: "replace", Path: "model", Value: rawJSON(`"m"`)}}}
			return f
		}(), "spec.overrides.requestPatches[0].path", "path must be a JSON Pointer"},
		{"system prompt over its bound", func() client.Object {
			f := validFork("huge-system")
			f.Spec.Overrides = &v1.ForkOverrides{System: ptr.To(strings.Repeat("x", 65537))}
			return f
		}(), "spec.overrides.system", "may not be more than 65536 bytes"},

		// ResumePlan
		{"two sources of evidence", func() client.Object {
			p := validPlan("two-evidence")
			p.Spec.Git = &v1.GitEvidence{URL: "https://example.com/r.git"}
			p.Spec.Workspace = &v1.WorkspaceVolume{ClaimName: "w"}
			return p
		}(), "spec", "give at most one source of workspace evidence"},
		{"git evidence without a URL", func() client.Object {
			p := validPlan("no-url")
			p.Spec.Git = &v1.GitEvidence{}
			return p
		}(), "spec.git.url", "should be at least 1 chars long"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireInvalid(t, apiServer.Client.Create(ctx, tc.obj), tc.field, tc.message)
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
		{"checkpoint anchor", validCheckpoint("immutable-anchor"), func(o client.Object) {
			o.(*v1.Checkpoint).Spec.TurnIndex = 9
		}, "spec", "a Checkpoint is an immutable anchor"},
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
	// A mutable field of the same kind still updates, so the rule is not rejecting everything.
	s := validSession("mutable-retention")
	if err := apiServer.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Retention = &v1.RetentionSpec{Pin: true}
	if err := apiServer.Client.Update(ctx, s); err != nil {
		t.Fatalf("updating retention of a session: %v", err)
	}
}

// TestForkRunDefaults proves the defaults a user relies on when they leave mode, driftPolicy and the
// tool policy out.
func TestForkRunDefaults(t *testing.T) {
	ctx := context.Background()
	f := validFork("defaults")
	f.Spec.Tools = &v1.ToolPolicy{}
	if err := apiServer.Client.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	got := &v1.ForkRun{}
	if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(f), got); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(v1.ModeFork, v1.DriftStrict, v1.ToolServeRecorded, v1.ToolMissError)
	if g := fmt.Sprint(got.Spec.Mode, got.Spec.DriftPolicy, got.Spec.Tools.OnMatch, got.Spec.Tools.OnMiss); g != want {
		t.Fatalf("defaults: got %s, want %s", g, want)
	}
}
