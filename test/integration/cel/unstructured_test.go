package cel_test

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// unstructuredFrom turns a typed object into the raw form a client would send, and lets the
// test write values the Go types cannot hold.
func unstructuredFrom(obj client.Object, edit func(map[string]any)) client.Object {
	gvks, _, err := testEnv.Scheme.ObjectKinds(obj)
	if err != nil {
		panic(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvks[0])
	edit(u.Object)
	return u
}
