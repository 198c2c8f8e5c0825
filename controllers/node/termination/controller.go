// Package termination drains a Node that is being deleted, and lets it go once its instance is
// terminating: it taints the node karpenter.sh/disrupted:NoSchedule, evicts its drainable pods
// through package eviction's queue (per-pod backoff, upstream Karpenter's tier order, PDBs and
// karpenter.sh/do-not-disrupt respected), deleting early the pods that would outlast the
// NodeClaim's terminationGracePeriod, then asks the cloud provider to terminate the instance
// and removes the karpenter.sh/termination finalizer once it is gone. A node that is not Ready
// and whose instance the cloud provider no longer has is let go at once: nothing is left to
// drain. Between the drain and the instance's termination it waits for the VolumeAttachments
// of the drained pods' volumes to go (volumes.go). It writes the Node (taint, finalizer), the
// NodeClaim's Drained, VolumesDetached and InstanceTerminating conditions, and pods (evictions, deletions for the deadline), nothing else
// (docs/architecture.md, "Data flow": termination).
package termination

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/eviction"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// MaxConcurrentReconciles is high: drains wait on evictions and the cloud, so many run at once.
const MaxConcurrentReconciles = 100

// Backoff is how a draining node is looked at again when no pod event brings it back: after
// 500 ms, then 1 s, ... at most every 10 s, so that a deadline is acted on within 10 s.
var Backoff = ratelimit.Settings{Base: 500 * time.Millisecond, Max: 10 * time.Second, QPS: 50, Burst: 500}

// Controller drains deleted Nodes.
type Controller struct {
	client   client.Client
	cloud    cloudprovider.CloudProvider
	recorder events.EventRecorder
	clock    clock.Clock
	queue    *eviction.Queue
	// told are the nodes whose terminationGracePeriod this process announced, by UID.
	told sync.Map
}

// NewController builds the node termination controller and its eviction queue.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, recorder events.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{client: c, cloud: cloud, recorder: recorder, clock: clk, queue: eviction.NewQueue(c, recorder, clk)}
}

// Queue is the controller's eviction queue.
func (c *Controller) Queue() *eviction.Queue { return c.queue }

// Register watches Nodes, and pods leaving a node, and registers the eviction queue (the
// manager must have the indexes of package index).
func (c *Controller) Register(mgr ctrl.Manager) error {
	if err := c.queue.Register(mgr); err != nil {
		return err
	}
	// A pod that goes or starts terminating brings its node back, if the node is deleting.
	leaving := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, p := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			return p.Spec.NodeName != "" && (old.DeletionTimestamp == nil && p.DeletionTimestamp != nil || !scheduling.IsTerminal(old) && scheduling.IsTerminal(p))
		},
		DeleteFunc: func(e event.DeleteEvent) bool { return e.Object.(*corev1.Pod).Spec.NodeName != "" },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("node.termination").
		WithOptions(ratelimit.OptionsWith(MaxConcurrentReconciles, Backoff)).
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return controllerutil.ContainsFinalizer(o, karpv1.TerminationFinalizer)
		}), predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			// Not heartbeats: the drain follows its pods' events and its own requeues.
			return scheduling.NodeChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
		}})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*corev1.Pod).Spec.NodeName}}}
		}), builder.WithPredicates(leaving)).
		// A volume detached brings its node back (awaitVolumeDetachment).
		Watches(&storagev1.VolumeAttachment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*storagev1.VolumeAttachment).Spec.NodeName}}}
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false }, UpdateFunc: func(event.UpdateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false }})).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile drains a deleted node holding the termination finalizer and lets it go.
func (c *Controller) Reconcile(ctx context.Context, node *corev1.Node) (reconcile.Result, error) {
	if node.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	nc, err := c.nodeClaim(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	if nc != nil && nc.DeletionTimestamp == nil {
		// The Node was deleted directly: its NodeClaim goes with it (its own termination waits
		// for this one), so that it is not left standing for an instance that is gone.
		if err := c.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting nodeclaim %s of deleted node %s: %w", nc.Name, node.Name, err)
		}
	}
	if gone, err := c.instanceGone(ctx, node); err != nil {
		return reconcile.Result{}, err
	} else if gone {
		// Nothing runs there any more: waiting for its pods to go would wait forever.
		log.FromContext(ctx).Info("node is not ready and its instance is gone: not draining", "Node", node.Name)
		return ratelimit.Retry(c.release(ctx, node))
	}
	if err := c.taint(ctx, node); err != nil {
		return ratelimit.Retry(err)
	}
	var before *karpv1.NodeClaim
	if nc != nil {
		before = nc.DeepCopy()
	}
	deadline := c.deadline(node, nc)
	result, err := c.drain(ctx, node, nc, deadline)
	if err == nil && result.IsZero() {
		result, err = c.awaitVolumeDetachment(ctx, node, nc, deadline)
	}
	if err == nil && result.IsZero() {
		result, err = c.terminateInstance(ctx, nc)
	}
	if nc != nil && !equality.Semantic.DeepEqual(before.Status, nc.Status) {
		// With the resourceVersion read: the condition list is replaced whole.
		if perr := c.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(perr) != nil {
			return ratelimit.Retry(perr)
		}
		if !meta.IsStatusConditionTrue(before.Status.Conditions, karpv1.ConditionTypeDrained) && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDrained) {
			metrics.NodesDrained.WithLabelValues(node.Labels[karpv1.NodePoolLabelKey]).Inc()
		}
	}
	if err != nil || !result.IsZero() {
		return result, err
	}
	return ratelimit.Retry(c.release(ctx, node))
}

// nodeClaim is the node's NodeClaim, nil when it has none; an error of the index is an error.
func (c *Controller) nodeClaim(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	if node.Spec.ProviderID == "" {
		return nil, nil
	}
	claims, err := index.NodeClaimsByProviderID(ctx, c.client, node.Spec.ProviderID)
	if err != nil || len(claims) != 1 {
		// None, or several (no single source of truth): the node is drained as it stands.
		return nil, err
	}
	return &claims[0], nil
}

// instanceGone reports whether the node is not Ready and the cloud provider no longer has its
// instance: the kubelet is gone with it (a reclaimed Spot instance), and nothing will ever
// confirm its pods' deletion. A Ready node is drained whatever the provider says: its kubelet
// still runs.
func (c *Controller) instanceGone(ctx context.Context, node *corev1.Node) (bool, error) {
	if ready, _ := scheduling.NodeReady(node); ready || node.Spec.ProviderID == "" {
		return false, nil
	}
	_, err := c.cloud.Get(ctx, node.Spec.ProviderID)
	switch {
	case cloudprovider.IsNodeClaimNotFoundError(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("asking the cloud provider for the instance of node %s: %w", node.Name, err)
	}
	return false, nil
}

// taint marks the node karpenter.sh/disrupted:NoSchedule, so that nothing new is scheduled
// there, and excludes it from external load balancers while it drains.
func (c *Controller) taint(ctx context.Context, node *corev1.Node) error {
	stored := node.DeepCopy()
	if !hasTaint(node, karpv1.DisruptedNoScheduleTaint) {
		node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	}
	if node.Labels[corev1.LabelNodeExcludeBalancers] == "" {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[corev1.LabelNodeExcludeBalancers] = "karpenter"
	}
	if equality.Semantic.DeepEqual(stored, node) {
		return nil
	}
	// With the resourceVersion read: the taint list is replaced whole.
	return client.IgnoreNotFound(c.client.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})))
}

func hasTaint(n *corev1.Node, t corev1.Taint) bool {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}

// deadline is when every pod must be gone: the NodeClaim's
// karpenter.sh/nodeclaim-termination-timestamp, set when it was deleted with a
// terminationGracePeriod, or, until that annotation is seen, its deletion plus that period.
// Nil when the NodeClaim has no terminationGracePeriod (or the node none).
func (c *Controller) deadline(node *corev1.Node, nc *karpv1.NodeClaim) *time.Time {
	if nc == nil {
		return nil
	}
	var at time.Time
	if v, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil
		}
		at = t
	} else if tgp := nc.Spec.TerminationGracePeriod; tgp != nil && nc.DeletionTimestamp != nil {
		at = nc.DeletionTimestamp.Add(tgp.Duration)
	} else {
		return nil
	}
	if _, told := c.told.LoadOrStore(node.UID, true); !told {
		c.recorder.Eventf(node, nil, corev1.EventTypeWarning, "TerminationGracePeriodExpiring", "Drain",
			"All pods will be deleted by %s", at.UTC().Format(time.RFC3339))
	}
	return &at
}

// drain queues the next pods for eviction or deletion; it asks to come back while drainable
// pods remain, and sets the NodeClaim's Drained condition.
func (c *Controller) drain(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, deadline *time.Time) (reconcile.Result, error) {
	var list corev1.PodList
	if err := c.client.List(ctx, &list, client.MatchingFields{index.PodNodeName: node.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	plan := eviction.Plan(pods, c.clock.Now(), deadline)
	if plan.Waiting == 0 {
		setCondition(nc, karpv1.ConditionTypeDrained, metav1.ConditionTrue, "Drained", "")
		return reconcile.Result{}, nil
	}
	c.queue.Add(deadline, plan.Delete...)
	c.queue.Add(deadline, plan.Evict...)
	setCondition(nc, karpv1.ConditionTypeDrained, metav1.ConditionUnknown, "Draining", fmt.Sprintf("%d pods are waiting to be evicted", plan.Waiting))
	return ratelimit.Again(), nil
}

// terminateInstance asks the cloud provider to terminate the drained node's instance and
// comes back until the provider no longer has it; a node without a NodeClaim has no instance
// of ours.
func (c *Controller) terminateInstance(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc == nil || nc.Status.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	err := c.cloud.Delete(ctx, nc)
	if cloudprovider.IsNodeClaimNotFoundError(err) {
		// From the first terminate call that left the instance running, if there was one.
		if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInstanceTerminating); cond != nil && cond.Reason == "InstanceTerminating" {
			metrics.NodeClaimsInstanceTerminationDuration.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey]).Observe(c.clock.Since(cond.LastTransitionTime.Time).Seconds())
		}
		setCondition(nc, karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "InstanceTerminated", "")
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("terminating the instance of nodeclaim %s: %w", nc.Name, err)
	}
	setCondition(nc, karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "InstanceTerminating", "")
	return ratelimit.Again(), nil
}

// release removes the termination finalizer, letting the API server delete the Node.
func (c *Controller) release(ctx context.Context, node *corev1.Node) error {
	stored := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, karpv1.TerminationFinalizer)
	if equality.Semantic.DeepEqual(stored.Finalizers, node.Finalizers) {
		return nil
	}
	// With the resourceVersion read: the finalizer list is replaced whole.
	if err := c.client.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer of node %s: %w", node.Name, err)
	}
	metrics.NodesTerminated.WithLabelValues(node.Labels[karpv1.NodePoolLabelKey], node.Labels[corev1.LabelTopologyZone]).Inc()
	metrics.NodesTerminationDuration.WithLabelValues(node.Labels[karpv1.NodePoolLabelKey]).Observe(c.clock.Since(stored.DeletionTimestamp.Time).Seconds())
	metrics.NodesLifetimeDuration.WithLabelValues(node.Labels[karpv1.NodePoolLabelKey]).Observe(c.clock.Since(stored.CreationTimestamp.Time).Seconds())
	log.FromContext(ctx).Info("deleted node", "Node", node.Name, "drainSeconds", c.clock.Since(stored.DeletionTimestamp.Time).Seconds())
	return nil
}

func setCondition(nc *karpv1.NodeClaim, t string, status metav1.ConditionStatus, reason, msg string) {
	if nc == nil {
		return
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: nc.Generation})
}
