package controller

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/apimap"
	"github.com/agentrewind/agentrewind/internal/controller/conditions"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/engine/task"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
)

// workspaceMount is where a ResumePlan's workspace volume is mounted in its Job.
const workspaceMount = "/workspace"

// resumePlanJob is the Job that judges the session's current log against the plan's evidence.
func (r *ResumePlanReconciler) resumePlanJob(rp *v1alpha1.ResumePlan, s *v1alpha1.AgentSession) jobs.Spec {
	loc := r.Stores.LocationOf(s)
	spec := r.Jobs.spec()
	spec.Owner = rp
	spec.Purpose = string(task.ResumePlan)
	rules := r.RulesVersion
	if rules == 0 {
		rules = resume.RulesVersion
	}
	spec.Inputs = []string{strconv.FormatInt(rp.Generation, 10), s.Spec.SessionID, s.Status.Recording.EventsHash, loc.String(),
		"rules/" + strconv.Itoa(rules)}
	spec.Args = r.Stores.jobArgs(loc, s.Spec.SessionID)
	if end, ok := apimap.RunEnd(s.Status.AgentEnd); ok {
		// What the kubelet saw of the agent: the proxy beside it could not.
		spec.Args = append(spec.Args, "--agent-end", end.String())
		spec.Inputs = append(spec.Inputs, "end/"+end.String())
	}
	r.Stores.jobStore(&spec, loc)
	switch {
	case rp.Spec.Git.URL != "":
		g := rp.Spec.Git
		spec.Args = append(spec.Args, "--git-url", g.URL)
		if g.Ref != "" {
			spec.Args = append(spec.Args, "--git-ref", g.Ref)
		}
		if g.Auth.Username != "" {
			spec.Env = append(spec.Env, corev1.EnvVar{Name: task.EnvGitUsername, Value: g.Auth.Username})
		}
		if p := g.Auth.PasswordSecretRef; p.Name != "" {
			spec.Env = append(spec.Env, jobs.SecretEnv(task.EnvGitPassword, p.Name, p.Key, false))
		}
		if k := g.Auth.SSHPrivateKeySecretRef; k.Name != "" {
			spec.Env = append(spec.Env, jobs.SecretEnv(task.EnvGitSSHPrivateKey, k.Name, k.Key, false),
				corev1.EnvVar{Name: task.EnvGitSSHKnownHosts, Value: g.Auth.SSHKnownHosts})
		}
	case rp.Spec.Workspace.ClaimName != "":
		w := rp.Spec.Workspace
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: w.ClaimName, ReadOnly: true}}})
		spec.Mounts = append(spec.Mounts, corev1.VolumeMount{Name: "workspace", MountPath: workspaceMount, SubPath: w.SubPath, ReadOnly: true})
		spec.Args = append(spec.Args, "--git-dir", workspaceMount)
	}
	return spec
}

// judge runs the resume-plan Job for the current evidence and, once it finished, writes the verdicts.
func (r *ResumePlanReconciler) judge(ctx context.Context, rp *v1alpha1.ResumePlan, s *v1alpha1.AgentSession) (ctrl.Result, error) {
	desired, err := jobs.Build(r.resumePlanJob(rp, s), r.Scheme)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conditions.RunSettled(rp.Status.Conditions, rp.Status.LastRun, rp.Generation, desired.Name) {
		return ctrl.Result{}, nil
	}
	step, err := r.ensureJob(ctx, rp, desired)
	if err != nil {
		return ctrl.Result{}, err
	}
	if step.state == jobs.Running {
		return r.markRunning(ctx, &rp.Status.Conditions, rp.Generation, step,
			fmt.Sprintf("resume-plan Job %s is running over events %.12s", step.job.Name, s.Status.Recording.EventsHash))
	}
	store, err := r.Stores.Open(ctx, r.Stores.LocationOf(s))
	if err == nil {
		var rep jobs.Report
		if rep, err = jobs.Read(ctx, r.APIReader, store, step.job, task.ResumePlan); err == nil {
			return r.applyPlan(ctx, rp, step, rep)
		}
	}
	conditions.MarkReconciling(&rp.Status.Conditions, rp.Generation, v1alpha1.ReasonStorageUnavailable,
		fmt.Sprintf("the result of resume-plan Job %s cannot be read yet: %v", step.job.Name, err))
	return ctrl.Result{}, err
}
