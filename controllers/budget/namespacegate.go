package budget

import (
	"context"
	"encoding/json"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// NamespaceGate labels the namespaces whose CapacityBudget, or a ClusterCapacityBudget that
// selects them, can hold pods back (policyv1.NamespaceGateLabel), so that the CapacityBudget gate's webhook, which selects
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
	// A ClusterCapacityBudget changes every namespace it selects, before and after; its
	// status, written every few seconds, changes none.
	allNamespaces := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list corev1.NamespaceList
		if err := g.client.List(ctx, &list); err != nil {
			return nil
		}
		out := make([]reconcile.Request, len(list.Items))
		for i := range list.Items {
			out[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}}
		}
		return out
	})
	// Any label change: a ClusterCapacityBudget may select the namespace by it.
	labelChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("policy.capacitybudget.gate").WithOptions(ratelimit.Options(1)).
		For(&corev1.Namespace{}, builder.WithPredicates(labelChanged)).
		Watches(&policyv1.CapacityBudget{}, byNamespace).Watches(&policyv1.ClusterCapacityBudget{}, allNamespaces, builder.WithPredicates(predicate.GenerationChangedPredicate{})).Complete(g)
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
	if !want {
		var cluster policyv1.ClusterCapacityBudgetList
		if err := g.client.List(ctx, &cluster); err != nil {
			return reconcile.Result{}, err
		}
		want = clusterBudgetHolds(cluster.Items, ns.Labels)
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

// clusterBudgetHolds reports whether a ClusterCapacityBudget that selects a namespace of
// these labels can hold pods back.
func clusterBudgetHolds(list []policyv1.ClusterCapacityBudget, nsLabels map[string]string) bool {
	for i := range list {
		c := &list[i]
		sel, err := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
		if err == nil && c.AsBudget().HoldsPods() && sel.Matches(labels.Set(nsLabels)) {
			return true
		}
	}
	return false
}
