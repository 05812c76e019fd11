package controller

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/kubecreds"
)

// StoreConfig is the operator's default store, from the manager's flags.
type StoreConfig struct {
	// Endpoint, Region, Bucket and Prefix locate the store. A session without spec.storage lives under
	// <Prefix>/<namespace>/, so namespaces never see each other's sessions.
	Endpoint, Region, Bucket, Prefix string
	// Credentials are the manager's own, from its environment, used to read results and delete sessions.
	Credentials blobstore.Credentials
	// JobSecret names the Secret, in each session's namespace, whose keys give the engine Jobs of that
	// namespace their store credentials. It should hold credentials scoped to that namespace's prefix.
	JobSecret JobSecretKeys
}

// JobSecretKeys is a Secret name and the keys holding the credentials.
type JobSecretKeys struct {
	Name, AccessKeyID, SecretAccessKey, SessionToken string
	// CA is the key of a PEM bundle of the private CA that signed the store's certificate, trusted by
	// every engine Job and proxy beside the image's roots; empty: the image's roots only. The key is
	// optional in each namespace's Secret: a namespace without it gets the image's roots.
	CA string
}

// storeCADir is where a Job's containers find the store's CA bundle (JobSecretKeys.CA). Go reads every
// file of SSL_CERT_DIR in addition to the image's bundle (/etc/ssl/certs/ca-certificates.crt).
const storeCADir = "/var/run/agentrewind/store-ca"

// storeCAVolume is the name of the volume holding the store's CA bundle in a Job's pod.
const storeCAVolume = "store-ca"

// Location is where one session lives: the operator's store under the namespace's prefix, or a
// tenant's bucket with the tenant's credentials (spec.storage).
type Location struct {
	Bucket, Prefix string
	// Tenant is set for spec.storage; Credentials then name the tenant's Secret keys.
	Tenant      bool
	Credentials v1alpha1.S3Credentials
	namespace   string
}

// String is s3://bucket/prefix, for messages and Job inputs.
func (l Location) String() string {
	return blobstore.StoreURL{Bucket: l.Bucket, Prefix: l.Prefix}.String()
}

// Stores opens the stores sessions live in.
type Stores struct {
	Config StoreConfig
	// Secrets reads tenants' credentials Secrets (uncached, so the manager needs only get on Secrets).
	Secrets client.Reader

	mu      sync.Mutex
	objects blobstore.ObjectStore // the default store's bucket, opened once
}

// LocationOf says where a session's objects are.
func (s *Stores) LocationOf(as *v1alpha1.AgentSession) Location {
	if st := as.Spec.Storage; st.Bucket != "" {
		return Location{Bucket: st.Bucket, Prefix: st.Prefix, Tenant: true, Credentials: st.Credentials, namespace: as.Namespace}
	}
	return Location{Bucket: s.Config.Bucket, Prefix: path.Join(s.Config.Prefix, as.Namespace), namespace: as.Namespace}
}

// Store is one location's objects.
type Store struct {
	objects  blobstore.ObjectStore
	sessions *blobstore.SessionStore
}

// Open connects to a location's bucket.
func (s *Stores) Open(ctx context.Context, loc Location) (*Store, error) {
	layout, err := blobstore.NewLayout(loc.Prefix)
	if err != nil {
		return nil, err
	}
	objects, err := s.bucket(ctx, loc)
	if err != nil {
		return nil, err
	}
	return &Store{objects: objects, sessions: blobstore.NewSessionStore(objects, layout, blobstore.StoreOptions{})}, nil
}

func (s *Stores) bucket(ctx context.Context, loc Location) (blobstore.ObjectStore, error) {
	cfg := blobstore.Config{Endpoint: s.Config.Endpoint, Region: s.Config.Region, Bucket: loc.Bucket, Credentials: s.Config.Credentials}
	if loc.Tenant {
		creds, err := kubecreds.CredentialsFromKeyRefs(ctx, s.Secrets, loc.namespace, loc.Credentials)
		if err != nil {
			return nil, err
		}
		cfg.Credentials = creds
		return blobstore.Open(ctx, cfg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects == nil {
		o, err := blobstore.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		s.objects = o
	}
	return s.objects, nil
}

// GetResult reads results/<uid>.json.
func (st *Store) GetResult(ctx context.Context, uid string) ([]byte, error) {
	return st.sessions.GetResult(ctx, uid)
}

// DeleteSession removes the objects under sessions/<id>/ and nothing else: blobs are shared with other
// sessions and checkpoints, and only the blob sweep may delete them. meta.json goes first, so a
// deletion cut short leaves an uncommitted session, never one that looks whole. Deleting a session
// that is not there is not an error.
func (st *Store) DeleteSession(ctx context.Context, id string) (int, error) {
	if err := blobstore.ValidateID(id); err != nil {
		return 0, err
	}
	layout := st.sessions.Layout()
	prefix := layout.SessionsPrefix() + id + "/"
	objs, err := st.objects.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("listing the objects of session %s: %w", id, err)
	}
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	meta := layout.SessionMeta(id)
	sort.SliceStable(keys, func(i, j int) bool { return keys[i] == meta && keys[j] != meta })
	var errs []error
	for _, k := range keys {
		if err := st.objects.Delete(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s: %w", k, err))
		}
	}
	return len(keys) - len(errs), errors.Join(errs...)
}

// jobArgs are the engine flags that locate a session.
func (s *Stores) jobArgs(loc Location, sessionID string) []string {
	args := []string{"--store", loc.String(), "--session-id", sessionID}
	if s.Config.Endpoint != "" {
		args = append(args, "--endpoint", s.Config.Endpoint)
	}
	if s.Config.Region != "" {
		args = append(args, "--region", s.Config.Region)
	}
	return args
}

// jobStore gives a Job its store credentials (jobEnv) and, when the operator knows of a private CA,
// that CA from the same Secret of the Job's namespace (jobCA).
func (s *Stores) jobStore(spec *jobs.Spec, loc Location) {
	spec.Env = append(spec.Env, s.jobEnv(loc)...)
	if vol, mount, env, ok := s.jobCA(); ok {
		spec.Volumes = append(spec.Volumes, vol)
		spec.Mounts = append(spec.Mounts, mount)
		spec.Env = append(spec.Env, env)
	}
}

// jobCA is the volume, mount and environment that make a container trust the store's CA bundle: the
// key JobSecretKeys.CA of the namespace's job Secret, optional (a namespace without it keeps the
// image's roots, and its Jobs fail on the store's certificate with a message that names it).
func (s *Stores) jobCA() (corev1.Volume, corev1.VolumeMount, corev1.EnvVar, bool) {
	k := s.Config.JobSecret
	if k.CA == "" {
		return corev1.Volume{}, corev1.VolumeMount{}, corev1.EnvVar{}, false
	}
	vol := corev1.Volume{Name: storeCAVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: k.Name, Items: []corev1.KeyToPath{{Key: k.CA, Path: "ca.crt"}}, Optional: new(true)}}}
	return vol, corev1.VolumeMount{Name: storeCAVolume, MountPath: storeCADir, ReadOnly: true},
		corev1.EnvVar{Name: "SSL_CERT_DIR", Value: storeCADir}, true
}

// jobEnv gives a Job its store credentials as Secret key references, read by the kubelet when the
// pod starts: the tenant's Secret for spec.storage, else the namespace's Secret named by the flags.
func (s *Stores) jobEnv(loc Location) []corev1.EnvVar {
	if loc.Tenant {
		c := loc.Credentials
		env := []corev1.EnvVar{
			jobs.SecretEnv(blobstore.EnvAccessKeyID, c.AccessKeyID.Name, c.AccessKeyID.Key, false),
			jobs.SecretEnv(blobstore.EnvSecretAccessKey, c.SecretAccessKey.Name, c.SecretAccessKey.Key, false),
		}
		if c.SessionToken.Name != "" {
			env = append(env, jobs.SecretEnv(blobstore.EnvSessionToken, c.SessionToken.Name, c.SessionToken.Key, false))
		}
		return env
	}
	k := s.Config.JobSecret
	env := []corev1.EnvVar{
		jobs.SecretEnv(blobstore.EnvAccessKeyID, k.Name, k.AccessKeyID, false),
		jobs.SecretEnv(blobstore.EnvSecretAccessKey, k.Name, k.SecretAccessKey, false),
	}
	if k.SessionToken != "" {
		env = append(env, jobs.SecretEnv(blobstore.EnvSessionToken, k.Name, k.SessionToken, true))
	}
	return env
}
