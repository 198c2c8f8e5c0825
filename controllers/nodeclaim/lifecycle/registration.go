package lifecycle

// Registration: the Node with the NodeClaim's provider ID gets its labels and taints.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// node finds the Node with the NodeClaim's provider ID.
func (c *Controller) node(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	return index.NodeByProviderID(ctx, c.client, nc.Status.ProviderID)
}

// register links the Node: it gets the NodeClaim's labels and loses the unregistered taint.
func (c *Controller) register(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
		return reconcile.Result{}, nil
	}
	node, err := c.registerNode(ctx, nc)
	if err != nil {
		// A conflict: the Node's update that made our copy stale brings us back too.
		return ratelimit.Retry(err)
	}
	if node == nil {
		c.setCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, "AwaitingNode", "the node has not registered")
		// The Node's creation brings us back, unless it came before the cache had this
		// NodeClaim's provider ID to map it by: look again soon, as initialize does.
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	nc.Status.NodeName = node.Name
	c.setCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
	if pool := nc.Labels[karpv1.NodePoolLabelKey]; pool != "" && c.registrations != nil {
		c.registrations.RecordRegistration(pool, false, "")
	}
	return reconcile.Result{}, nil
}

// registerNode gives the Node with the NodeClaim's provider ID the NodeClaim's labels and the
// termination finalizer, and lifts the unregistered taint; it returns nil if there is no such
// Node yet.
func (c *Controller) registerNode(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	node, err := c.node(ctx, nc)
	if err != nil || node == nil {
		return nil, err
	}
	original := node.DeepCopy()
	// A merge patch replaces the taint and finalizer lists whole: written from a copy older than
	// another writer's change (kube-controller-manager lifting not-ready, an agent's taint), it
	// would undo that change. The resourceVersion makes such a write fail instead.
	patch := client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	firstTime := node.Labels[karpv1.NodeRegisteredLabelKey] != "true"
	for k, v := range nc.Labels {
		node.Labels[k] = v
	}
	if len(nc.Annotations) > 0 && node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range nc.Annotations {
		node.Annotations[k] = v
	}
	node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
	controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
	// The Node is owned by its NodeClaim, as upstream's: tools that walk owner references
	// (kubectl tree, ArgoCD's resource tree, upstream's suites) find the node under its claim.
	// The NodeClaim's finalizer keeps it until termination has drained the node, so the
	// garbage collector never deletes a Node termination is still working on.
	ownerRef := metav1.OwnerReference{APIVersion: karpv1.GroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptr.To(true)}
	if !slices.ContainsFunc(node.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == nc.UID }) {
		node.OwnerReferences = append(node.OwnerReferences, ownerRef)
	}
	if firstTime && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.UnregisteredNoExecuteTaint) }) {
		// The taint keeps pods off a node until it carries its NodeClaim's labels and taints;
		// a bootstrap that leaves it out lets pods land on a node that is not ready for them.
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "UnregisteredTaintMissing", "Registration",
			"Node %s registered without the %s taint: pods may have scheduled before its labels and taints were set", node.Name, karpv1.UnregisteredTaintKey)
	}
	node.Spec.Taints = syncTaints(node, nc)
	if !equality.Semantic.DeepEqual(original.Labels, node.Labels) || !equality.Semantic.DeepEqual(original.Annotations, node.Annotations) ||
		!equality.Semantic.DeepEqual(original.Finalizers, node.Finalizers) || !equality.Semantic.DeepEqual(original.Spec.Taints, node.Spec.Taints) ||
		!equality.Semantic.DeepEqual(original.OwnerReferences, node.OwnerReferences) {
		if err := c.client.Patch(ctx, node, patch); err != nil {
			return nil, fmt.Errorf("registering node %s: %w", node.Name, err)
		}
		if firstTime {
			metrics.NodesCreated.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], node.Labels[corev1.LabelTopologyZone]).Inc()
		}
	}
	return node, nil
}

// syncTaints are the Node's taints at registration: without the unregistered taint, and, unless
// the Node has karpenter.sh/do-not-sync-taints, with each of its NodeClaim's taints and startup
// taints it lacks (as upstream: a provider or bootstrap that did not register them does not
// leave the node open to pods the NodePool keeps off it).
func syncTaints(node *corev1.Node, nc *karpv1.NodeClaim) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != karpv1.UnregisteredTaintKey {
			out = append(out, t)
		}
	}
	if node.Labels[karpv1.DoNotSyncTaintsLabelKey] == "true" {
		return out
	}
	for _, t := range slices.Concat(nc.Spec.Taints, nc.Spec.StartupTaints) {
		if !slices.ContainsFunc(out, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
			out = append(out, t)
		}
	}
	return out
}

// KnownEphemeralTaints go by themselves as a node comes up (the node lifecycle controller's
// not-ready and unreachable taints, the cloud controller's uninitialized one): as upstream,
// a node is not initialized while one remains, and registration does not count them as the
// NodeClaim's.
var KnownEphemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
}

// unregisteredResource names an extended resource (nvidia.com/gpu, ...) the NodeClaim's instance
// type promises that the Node does not offer yet: its device plugin has not registered it,
// and pods that need it cannot schedule there.
func unregisteredResource(node *corev1.Node, nc *karpv1.NodeClaim) (corev1.ResourceName, bool) {
	for name, q := range nc.Status.Allocatable {
		if q.IsZero() || !isExtended(name) {
			continue
		}
		if got, ok := node.Status.Allocatable[name]; !ok || got.IsZero() {
			return name, true
		}
	}
	return "", false
}

// isExtended reports whether a resource is an extended one (a device plugin's), not one the
// kubelet always reports.
func isExtended(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return false
	}
	return !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(string(name), corev1.ResourceAttachableVolumesPrefix)
}
