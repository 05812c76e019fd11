package kubecreds

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
)

// CredentialsFromKeyRefs reads store credentials from the Secret keys an API object names, in
// namespace: the access key ID and secret access key are required, the session token is optional.
// Errors name the Secret and the key, never a value.
func CredentialsFromKeyRefs(ctx context.Context, c client.Reader, namespace string, refs v1alpha1.S3Credentials) (blobstore.Credentials, error) {
	id, err := secretValue(ctx, c, namespace, refs.AccessKeyID, true)
	if err != nil {
		return blobstore.Credentials{}, err
	}
	secret, err := secretValue(ctx, c, namespace, refs.SecretAccessKey, true)
	if err != nil {
		return blobstore.Credentials{}, err
	}
	token, err := secretValue(ctx, c, namespace, refs.SessionToken, false)
	if err != nil {
		return blobstore.Credentials{}, err
	}
	return blobstore.Credentials{AccessKeyID: id, SecretAccessKey: blobstore.Secret(secret), SessionToken: blobstore.Secret(token)}, nil
}

func secretValue(ctx context.Context, c client.Reader, namespace string, ref v1alpha1.SecretKeyReference, required bool) (string, error) {
	if ref.Name == "" {
		if required {
			return "", fmt.Errorf("no Secret key reference given for a required credential")
		}
		return "", nil
	}
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	var s corev1.Secret
	if err := c.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("credentials Secret %s not found", key)
		}
		return "", fmt.Errorf("reading credentials Secret %s: %w", key, err)
	}
	v, ok := s.Data[ref.Key]
	if !ok || len(v) == 0 {
		return "", fmt.Errorf("credentials Secret %s has no %q", key, ref.Key)
	}
	return string(v), nil
}
