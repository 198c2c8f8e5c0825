// Package termination drains a Node that is being deleted, then lets it go: it taints the
// node karpenter.sh/disrupted:NoSchedule, evicts its pods through the Eviction API in tiers
// (ordinary pods, then critical ones, DaemonSet pods last), respecting PodDisruptionBudgets
// and karpenter.sh/do-not-disrupt, until the NodeClaim's terminationGracePeriod runs out and
// the remaining pods are deleted; then it removes the karpenter.sh/termination finalizer.
package termination

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
)

// MaxConcurrentReconciles is high: launches and drains wait on the cloud and on evictions, so many run
// at once.
const MaxConcurrentReconciles = 100

// Controller drains deleted Nodes.
type Controller struct {
	client   client.Client
	recorder events.EventRecorder
	clock    clock.Clock
}

// NewController builds the node termination controller.
func NewController(c client.Client, recorder events.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{client: c, recorder: recorder, clock: clk}
}

// Register watches Nodes (the manager must have the indexes of package index).
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("node.termination").
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentReconciles}).For(&corev1.Node{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile drains a deleted node holding the termination finalizer.
func (c *Controller) Reconcile(ctx context.Context, node *corev1.Node) (reconcile.Result, error) {
	if node.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	if err := c.taint(ctx, node); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return reconcile.Result{}, err
	}
	deadline, hasDeadline := c.deadline(ctx, node)
	remaining, err := c.drain(ctx, node, hasDeadline && !c.clock.Now().Before(deadline))
	if err != nil {
		return reconcile.Result{}, err
	}
	if remaining > 0 {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	// Both patches replace a list whole (finalizers, taints): the resourceVersion keeps a copy
	// older than another writer's change from undoing it; the Node's update brings us back.
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(node, karpv1.TerminationFinalizer)
	if err := c.client.Patch(ctx, node, patch); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	metrics.NodesAllocatable.DeletePartialMatch(map[string]string{"node_name": node.Name})
	log.FromContext(ctx).Info("drained node", "Node", node.Name)
	return reconcile.Result{}, nil
}

func (c *Controller) taint(ctx context.Context, node *corev1.Node) error {
	for _, t := range node.Spec.Taints {
		if t.MatchTaint(&karpv1.DisruptedNoScheduleTaint) {
			return nil
		}
	}
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	return client.IgnoreNotFound(c.client.Patch(ctx, node, patch))
}

// deadline is when the NodeClaim's terminationGracePeriod runs out, counted from its deletion.
func (c *Controller) deadline(ctx context.Context, node *corev1.Node) (time.Time, bool) {
	claims, err := index.NodeClaimsByProviderID(ctx, c.client, node.Spec.ProviderID)
	if err != nil {
		return time.Time{}, false
	}
	for _, nc := range claims {
		if nc.Spec.TerminationGracePeriod == nil {
			continue
		}
		start := node.DeletionTimestamp.Time
		if nc.DeletionTimestamp != nil {
			start = nc.DeletionTimestamp.Time
		}
		return start.Add(nc.Spec.TerminationGracePeriod.Duration), true
	}
	return time.Time{}, false
}

// tier orders eviction: ordinary pods, then critical ones, then DaemonSet pods.
func tier(p *corev1.Pod) int {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return 2
		}
	}
	if p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical" {
		return 1
	}
	return 0
}

// drain evicts the pods of the lowest tier still present and returns how many pods remain.
// Past the deadline, pods are deleted instead, PDBs and do-not-disrupt notwithstanding.
func (c *Controller) drain(ctx context.Context, node *corev1.Node, force bool) (int, error) {
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods, client.MatchingFields{index.PodNodeName: node.Name}); err != nil {
		return 0, err
	}
	var active []*corev1.Pod
	lowest := 3
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		active = append(active, p)
		if p.DeletionTimestamp == nil && tier(p) < lowest {
			lowest = tier(p)
		}
	}
	for _, p := range active {
		if p.DeletionTimestamp != nil || tier(p) != lowest {
			continue
		}
		if force {
			if err := c.client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return 0, err
			}
			c.recorder.Eventf(p, node, corev1.EventTypeWarning, "Evicted", "Drain", "Deleted pod: node %s passed its terminationGracePeriod", node.Name)
			continue
		}
		if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			continue // waits for the grace period, or for the pod to finish
		}
		err := c.client.SubResource("eviction").Create(ctx, p, &k8spolicyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		switch {
		case err == nil:
			c.recorder.Eventf(p, node, corev1.EventTypeNormal, "Evicted", "Drain", "Evicted pod: draining node %s", node.Name)
		case apierrors.IsTooManyRequests(err):
			// A PodDisruptionBudget allows no more disruption now; try again later.
		case apierrors.IsNotFound(err):
		default:
			return 0, fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return len(active), nil
}
