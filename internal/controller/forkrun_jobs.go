package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// A ForkRun's Job is an agent beside the rewind proxy in replay or fork mode (agentpod.go); a fork's
// overrides reach the proxy through the downward API.
const (
	// AnnotationOverrides holds a fork's overrides as JSON on the pod template; the downward API hands
	// them to the proxy as a file (--overrides).
	AnnotationOverrides = "agentrewind.io/overrides"
	// LabelForkRun names the ForkRun a child AgentSession was forked by.
	LabelForkRun = "agentrewind.io/forkrun"

	overridesDir  = "/etc/agentrewind/overrides"
	overridesFile = "overrides.json"
	// maxOverridesBytes keeps the overrides annotation well inside the 256 KiB all annotations share.
	maxOverridesBytes = 192 << 10
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
// the child into: deterministic per run (the ForkRun's UID and generation), valid as an object name and
// as a store id; each generation's fork is a child of its own.
func childSessionName(fr *v1alpha1.ForkRun) string {
	return jobs.Name(fr.Name, "child", forkJobInputs(fr)...)
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
	args := append(proxyListenArgs(), r.Stores.jobArgs(loc, s.Spec.SessionID)...)
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
	mcpServers, err := mcpServerArgs(agent.MCPServers, false)
	if err != nil {
		return nil, err
	}
	args = append(args, mcpServers...)
	spec := r.Jobs.proxySpec()
	spec.Owner = fr
	spec.Purpose = string(forkTask(fr))
	spec.Inputs = forkJobInputs(fr)
	spec.Args = args
	r.Stores.jobStore(&spec, loc)
	if fr.Spec.Mode == v1alpha1.ModeFork {
		// The provider keys reach the proxy only; a replay gets none, as it never goes upstream.
		spec.Env = append(spec.Env, providerKeyEnv(fr.Spec.Fork.ProviderKeys)...)
	}
	job, err := jobs.Build(spec, r.Scheme)
	if err != nil {
		return nil, err
	}
	p, err := newAgentPod(job, agent, fr.Spec.Fork.ProviderKeys, s.Spec.ProviderKeys)
	if err != nil {
		return nil, err
	}
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
		p.pod.Volumes = append(p.pod.Volumes, corev1.Volume{Name: "overrides", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: overridesFile, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationOverrides + "']"}}}}}})
		p.proxy.VolumeMounts = append(p.proxy.VolumeMounts, corev1.VolumeMount{Name: "overrides", MountPath: overridesDir, ReadOnly: true})
	}
	w := agent.Workspace
	ws := p.mountWorkspace(w, start.manifest != "")
	if start.manifest == "" {
		p.place()
		return job, nil
	}
	restore := r.restoreContainer(s, loc, start, w.ClaimName != "", p.proxy.SecurityContext)
	restore.VolumeMounts = append(restore.VolumeMounts, *ws)
	// Before the proxy: init containers run in order, so the proxy, and the agent after its startup
	// probe, start only once every file is back.
	p.place(restore)
	return job, nil
}

// isSpecError reports whether err is a spec the operator cannot run.
func isSpecError(err error) bool {
	var se *specError
	return errors.As(err, &se)
}
