package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Labels every engine Job and its pod carry.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "agentrewind"
	LabelPurpose   = "agentrewind.io/purpose"
	LabelParent    = "agentrewind.io/parent"
	// LabelJobUID is the label the API server puts on a Job's pod template with the Job's UID (when the
	// Job does not choose its own selector). The pod reads it through the downward API, because a pod
	// cannot otherwise learn the UID of its Job, and the Job's UID names its result object.
	LabelJobUID = batchv1.ControllerUidLabel
)

// Container paths and environment of an engine Job.
const (
	ContainerName = "engine"
	// SidecarContainerName is the engine running as the rewind proxy, a native sidecar beside an agent.
	SidecarContainerName = "proxy"
	TmpDir               = "/tmp"
	EnvJobUID            = "JOB_UID"
	EnvTmpDir            = "TMPDIR"
	nonRootUID           = 65532 // the image's USER
	maxNameLength        = 63
	hashLength           = 10
)

// Spec is what differs between engine Jobs.
type Spec struct {
	// Owner is the object the Job works for; it becomes the Job's controller owner.
	Owner client.Object
	// Purpose is the engine task, such as verify; it is part of the Job's name.
	Purpose string
	// Inputs are everything the Job's outcome depends on; a change of any names a new Job.
	Inputs []string
	// Image is the engine image.
	Image string
	// Command is the engine command Args follow; unset, it is engine <Purpose>.
	Command []string
	// Args are the engine arguments, after the image's entrypoint and Command.
	Args []string
	// Env are extra variables, credentials among them as Secret key references.
	Env []corev1.EnvVar
	// Volumes and Mounts are extra volumes, such as a workspace claim.
	Volumes []corev1.Volume
	Mounts  []corev1.VolumeMount
	// TTLAfterFinished is how long a finished Job is kept, for its logs, before Kubernetes deletes it.
	TTLAfterFinished *int32
	// ActiveDeadline bounds how long the Job may run.
	ActiveDeadline *int64
}

// Name is the Job's deterministic name: <parent>-<purpose>-<hash of the inputs>, at most 63 characters
// (a Job's name becomes a label value on its pods), the parent cut to fit.
func Name(parent, purpose string, inputs ...string) string {
	h := sha256.New()
	for _, in := range append([]string{parent, purpose}, inputs...) {
		fmt.Fprintf(h, "%d:%s;", len(in), in)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:hashLength]
	room := maxNameLength - len(purpose) - len(sum) - 2
	if len(parent) > room {
		parent = strings.TrimRight(parent[:room], "-.")
	}
	return parent + "-" + purpose + "-" + sum
}

// Build returns the Job for spec, owned by spec.Owner.
func Build(spec Spec, scheme *runtime.Scheme) (*batchv1.Job, error) {
	owner := spec.Owner
	labels := map[string]string{LabelManagedBy: ManagedBy, LabelPurpose: spec.Purpose, LabelParent: owner.GetName()}
	env := append([]corev1.EnvVar{
		{Name: EnvJobUID, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + LabelJobUID + "']"}}},
		{Name: EnvTmpDir, Value: TmpDir},
	}, spec.Env...)
	volumes := append([]corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, spec.Volumes...)
	mounts := append([]corev1.VolumeMount{{Name: "tmp", MountPath: TmpDir}}, spec.Mounts...)
	command := spec.Command
	if len(command) == 0 {
		command = []string{"engine", spec.Purpose}
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(owner.GetName(), spec.Purpose, spec.Inputs...),
			Namespace: owner.GetNamespace(),
			Labels:    labels,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            new(int32(0)),
			TTLSecondsAfterFinished: spec.TTLAfterFinished,
			ActiveDeadlineSeconds:   spec.ActiveDeadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: new(false),
					EnableServiceLinks:           new(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   new(true),
						RunAsUser:      new(int64(nonRootUID)),
						RunAsGroup:     new(int64(nonRootUID)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Volumes: volumes,
					Containers: []corev1.Container{{
						Name:                     ContainerName,
						Image:                    spec.Image,
						Args:                     append(append([]string{}, command...), spec.Args...),
						Env:                      env,
						VolumeMounts:             mounts,
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot:             new(true),
							ReadOnlyRootFilesystem:   new(true),
							AllowPrivilegeEscalation: new(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
				},
			},
		},
	}
	if err := controllerutil.SetControllerReference(owner, job, scheme); err != nil {
		return nil, fmt.Errorf("owning Job %s: %w", job.Name, err)
	}
	return job, nil
}

// SecretEnv is an environment variable read from a Secret key when the pod starts, so the value never
// passes through the operator, the Job's spec, status, events or logs.
func SecretEnv(name, secret, key string, optional bool) corev1.EnvVar {
	ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
	if optional {
		ref.Optional = new(true)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}}
}
