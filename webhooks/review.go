package webhooks

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/webhooks/admission"
)

// ClusterFacts answer an admission review from the cluster: namespaces through the cached
// client, usage from the shared attribution over the cluster model (unknown until it has
// synced), instance types from the cloud provider.
type ClusterFacts struct {
	Client client.Client
	// Reader, when set, reads what the cache has not seen yet (a namespace created in the same
	// sync as its budget), so that a policy's selector is decided on its labels.
	Reader client.Reader
	Cloud  cloudprovider.CloudProvider
	// Attribution is the shared cost attribution (nil: usage is never known).
	Attribution *state.Attribution
}

var _ admission.Facts = (*ClusterFacts)(nil)

// Namespace implements admission.Facts.
func (f *ClusterFacts) Namespace(ctx context.Context, name string) (policies.Namespace, bool) {
	ns := &corev1.Namespace{}
	err := f.Client.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) && f.Reader != nil {
		err = f.Reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	if err != nil {
		return policies.Namespace{Name: name}, false
	}
	return policies.Namespace{Name: name, Labels: ns.Labels}, true
}

// Namespaces implements admission.Facts.
func (f *ClusterFacts) Namespaces(ctx context.Context) ([]policies.Namespace, bool) {
	var list corev1.NamespaceList
	if err := f.Client.List(ctx, &list); err != nil {
		return nil, false
	}
	out := make([]policies.Namespace, 0, len(list.Items))
	for _, ns := range list.Items {
		out = append(out, policies.Namespace{Name: ns.Name, Labels: ns.Labels})
	}
	return out, true
}

// Usage implements admission.Facts.
func (f *ClusterFacts) Usage(ctx context.Context, namespace string) (policies.Usage, bool) {
	if f.Attribution == nil {
		return policies.Usage{}, false
	}
	all, err := f.Attribution.ByNamespace(ctx)
	if err != nil {
		return policies.Usage{}, false
	}
	return all[namespace], true
}

// InstanceTypes implements admission.Facts.
func (f *ClusterFacts) InstanceTypes(ctx context.Context, np *karpv1.NodePool) []*cloudprovider.InstanceType {
	if f.Cloud == nil {
		return nil
	}
	its, err := f.Cloud.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil
	}
	return its
}

// ClusterReview is the validating webhook's Reviewer: the shared review (webhooks/admission)
// at the admission enforcement point, worded as admission warnings and denials.
type ClusterReview struct {
	reviewer *admission.Reviewer
}

// NewClusterReview adapts a review to the webhooks.
func NewClusterReview(r *admission.Reviewer) *ClusterReview { return &ClusterReview{reviewer: r} }

// Review implements Reviewer. A review that cannot read the cluster says so in a warning and
// lets the object through: admission never fails on the policy layer's own trouble.
func (c *ClusterReview) Review(ctx context.Context, operation string, obj, old client.Object) (warnings, denials []string) {
	var v admission.Verdict
	if old == nil {
		v = c.reviewer.Review(ctx, operation, obj, nil)
	} else {
		v = c.reviewer.Review(ctx, operation, obj, old)
	}
	for _, d := range v.Denials {
		denials = append(denials, d.Text())
	}
	for _, w := range v.Warnings {
		if w.Kind == admission.Error {
			log.FromContext(ctx).Info("admission policy evaluation failed", "source", w.Source.String(), "error", w.Message)
		}
		warnings = append(warnings, w.Text())
	}
	return warnings, denials
}
