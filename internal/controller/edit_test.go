package controller

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// editObject applies change to the latest version of obj (found by its name, in the test's namespace
// when it has none) and updates it, again on a conflict: the controllers write the status and
// finalizers of what they reconcile concurrently, which a plain Get-then-Update races (409). obj ends
// as written.
func editObject[T client.Object](e *env, obj T, change func(T)) T {
	e.t.Helper()
	if err := tryEdit(e, obj, change); err != nil {
		e.t.Fatalf("editing %T %s: %v", obj, obj.GetName(), err)
	}
	return obj
}

// tryEdit is editObject for an edit the API server may refuse: it returns the update's last error.
func tryEdit[T client.Object](e *env, obj T, change func(T)) error {
	e.t.Helper()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(e.ns)
	}
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// Zeroed first: decoding into obj would keep a field the latest version leaves out.
		reflect.ValueOf(obj).Elem().SetZero()
		if err := e.c.Get(e.ctx, key, obj); err != nil {
			return err
		}
		change(obj)
		return e.c.Update(e.ctx, obj)
	})
}

// editSession is editObject for the AgentSession name.
func (e *env) editSession(name string, edit func(*v1alpha1.AgentSession)) *v1alpha1.AgentSession {
	e.t.Helper()
	return editObject(e, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name}}, edit)
}
