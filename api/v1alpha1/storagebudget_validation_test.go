package v1alpha1_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentrewind/agentrewind/api/v1alpha1"
)

// TestStorageBudgetLimitsAreNonNegativeQuantitiesAndOneIsRequired: a budget without a limit, or
// with a negative one, is refused with its message; quantities and plain integers are taken.
func TestStorageBudgetLimitsAreNonNegativeQuantitiesAndOneIsRequired(t *testing.T) {
	ctx := context.Background()
	c := apiServer.Client
	for _, tc := range []struct {
		obj            client.Object
		field, message string
	}{
		{raw("StorageBudget", "no-limit", map[string]any{}), "spec", "a budget limits sessions, checkpoints or both"},
		{raw("StorageBudget", "negative-sessions", map[string]any{"sessions": "-1Gi"}), "spec.sessions", "sessions must not be negative"},
		{raw("StorageBudget", "negative-checkpoints", map[string]any{"sessions": "1Gi", "checkpoints": -5}), "spec.checkpoints", "checkpoints must not be negative"},
	} {
		t.Run(tc.obj.GetName(), func(t *testing.T) { requireInvalid(t, c.Create(ctx, tc.obj), tc.field, tc.message) })
	}
	for name, obj := range map[string]client.Object{
		"quantities": raw("StorageBudget", "quantities", map[string]any{"sessions": "50Gi", "checkpoints": "0"}),
		"integer":    raw("StorageBudget", "integer", map[string]any{"checkpoints": 1073741824}),
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	var got v1.StorageBudget
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "integer"}, &got); err != nil {
		t.Fatal(err)
	}
	if want := resource.MustParse("1Gi"); got.Spec.Checkpoints == nil || got.Spec.Checkpoints.Cmp(want) != 0 {
		t.Errorf("checkpoints limit read back as %v, want 1Gi", got.Spec.Checkpoints)
	}
}
