// Package install registers every API group of this project, with the Kubernetes built-in
// types, into a scheme. The manager, the CLI and the test environment share it, so that no
// binary forgets a group.
package install

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// AddToScheme adds the Kubernetes built-in types, CustomResourceDefinitions, and all of this project's API versions.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		karpv1.AddToScheme, karpv1beta1.AddToScheme, karpv1alpha1.AddToScheme,
		awsv1.AddToScheme, awsv1beta1.AddToScheme,
		kwokv1alpha1.AddToScheme,
		policyv1.AddToScheme,
		autoscalingv1beta1.AddToScheme,
		// The audit's reports (docs/policies.md, "Audit").
		reportsv1alpha1.Install,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	// Hub versions first, so that they are preferred.
	return s.SetVersionPriority(karpv1.SchemeGroupVersion, karpv1beta1.SchemeGroupVersion, karpv1alpha1.SchemeGroupVersion)
}

// NewScheme returns a scheme with AddToScheme applied.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	utilruntime.Must(s.SetVersionPriority(awsv1.SchemeGroupVersion, awsv1beta1.SchemeGroupVersion))
	return s
}
