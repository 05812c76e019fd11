package kubecreds

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/internal/blobstore"
)

// Keys of a credentials Secret.
const (
	SecretKeyAccessKeyID     = "accessKeyID"
	SecretKeySecretAccessKey = "secretAccessKey"
	SecretKeySessionToken    = "sessionToken"
)

// CredentialsFromSecret reads store credentials from the Kubernetes Secret at key: accessKeyID and
// secretAccessKey are required, sessionToken is optional. Errors name the Secret and the key, never
// a value.
func CredentialsFromSecret(ctx context.Context, c client.Reader, key client.ObjectKey) (blobstore.Credentials, error) {
	var s corev1.Secret
	if err := c.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return blobstore.Credentials{}, fmt.Errorf("credentials Secret %s not found: create it with keys %s and %s", key, SecretKeyAccessKeyID, SecretKeySecretAccessKey)
		}
		return blobstore.Credentials{}, fmt.Errorf("reading credentials Secret %s: %w", key, err)
	}
	value := func(name string) string { return string(s.Data[name]) }
	for _, name := range []string{SecretKeyAccessKeyID, SecretKeySecretAccessKey} {
		if value(name) == "" {
			return blobstore.Credentials{}, fmt.Errorf("credentials Secret %s has no %q: add it (the access key ID and secret access key are both required)", key, name)
		}
	}
	return blobstore.Credentials{AccessKeyID: value(SecretKeyAccessKeyID), SecretAccessKey: blobstore.Secret(value(SecretKeySecretAccessKey)),
		SessionToken: blobstore.Secret(value(SecretKeySessionToken))}, nil
}
