// Package v1beta1 holds autoscaling.x-k8s.io/v1beta1, the CapacityBuffer: field-for-field
// compatible with the one upstream Karpenter and the Cluster Autoscaler serve, which keeps
// headroom as virtual pending pods. Types and the names both sides share only; it depends on
// k8s.io/* alone, and says nothing about how a buffer is resolved or placed
// (scheduling/buffer and controllers/capacitybuffer do that).
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// SchemeGroupVersion is group version used to register these objects.
	SchemeGroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1beta1"}

	// GroupVersion is an alias for SchemeGroupVersion.
	GroupVersion = SchemeGroupVersion

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(scheme *runtime.Scheme) error {
		metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
		return nil
	})

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
