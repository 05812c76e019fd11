package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// The pod of a ForkRun Job: the agent container and the rewind proxy beside it as a native sidecar (an
// init container with restartPolicy Always). The kubelet starts the proxy first and the agent only once
// the proxy's startup probe passed; when the agent exits, the kubelet stops the proxy with SIGTERM, and
// the proxy commits the run and writes its result (results/<job-uid>.json and its termination message).
const (
	// ProxyContainer and AgentContainer name the two containers.
	ProxyContainer = jobs.SidecarContainerName
	AgentContainer = "agent"
	// ProxyPort is where the proxy serves the model APIs and its probes.
	ProxyPort = 8787
	// ProxyHealthPort serves only the proxy's probes and metrics on the pod network; the model API
	// listens on loopback, where only the agent beside it can reach it (it spends the provider key).
	ProxyHealthPort = 8788
	// AnnotationOverrides holds a fork's overrides as JSON on the pod template; the downward API hands
	// them to the proxy as a file (--overrides).
	AnnotationOverrides = "agentrewind.io/overrides"
	// LabelForkRun names the ForkRun a child AgentSession was forked by.
	LabelForkRun = "agentrewind.io/forkrun"

	overridesDir  = "/etc/agentrewind/overrides"
	overridesFile = "overrides.json"
	learnDir      = "/var/run/agentrewind/learn"
	// maxOverridesBytes keeps the overrides annotation well inside the 256 KiB all annotations share.
	maxOverridesBytes = 192 << 10
	// placeholderKey is the API key the agent's SDK sends: the proxy replaces it with the provider key
	// in Fork mode, and a replay never goes upstream at all.
	placeholderKey = "agentrewind-placeholder"
)

// The agent's environment the operator sets, over anything of the same name in spec.agent.env.
const (
	EnvAnthropicBaseURL = "ANTHROPIC_BASE_URL"
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL"
	EnvProxy            = "AGENTREWIND_PROXY"
	EnvAnthropicAPIKey  = "ANTHROPIC_API_KEY"
	EnvOpenAIAPIKey     = "OPENAI_API_KEY"
)

// specError is a spec the operator cannot run, whatever happens elsewhere: the ForkRun stalls with
// InvalidSpec and a message naming the field.
type specError struct{ msg string }

func (e *specError) Error() string { return e.msg }

// forkTask is the engine task a ForkRun runs: a replay or a fork.
func forkTask(fr *v1alpha1.ForkRun) task.Name {
	if fr.Spec.Mode == v1alpha1.ModeFork {
		return task.Fork
	}
	return task.Replay
}

// forkJobInputs are what names a ForkRun's one Job: the ForkRun itself (its UID, so a ForkRun deleted
// and created again under the same name runs again) and its generation, which the CRD keeps at 1.
func forkJobInputs(fr *v1alpha1.ForkRun) []string {
	return []string{string(fr.UID), strconv.FormatInt(fr.Generation, 10)}
}

// forkJobName is the name of the ForkRun's Job, known before the Job is built.
func forkJobName(fr *v1alpha1.ForkRun) string {
	return jobs.Name(fr.Name, string(forkTask(fr)), forkJobInputs(fr)...)
}

// childSessionName names both the child AgentSession of a fork and the session id the proxy records
// the child into: deterministic per ForkRun, valid as an object name and as a store id, unique to this
// ForkRun's UID.
func childSessionName(fr *v1alpha1.ForkRun) string {
	return jobs.Name(fr.Name, "child", string(fr.UID))
}

// agentOf is the agent a ForkRun runs: its own spec.agent, else its session's.
func agentOf(fr *v1alpha1.ForkRun, s *v1alpha1.AgentSession) (v1alpha1.AgentSpec, error) {
	switch {
	case fr.Spec.Agent.Image != "":
		return fr.Spec.Agent, nil
	case s.Spec.Agent.Image != "":
		return s.Spec.Agent, nil
	}
	return v1alpha1.AgentSpec{}, &specError{fmt.Sprintf("no agent to run: set spec.agent.image on the ForkRun or on AgentSession %s", s.Name)}
}

// proxyArgs are the proxy's flags for a ForkRun, after `engine replay` or `engine fork` (the proxy in
// that mode, named like the other engine tasks).
func (r *ForkRunReconciler) proxyArgs(fr *v1alpha1.ForkRun, s *v1alpha1.AgentSession, loc Location, start forkStart) ([]string, error) {
	args := []string{"--listen", fmt.Sprintf("127.0.0.1:%d", ProxyPort), "--health-listen", fmt.Sprintf(":%d", ProxyHealthPort)}
	args = append(args, r.Stores.jobArgs(loc, s.Spec.SessionID)...)
	args = append(args, "--job-uid", "$("+jobs.EnvJobUID+")")
	switch fr.Spec.Mode {
	case v1alpha1.ModeReplay:
		p, err := apimap.ReplayDriftPolicy(fr.Spec.Replay.DriftPolicy)
		if err != nil {
			return nil, &specError{fmt.Sprintf("spec.replay.driftPolicy: %v", err)}
		}
		args = append(args, "--drift-policy", strings.ToLower(string(p)))
	case v1alpha1.ModeFork:
		f := fr.Spec.Fork
		p, err := apimap.DriftPolicy(f.DriftPolicy)
		if err != nil {
			return nil, &specError{fmt.Sprintf("spec.fork.driftPolicy: %v", err)}
		}
		if p == replay.Passthrough {
			return nil, &specError{"spec.fork.driftPolicy Passthrough is not supported by the rewind proxy yet: use Strict or Warn"}
		}
		onMiss, err := apimap.ToolOnMiss(f.Tools.OnMiss)
		if err != nil {
			return nil, &specError{fmt.Sprintf("spec.fork.tools.onMiss: %v", err)}
		}
		args = append(args, r.Jobs.Upstreams.proxyArgs()...)
		args = append(args, "--drift-policy", strings.ToLower(string(p)), "--at-step", strconv.FormatInt(start.step, 10),
			"--child-session-id", childSessionName(fr), "--on-miss", string(onMiss))
		if hasOverrides(f.Overrides) {
			args = append(args, "--overrides", overridesDir+"/"+overridesFile)
		}
		if g := fr.Spec.Goal; g.Tool != "" {
			args = append(args, "--goal-tool", g.Tool)
			if g.ArgsMatch != nil && len(g.ArgsMatch.Raw) > 0 {
				args = append(args, "--goal-args", string(g.ArgsMatch.Raw))
			}
		}
	default:
		return nil, &specError{fmt.Sprintf("spec.mode %q: use Fork or Replay", fr.Spec.Mode)}
	}
	return args, nil
}

func hasOverrides(o v1alpha1.ForkOverrides) bool {
	return o.System != "" || o.Model != "" || o.Params != nil || len(o.RequestPatches) > 0
}

// forkRunJob builds the ForkRun's Job on the shared engine Job (name, owner, labels, backoffLimit 0,
// TTL, deadline, restricted security, JOB_UID, store credentials): its engine container becomes the
// proxy sidecar, and the agent container is added beside it. A fork goes live at start.step; when
// start names a snapshot, an init container restores it into the agent's workspace before the proxy
// starts (the agent's claim, or an emptyDir at /workspace when the agent has none).
func (r *ForkRunReconciler) forkRunJob(fr *v1alpha1.ForkRun, s *v1alpha1.AgentSession, agent v1alpha1.AgentSpec, start forkStart) (*batchv1.Job, error) {
	if msgs := validation.IsValidLabelValue(fr.Name); len(msgs) > 0 {
		return nil, &specError{fmt.Sprintf("metadata.name %q cannot label the Job's pods (%s): name the ForkRun in at most 63 characters", fr.Name, strings.Join(msgs, "; "))}
	}
	loc := r.Stores.LocationOf(s)
	args, err := r.proxyArgs(fr, s, loc, start)
	if err != nil {
		return nil, err
	}
	spec := r.Jobs.spec()
	spec.Owner = fr
	spec.Purpose = string(forkTask(fr))
	spec.Inputs = forkJobInputs(fr)
	spec.Args = args
	spec.Env = r.Stores.jobEnv(loc)
	if fr.Spec.Mode == v1alpha1.ModeFork {
		// The provider keys reach the proxy only; a replay gets none, as it never goes upstream.
		k := fr.Spec.Fork.ProviderKeys
		if k.Anthropic.Name != "" {
			spec.Env = append(spec.Env, jobs.SecretEnv(EnvAnthropicAPIKey, k.Anthropic.Name, k.Anthropic.Key, false))
		}
		if k.OpenAI.Name != "" {
			spec.Env = append(spec.Env, jobs.SecretEnv(EnvOpenAIAPIKey, k.OpenAI.Name, k.OpenAI.Key, false))
		}
	}
	job, err := jobs.Build(spec, r.Scheme)
	if err != nil {
		return nil, err
	}
	pod := &job.Spec.Template.Spec

	proxy := pod.Containers[0]
	proxy.Name = ProxyContainer
	proxy.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	proxy.Ports = []corev1.ContainerPort{{Name: "health", ContainerPort: ProxyHealthPort, Protocol: corev1.ProtocolTCP}}
	ready := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(ProxyHealthPort)}}
	// The startup probe holds the agent back until the proxy pulled the session and serves; pulling a
	// large session may take a while, hence up to five minutes.
	proxy.StartupProbe = &corev1.Probe{ProbeHandler: ready, PeriodSeconds: 1, FailureThreshold: 300, TimeoutSeconds: 2}
	proxy.ReadinessProbe = &corev1.Probe{ProbeHandler: ready, PeriodSeconds: 5, TimeoutSeconds: 2}

	if fr.Spec.Mode == v1alpha1.ModeFork && hasOverrides(fr.Spec.Fork.Overrides) {
		data, err := json.Marshal(fr.Spec.Fork.Overrides)
		if err != nil {
			return nil, err
		}
		if len(data) > maxOverridesBytes {
			return nil, &specError{fmt.Sprintf("spec.fork.overrides are %d bytes as JSON; at most %d fit a pod annotation", len(data), maxOverridesBytes)}
		}
		if job.Spec.Template.Annotations == nil {
			job.Spec.Template.Annotations = map[string]string{}
		}
		job.Spec.Template.Annotations[AnnotationOverrides] = string(data)
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "overrides", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: overridesFile, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationOverrides + "']"}}}}}})
		proxy.VolumeMounts = append(proxy.VolumeMounts, corev1.VolumeMount{Name: "overrides", MountPath: overridesDir, ReadOnly: true})
	}

	agentEnv := agentEnv(agent.Env)
	// Every Secret key the agent sees, the proxy learns as a secret to redact from the recording.
	for i, sv := range learnedSecrets(agentEnv) {
		name := fmt.Sprintf("learn-%d", i)
		dir := fmt.Sprintf("%s/%d", learnDir, i)
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: sv.name, Items: sv.items, Optional: new(sv.optional)}}})
		proxy.VolumeMounts = append(proxy.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
		proxy.Args = append(proxy.Args, "--learn-secrets-from", dir)
	}

	agentTmp := corev1.Volume{Name: "agent-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	pod.Volumes = append(pod.Volumes, agentTmp)
	a := corev1.Container{
		Name:                     AgentContainer,
		Image:                    agent.Image,
		Command:                  agent.Command,
		Args:                     agent.Args,
		Env:                      agentEnv,
		VolumeMounts:             []corev1.VolumeMount{{Name: agentTmp.Name, MountPath: jobs.TmpDir}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          proxy.SecurityContext.DeepCopy(),
	}
	w := agent.Workspace
	switch {
	case w.ClaimName != "":
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: w.ClaimName}}})
	case start.manifest != "":
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	ws := corev1.VolumeMount{Name: workspaceVolume, MountPath: workspaceMount, SubPath: w.SubPath}
	if w.ClaimName != "" || start.manifest != "" {
		a.VolumeMounts = append(a.VolumeMounts, ws)
	}
	pod.InitContainers = []corev1.Container{proxy}
	if start.manifest != "" {
		restore := r.restoreContainer(s, loc, start, w.ClaimName != "", proxy.SecurityContext)
		restore.VolumeMounts = append(restore.VolumeMounts, ws)
		// Before the proxy: init containers run in order, so the proxy, and the agent after its startup
		// probe, start only once every file is back.
		pod.InitContainers = []corev1.Container{restore, proxy}
	}
	pod.Containers = []corev1.Container{a}
	return job, nil
}

// agentEnv is the agent's environment: spec.agent.env, then the SDKs' base URLs pointing at the proxy
// and placeholder API keys, which replace any of the same name (a provider key in spec.agent.env
// never reaches the agent: the proxy holds the keys).
func agentEnv(user []corev1.EnvVar) []corev1.EnvVar {
	base := fmt.Sprintf("http://127.0.0.1:%d", ProxyPort)
	ours := []corev1.EnvVar{
		{Name: EnvAnthropicBaseURL, Value: base},
		{Name: EnvOpenAIBaseURL, Value: base + "/v1"},
		{Name: EnvProxy, Value: base},
		{Name: EnvAnthropicAPIKey, Value: placeholderKey},
		{Name: EnvOpenAIAPIKey, Value: placeholderKey},
		{Name: jobs.EnvTmpDir, Value: jobs.TmpDir},
		{Name: "HOME", Value: jobs.TmpDir},
	}
	set := map[string]bool{}
	for _, v := range ours {
		set[v.Name] = true
	}
	var out []corev1.EnvVar
	for _, v := range user {
		if !set[v.Name] {
			out = append(out, *v.DeepCopy())
		}
	}
	return append(out, ours...)
}

// learnedSecret is one Secret the agent reads keys of, as a volume of those keys for the proxy.
type learnedSecret struct {
	name     string
	items    []corev1.KeyToPath
	optional bool // every reference to it is optional, so a missing Secret must not hold the pod back
}

// learnedSecrets groups the agent's Secret key references by Secret, in a stable order.
func learnedSecrets(env []corev1.EnvVar) []learnedSecret {
	bySecret := map[string]*learnedSecret{}
	var names []string
	for _, v := range env {
		if v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := v.ValueFrom.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		ls, ok := bySecret[ref.Name]
		if !ok {
			ls = &learnedSecret{name: ref.Name, optional: true}
			bySecret[ref.Name] = ls
			names = append(names, ref.Name)
		}
		ls.optional = ls.optional && optional
		if !containsKey(ls.items, ref.Key) {
			ls.items = append(ls.items, corev1.KeyToPath{Key: ref.Key})
		}
	}
	sort.Strings(names)
	out := make([]learnedSecret, 0, len(names))
	for _, n := range names {
		ls := bySecret[n]
		sort.Slice(ls.items, func(i, j int) bool { return ls.items[i].Key < ls.items[j].Key })
		for i := range ls.items {
			// Numbered files: a key such as ".token" would be a dot file, which the proxy skips.
			ls.items[i].Path = fmt.Sprintf("key-%d", i)
		}
		out = append(out, *ls)
	}
	return out
}

func containsKey(items []corev1.KeyToPath, key string) bool {
	for _, it := range items {
		if it.Key == key {
			return true
		}
	}
	return false
}

// isSpecError reports whether err is a spec the operator cannot run.
func isSpecError(err error) bool {
	var se *specError
	return errors.As(err, &se)
}
