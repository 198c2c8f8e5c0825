// Package nodeclass keeps the status of node classes: a KWOKNodeClass's catalog (whether it
// loads, how many instance types it offers), and what an EC2NodeClass selects in EC2 (through
// an EC2Resolver the AWS provider implements). It writes status, and on an EC2NodeClass its
// finalizer; never spec, labels or annotations, and it does not import a provider.
package nodeclass

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// KWOK reconciles KWOKNodeClass status.
type KWOK struct {
	client client.Client
	cloud  cloudprovider.CloudProvider
}

// NewKWOK builds the controller.
func NewKWOK(c client.Client, cloud cloudprovider.CloudProvider) *KWOK {
	return &KWOK{client: c, cloud: cloud}
}

// Register watches KWOKNodeClasses.
func (k *KWOK) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclass.kwok").WithOptions(ratelimit.Options(1)).For(&kwokv1alpha1.KWOKNodeClass{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), k))
}

// Reconcile loads the catalog through the provider and reports it.
func (k *KWOK) Reconcile(ctx context.Context, nc *kwokv1alpha1.KWOKNodeClass) (reconcile.Result, error) {
	before := nc.DeepCopy()
	np := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: kwokv1alpha1.SchemeGroupVersion.Group, Kind: "KWOKNodeClass", Name: nc.Name}}}}}
	types, err := k.cloud.GetInstanceTypes(ctx, np)
	cond := metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: nc.Generation}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "CatalogNotLoaded", err.Error()
		nc.Status.InstanceTypes = 0
	} else {
		nc.Status.InstanceTypes = int32(len(types))
	}
	meta.SetStatusCondition(&nc.Status.Conditions, cond)
	nc.Status.ObservedGeneration = nc.Generation
	if equality.Semantic.DeepEqual(before.Status, nc.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(k.client.Status().Patch(ctx, nc, client.MergeFrom(before)))
}
