package controller

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// TestEveryJobTrustsTheStoresCAAndRunsTheProxyImage: with a CA key and a proxy image set, every Job the
// operator makes (verify, resume-plan, checkpoint, recording, fork, replay, a fork's restore
// container) has every container that talks to the store trust the CA from the namespace's job Secret
// (an optional key), and the proxy beside an agent runs the proxy image while the engine's own
// containers run the engine image; without a CA key, no Job mounts anything for it.
func TestEveryJobTrustsTheStoresCAAndRunsTheProxyImage(t *testing.T) {
	const engine, proxyImage, caKey = "engine:1", "proxy:1", "ca.crt"
	deps := func(ca string) Deps {
		return Deps{Scheme: apiServer.Scheme, Stores: &Stores{Config: StoreConfig{Endpoint: "https://store:7070", Bucket: "b",
			JobSecret: JobSecretKeys{Name: jobSecret, AccessKeyID: "accessKeyID", SecretAccessKey: "secretAccessKey", CA: ca}}},
			Jobs: JobSettings{Image: engine, ProxyImage: proxyImage}}
	}
	builds := func(d Deps) map[string]*batchv1.Job {
		s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "run", UID: "uid-0", Generation: 1},
			Spec: v1alpha1.AgentSessionSpec{SessionID: "run"}}
		s.Status.Recording.EventsHash = "abc"
		loc := d.Stores.LocationOf(s)
		out := map[string]*batchv1.Job{}
		build := func(name string, spec jobs.Spec) {
			job, err := jobs.Build(spec, d.Scheme)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = job
		}
		verify, err := (&AgentSessionReconciler{Deps: d}).verifyJob(s, loc)
		if err != nil {
			t.Fatal(err)
		}
		build("verify", verify)
		rp := &v1alpha1.ResumePlan{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "run", UID: "uid-1", Generation: 1},
			Spec: v1alpha1.ResumePlanSpec{SessionRef: v1alpha1.LocalObjectReference{Name: "run"}}}
		build("resume-plan", (&ResumePlanReconciler{Deps: d}).resumePlanJob(rp, s))
		rp.Spec.Workspace.ClaimName = "work" // a Job with a volume of its own beside the CA's
		build("resume-plan over a claim", (&ResumePlanReconciler{Deps: d}).resumePlanJob(rp, s))
		ck := &v1alpha1.Checkpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ck", UID: "uid-3", Generation: 1},
			Spec: v1alpha1.CheckpointSpec{Step: new(int64(3)), TurnIndex: new(int32(1)), TranscriptDigest: strings.Repeat("cd", 32)}}
		ck.Spec.Workspace.Volume.ClaimName = "work"
		build("checkpoint", (&CheckpointReconciler{Deps: d}).snapshotJob(ck, s))

		rec := recordingSession("rec")
		rec.Namespace, rec.UID = "ns", "uid-2"
		job, err := (&AgentSessionReconciler{Deps: d}).recordJob(rec, d.Stores.LocationOf(rec))
		if err != nil {
			t.Fatal(err)
		}
		out["recording"] = job
		runs := &ForkRunReconciler{Deps: d}
		for name, mode := range map[string]v1alpha1.ForkMode{"fork": v1alpha1.ModeFork, "replay": v1alpha1.ModeReplay} {
			fr := newFork(name, "run", 2)
			fr.Namespace, fr.UID, fr.Spec.Mode = "ns", types.UID("uid-"+name), mode
			if mode == v1alpha1.ModeReplay {
				fr.Spec.Fork = v1alpha1.ForkSpec{}
			}
			fr.Spec.Agent.Image = "agent:1"
			start := forkStart{step: 2}
			if mode == v1alpha1.ModeFork {
				start = forkStart{step: 2, checkpoint: "ck", manifest: strings.Repeat("ab", 32)} // a restore container too
			}
			job, err := runs.forkRunJob(fr, s, fr.Spec.Agent, start)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = job
		}
		return out
	}

	for name, job := range builds(deps(caKey)) {
		pod := job.Spec.Template.Spec
		var vol *corev1.Volume
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == storeCAVolume {
				vol = &pod.Volumes[i]
			}
		}
		if vol == nil || vol.Secret == nil || vol.Secret.SecretName != jobSecret || len(vol.Secret.Items) != 1 ||
			vol.Secret.Items[0].Key != caKey || vol.Secret.Optional == nil || !*vol.Secret.Optional {
			t.Errorf("%s: the store's CA volume is %+v, want the optional key %q of Secret %s", name, vol, caKey, jobSecret)
		}
		for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
			if c.Name == AgentContainer {
				if hasMount(c, storeCAVolume) || c.Image == engine || c.Image == proxyImage {
					t.Errorf("%s: the agent container (image %s) is given the store's CA or the wrong image", name, c.Image)
				}
				continue
			}
			if !hasMount(c, storeCAVolume) || envValue(c, "SSL_CERT_DIR") != storeCADir {
				t.Errorf("%s: container %s does not trust the store's CA (mounts %v, env %v)", name, c.Name, c.VolumeMounts, c.Env)
			}
			want := engine
			if c.Name == ProxyContainer {
				want = proxyImage
			}
			if c.Image != want {
				t.Errorf("%s: container %s runs %s, want %s", name, c.Name, c.Image, want)
			}
		}
	}
	for name, job := range builds(deps("")) {
		for _, v := range job.Spec.Template.Spec.Volumes {
			if v.Name == storeCAVolume {
				t.Errorf("%s: a store CA volume without a CA key", name)
			}
		}
	}
}

func hasMount(c corev1.Container, volume string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return true
		}
	}
	return false
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
