package lifecycle

// Initialization: the Node is Ready, its startup taints gone, its resources registered.

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// initialize waits for the Node to be Ready with its startup and known ephemeral taints gone
// and the extended resources its instance type promises registered; again after a reboot.
func (c *Controller) initialize(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRebooting) {
		// The node of the old boot would pass every check below: the reboot controller hands
		// initialization back once the reboot ended (controllers/nodeclaim/reboot).
		return reconcile.Result{}, nil
	}
	node, err := c.node(ctx, nc)
	if err != nil || node == nil {
		return reconcile.Result{}, err
	}
	if ready, _ := scheduling.NodeReady(node); !ready {
		c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "NodeNotReady", "the node is not ready")
		// The Node's update usually brings us back, but it can come before the NodeClaim's
		// provider ID is in the cache, so look again.
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	for _, st := range nc.Spec.StartupTaints {
		for _, t := range node.Spec.Taints {
			if t.MatchTaint(&st) {
				c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "StartupTaintsPresent", "startup taint "+t.Key+" is still on the node")
				return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
			}
		}
	}
	for _, et := range KnownEphemeralTaints {
		for _, t := range node.Spec.Taints {
			if t.MatchTaint(&et) {
				c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "KnownEphemeralTaintsPresent", "taint "+t.Key+" is still on the node")
				return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
			}
		}
	}
	if name, missing := unregisteredResource(node, nc); missing {
		c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "ResourceNotRegistered", "resource "+string(name)+" is not registered on the node")
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if node.Labels[karpv1.NodeInitializedLabelKey] != "true" {
		patch := client.MergeFrom(node.DeepCopy())
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[karpv1.NodeInitializedLabelKey] = "true"
		if err := c.client.Patch(ctx, node, patch); err != nil {
			return reconcile.Result{}, err
		}
	}
	c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	return reconcile.Result{}, nil
}

// setReady summarises Launched, Registered and Initialized.
func setReady(nc *karpv1.NodeClaim) {
	for _, t := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		cond := meta.FindStatusCondition(nc.Status.Conditions, t)
		if cond == nil || cond.Status != metav1.ConditionTrue {
			reason := "AwaitingReconciliation"
			if cond != nil {
				reason = t + cond.Reason
			}
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionFalse,
				Reason: reason, Message: t + " is not true", ObservedGeneration: nc.Generation})
			return
		}
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: nc.Generation})
}
