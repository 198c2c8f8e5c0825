// Package v1alpha1 holds karpenter.sh/v1alpha1, the NodeOverlay: field-for-field compatible
// with upstream Karpenter's, which changes what the solver believes an instance type costs or
// holds. Types only; it depends on k8s.io/* alone, and says nothing about how overlays are
// applied (scheduling/overlay does that).
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// SchemeGroupVersion is group version used to register these objects.
	SchemeGroupVersion = schema.GroupVersion{Group: "karpenter.sh", Version: "v1alpha1"}

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
