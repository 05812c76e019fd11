package kubecreds

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCredentialsFromSecret(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		secret("full", map[string]string{"accessKeyID": "AK", "secretAccessKey": "very-secret-value", "sessionToken": "TOK"}),
		secret("no-token", map[string]string{"accessKeyID": "AK", "secretAccessKey": "very-secret-value"}),
		secret("no-secret", map[string]string{"accessKeyID": "AK"}),
	).Build()
	ctx := context.Background()
	for _, tc := range []struct {
		name, want string
		token      string
	}{
		{name: "full", token: "TOK"},
		{name: "no-token"},
		{name: "no-secret", want: `has no "secretAccessKey"`},
		{name: "missing", want: "not found: create it"},
	} {
		creds, err := CredentialsFromSecret(ctx, c, client.ObjectKey{Namespace: "ns", Name: tc.name})
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ns/"+tc.name) {
				t.Errorf("Secret %s: %v, want an error naming it and saying %q", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil || creds.AccessKeyID != "AK" || creds.SecretAccessKey.Reveal() != "very-secret-value" || creds.SessionToken.Reveal() != tc.token {
			t.Errorf("Secret %s: %v, %v", tc.name, creds, err)
		}
		if strings.Contains(fmt.Sprint(creds), "very-secret-value") {
			t.Errorf("credentials from a Secret print their secret: %v", creds)
		}
	}
}
