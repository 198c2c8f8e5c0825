package policy

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// NamespaceGate labels the namespaces whose CapacityBudget can hold pods back
// (policyv1.NamespaceGateLabel), so that the CapacityBudget gate's webhook, which selects
// namespaces by that label, sees their new pods and no others; it takes the label off when
// no such budget is left (docs/architecture.md, "CapacityBudget gate"). Like every
// controller, it runs on the leader only.
type NamespaceGate struct {
	client client.Client
}

// NewNamespaceGate returns the namespace gate controller.
func NewNamespaceGate(c client.Client) *NamespaceGate { return &NamespaceGate{client: c} }

// Register watches CapacityBudgets, and Namespaces whose gate label changed by another hand.
func (g *NamespaceGate) Register(mgr ctrl.Manager) error {
	byNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
	})
	labelChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetLabels()[policyv1.NamespaceGateLabel] != e.ObjectNew.GetLabels()[policyv1.NamespaceGateLabel]
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("policy.capacitybudget.gate").WithOptions(ratelimit.Options(1)).
		For(&corev1.Namespace{}, builder.WithPredicates(labelChanged)).
		Watches(&policyv1.CapacityBudget{}, byNamespace).Complete(g)
}

// Reconcile labels or unlabels one namespace.
func (g *NamespaceGate) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := g.client.Get(ctx, req.NamespacedName, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	var list policyv1.CapacityBudgetList
	if err := g.client.List(ctx, &list, client.InNamespace(ns.Name)); err != nil {
		return reconcile.Result{}, err
	}
	want := false
	for i := range list.Items {
		want = want || list.Items[i].HoldsPods()
	}
	_, has := ns.Labels[policyv1.NamespaceGateLabel]
	if want == has && (!want || ns.Labels[policyv1.NamespaceGateLabel] == policyv1.NamespaceGateLabelValue) {
		return reconcile.Result{}, nil
	}
	// A merge patch of the one label: ArgoCD and kubectl apply own the rest of the namespace.
	value := any(nil)
	if want {
		value = policyv1.NamespaceGateLabelValue
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{policyv1.NamespaceGateLabel: value}}})
	if err := g.client.Patch(ctx, ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("CapacityBudget gate", "namespace", ns.Name, "gated", want)
	return reconcile.Result{}, nil
}
