package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// requestsFor maps a watched object to the objects of list in namespace whose field index holds value
// (every one of them when field is ""), one request each. A mapping has no error to return: a list
// that fails is logged, naming what was listed, and maps to nothing.
func requestsFor(ctx context.Context, c client.Reader, list client.ObjectList, namespace, field, value, what string) []reconcile.Request {
	opts := []client.ListOption{client.InNamespace(namespace)}
	if field != "" {
		opts = append(opts, client.MatchingFields{field: value})
	}
	if err := c.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing "+what+" failed", "namespace", namespace, "name", value)
		return nil
	}
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if m, err := meta.Accessor(o); err == nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
		}
		return nil
	})
	return reqs
}
