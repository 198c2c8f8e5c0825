// Package reboot carries out the reboots node repair commits: a NodeClaim whose Rebooting
// condition is True (reason RebootRequested) has its node fenced (karpenter.sh/rebooting
// NoSchedule), drained within a bound, rebooted in place through the cloud provider, and
// watched until it comes back with a new boot ID and Ready; the condition then ends False with
// RebootSucceeded, or RebootFailed after which the NodeClaim is deleted so that the node is
// replaced. Every step is read back from the API (the condition's phase and transition times,
// the karpenter.sh/reboot-pre-boot-id annotation), so a manager that restarts or loses its
// lease in the middle neither reboots twice nor leaves a fence behind. It writes the
// NodeClaim's Rebooting and Initialized conditions and reboot annotations, the Node's rebooting
// taint and initialized label, and pods (evictions through the termination eviction queue);
// it never decides to reboot (scheduling/methods's Repair does) and never touches a node
// whose NodeClaim has no active Rebooting condition (docs/disruption.md, "Node repair").
package reboot

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// Bounds of a reboot's phases, as upstream: the provider must accept the reboot within
// IssueTimeout of the drain's end, and the node must come back (a new boot ID, Ready) within
// RecoveryTimeout of the reboot being issued. A drain lasts at least MinDrain, so that pods
// bound just before the fence are seen.
const (
	IssueTimeout    = 5 * time.Minute
	RecoveryTimeout = 20 * time.Minute
	MinDrain        = 5 * time.Second
	// poll is how often a reboot in progress is looked at when nothing brings it back.
	poll = 5 * time.Second
)

// Results of a reboot, the values of karpenter_nodes_reboots_total's result label.
const (
	resultSucceeded       = "succeeded"
	resultProviderError   = "provider_error"
	resultRecoveryTimeout = "recovery_timeout"
)

// Controller carries out committed reboots.
type Controller struct {
	client   client.Client
	cloud    cloudprovider.CloudProvider
	queue    *eviction.Queue
	recorder events.EventRecorder
	clock    clock.Clock
}

// NewController builds the reboot controller; it drains through the node termination
// controller's eviction queue.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, queue *eviction.Queue, recorder events.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{client: c, cloud: cloud, queue: queue, recorder: recorder, clock: clk}
}

// Register watches NodeClaims with an active reboot, and their Nodes' boot ID and readiness
// (the manager must have the indexes of package index).
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.reboot").
		WithOptions(ratelimit.Options(10)).
		For(&karpv1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return Active(o.(*karpv1.NodeClaim))
		}))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			node := o.(*corev1.Node)
			claims, err := index.NodeClaimsByProviderID(ctx, c.client, node.Spec.ProviderID)
			if err != nil {
				return nil
			}
			var out []reconcile.Request
			for i := range claims {
				if Active(&claims[i]) {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims[i])})
				}
			}
			return out
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			old, node := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			oldReady, _ := scheduling.NodeReady(old)
			ready, _ := scheduling.NodeReady(node)
			return node.Spec.ProviderID != "" && (old.Status.NodeInfo.BootID != node.Status.NodeInfo.BootID || oldReady != ready)
		}})).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Active reports whether a NodeClaim has a reboot in progress (Rebooting True).
func Active(nc *karpv1.NodeClaim) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
}

// Reconcile moves a reboot on by one phase.
func (c *Controller) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
	if cond == nil || cond.Status != metav1.ConditionTrue || nc.DeletionTimestamp != nil {
		// Termination takes a deleted NodeClaim's node, fence and all.
		return reconcile.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("NodeClaim", nc.Name))
	now := c.clock.Now()
	node, err := c.node(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if deadline := Deadline(nc); now.After(deadline) {
		if cond.Reason == karpv1.RebootReasonIssued {
			return reconcile.Result{}, c.fail(ctx, nc, node, resultRecoveryTimeout, "the node did not come back with a new boot and Ready within "+RecoveryTimeout.String())
		}
		return reconcile.Result{}, c.fail(ctx, nc, node, resultProviderError, "the reboot was not issued in time")
	}
	if node == nil {
		// Gone mid-reboot: its NodeClaim's liveness or garbage collection will tell; until the
		// phase's deadline there is nothing to do but look again.
		return reconcile.Result{RequeueAfter: poll}, nil
	}
	switch cond.Reason {
	case karpv1.RebootReasonRequested:
		return c.requested(ctx, nc, node, cond.LastTransitionTime.Time)
	case karpv1.RebootReasonIssued:
		return c.issued(ctx, nc, node)
	}
	return reconcile.Result{}, nil
}

// Deadline is when the reboot's current phase runs out: before it is issued, the drain's
// bound and IssueTimeout from the request; once issued, RecoveryTimeout from then.
func Deadline(nc *karpv1.NodeClaim) time.Time {
	cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
	if cond == nil {
		return time.Time{}
	}
	if cond.Reason == karpv1.RebootReasonIssued {
		return issuedAt(nc, cond).Add(RecoveryTimeout)
	}
	return cond.LastTransitionTime.Add(max(DrainBound(nc), MinDrain) + IssueTimeout)
}

// issuedAt is when the reboot was issued: when Initialized turned Unknown for it (the
// Rebooting condition stays True from the request on, so its own time does not move).
func issuedAt(nc *karpv1.NodeClaim, rebooting *metav1.Condition) time.Time {
	if init := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized); init != nil &&
		init.Reason == karpv1.RebootReasonRebooting && !init.LastTransitionTime.Before(&rebooting.LastTransitionTime) {
		return init.LastTransitionTime.Time
	}
	return rebooting.LastTransitionTime.Time
}

// DrainBound is how long the drain before the reboot may last: the NodeClaim's
// karpenter.sh/reboot-termination-grace-period, else its terminationGracePeriod, else
// cloudprovider.DefaultRebootDrain. A value that does not parse counts as the default.
func DrainBound(nc *karpv1.NodeClaim) time.Duration {
	if v, ok := nc.Annotations[karpv1.RebootTerminationGracePeriodAnnotationKey]; ok {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
		return cloudprovider.DefaultRebootDrain
	}
	if nc.Spec.TerminationGracePeriod != nil {
		return nc.Spec.TerminationGracePeriod.Duration
	}
	return cloudprovider.DefaultRebootDrain
}

func (c *Controller) node(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	if nc.Status.ProviderID == "" {
		return nil, nil
	}
	return index.NodeByProviderID(ctx, c.client, nc.Status.ProviderID)
}

// requested fences and drains the node, records its boot ID, and asks the provider to
// reboot it. The boot ID annotation marks that the drain is over and the reboot may have been
// asked for: from then on a new boot ID is proof enough, and it is never asked for again.
func (c *Controller) requested(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, requestedAt time.Time) (reconcile.Result, error) {
	if err := c.setTaint(ctx, node, true); err != nil {
		return reconcile.Result{}, err
	}
	pre, issuing := nc.Annotations[karpv1.RebootPreBootIDAnnotationKey]
	if issuing && node.Status.NodeInfo.BootID != pre {
		return reconcile.Result{}, c.markIssued(ctx, nc, node)
	}
	if !issuing {
		if wait, err := c.drain(ctx, nc, node, requestedAt); err != nil || wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, err
		}
		patch := client.MergeFrom(nc.DeepCopy())
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[karpv1.RebootPreBootIDAnnotationKey] = node.Status.NodeInfo.BootID
		if err := c.client.Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, err
		}
	}
	rebooter, ok := c.cloud.(cloudprovider.Rebooter)
	if !ok {
		return reconcile.Result{}, c.fail(ctx, nc, node, resultProviderError, "the cloud provider cannot reboot nodes")
	}
	if err := rebooter.Reboot(ctx, nc, OperationID(nc)); err != nil {
		if cloudprovider.IsRebootRefused(err) {
			return reconcile.Result{}, c.fail(ctx, nc, node, resultProviderError, err.Error())
		}
		// Retried, backing off, until the phase's deadline.
		return ratelimit.Retry(fmt.Errorf("rebooting node %s: %w", node.Name, err))
	}
	log.FromContext(ctx).Info("rebooting node", "Node", node.Name)
	return reconcile.Result{}, c.markIssued(ctx, nc, node)
}

// OperationID names one reboot for the provider, the same across retries and restarts: the
// NodeClaim, when the reboot was requested, and the boot it replaces.
func OperationID(nc *karpv1.NodeClaim) string {
	var at int64
	if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting); cond != nil {
		at = cond.LastTransitionTime.Unix()
	}
	return fmt.Sprintf("%s-%d-%s", nc.UID, at, nc.Annotations[karpv1.RebootPreBootIDAnnotationKey])
}

// drain evicts the node's drainable pods (PodDisruptionBudgets and do-not-disrupt respected)
// and says how long to wait before looking again; 0 once the drain is over: no drainable pod
// left and MinDrain passed, or the bound ran out (the pods left stay through the reboot), or
// the bound is 0.
func (c *Controller) drain(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, requestedAt time.Time) (time.Duration, error) {
	bound := DrainBound(nc)
	if bound == 0 {
		return 0, nil
	}
	var list corev1.PodList
	if err := c.client.List(ctx, &list, client.MatchingFields{index.PodNodeName: node.Name}); err != nil {
		return 0, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	now := c.clock.Now()
	plan := eviction.Plan(pods, now, nil)
	if plan.Waiting > 0 {
		if left := requestedAt.Add(max(bound, MinDrain)).Sub(now); left > 0 {
			c.queue.Add(nil, plan.Evict...)
			return min(left, time.Second), nil
		}
		c.queue.Forget(pods...)
		log.FromContext(ctx).Info("drain before reboot ran out; the pods left stay through the reboot", "Node", node.Name, "pods", plan.Waiting)
		return 0, nil
	}
	return max(0, requestedAt.Add(MinDrain).Sub(now)), nil
}

// markIssued moves the reboot to RebootIssued; the node is no longer initialized (its
// initialization is of the old boot), so the lifecycle initializes it again once back.
func (c *Controller) markIssued(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) error {
	before := nc.DeepCopy()
	cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
	cond.Reason = karpv1.RebootReasonIssued
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionUnknown,
		Reason: karpv1.RebootReasonRebooting, Message: "the node is rebooting", ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionFalse,
		Reason: "InitializedRebooting", Message: "Initialized is not true", ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	if err := c.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	return c.uninitialize(ctx, node)
}

func (c *Controller) uninitialize(ctx context.Context, node *corev1.Node) error {
	if _, ok := node.Labels[karpv1.NodeInitializedLabelKey]; !ok {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	delete(node.Labels, karpv1.NodeInitializedLabelKey)
	return c.client.Patch(ctx, node, patch)
}

// issued waits for the new boot: once the boot ID changed the fence goes, and once the node
// is also Ready the reboot succeeded.
func (c *Controller) issued(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (reconcile.Result, error) {
	if err := c.uninitialize(ctx, node); err != nil {
		return reconcile.Result{}, err
	}
	if node.Status.NodeInfo.BootID == nc.Annotations[karpv1.RebootPreBootIDAnnotationKey] {
		return reconcile.Result{RequeueAfter: poll}, nil
	}
	if hasTaint(node) {
		for _, obj := range []runtime.Object{nc, node} {
			c.recorder.Eventf(obj, nil, corev1.EventTypeNormal, "RebootObserved", "Reboot", "New boot observed (boot ID changed); waiting for the node to be Ready")
		}
		if err := c.setTaint(ctx, node, false); err != nil {
			return reconcile.Result{}, err
		}
	}
	if ready, _ := scheduling.NodeReady(node); !ready {
		return reconcile.Result{RequeueAfter: poll}, nil
	}
	took, recovered := c.durations(nc)
	if err := c.end(ctx, nc, karpv1.RebootReasonSucceeded, "the node rebooted and is Ready"); err != nil {
		return reconcile.Result{}, err
	}
	metrics.NodeReboots.WithLabelValues(resultSucceeded).Inc()
	metrics.NodeRebootDuration.WithLabelValues(resultSucceeded).Observe(took.Seconds())
	metrics.NodeRebootRecoveryDuration.Observe(recovered.Seconds())
	log.FromContext(ctx).Info("node rebooted", "Node", node.Name)
	return reconcile.Result{}, nil
}

// durations are how long the reboot has taken since it was requested and since it was issued,
// read before end moves the Rebooting condition's time.
func (c *Controller) durations(nc *karpv1.NodeClaim) (sinceRequest, sinceIssue time.Duration) {
	cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
	if cond == nil {
		return 0, 0
	}
	return c.clock.Since(cond.LastTransitionTime.Time), c.clock.Since(issuedAt(nc, cond))
}

// fail ends the reboot with RebootFailed and deletes the NodeClaim: node repair's next step
// is to replace the node (its termination drains it within the NodeClaim's bound).
func (c *Controller) fail(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, result, msg string) error {
	if node != nil {
		if err := c.setTaint(ctx, node, false); err != nil {
			return err
		}
	}
	took, _ := c.durations(nc)
	if err := c.end(ctx, nc, karpv1.RebootReasonFailed, msg); err != nil {
		return err
	}
	metrics.NodeReboots.WithLabelValues(result).Inc()
	metrics.NodeRebootDuration.WithLabelValues(result).Observe(took.Seconds())
	c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "RebootFailed", "Reboot", "Reboot failed, replacing the node: %s", msg)
	if node != nil {
		c.recorder.Eventf(node, nil, corev1.EventTypeWarning, "RebootFailed", "Reboot", "Reboot failed, replacing the node: %s", msg)
	}
	log.FromContext(ctx).Info("reboot failed, replacing the node", "reason", msg)
	return client.IgnoreNotFound(c.client.Delete(ctx, nc, client.Preconditions{ResourceVersion: &nc.ResourceVersion}))
}

// end sets Rebooting False (after a success, without the DisruptionReason the reboot was
// committed with) and takes the boot ID annotation off, both with the resourceVersion read,
// so that a stale copy cannot end a reboot twice.
func (c *Controller) end(ctx context.Context, nc *karpv1.NodeClaim, reason, msg string) error {
	if _, ok := nc.Annotations[karpv1.RebootPreBootIDAnnotationKey]; ok {
		before := nc.DeepCopy()
		delete(nc.Annotations, karpv1.RebootPreBootIDAnnotationKey)
		if err := c.client.Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
	}
	before := nc.DeepCopy()
	if reason == karpv1.RebootReasonSucceeded {
		// The node stays: it is no longer being disrupted.
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason)
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeRebooting, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	return c.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func hasTaint(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.RebootingNoScheduleTaint) })
}

// setTaint puts the rebooting fence on the node, or takes it off.
func (c *Controller) setTaint(ctx context.Context, node *corev1.Node, on bool) error {
	if hasTaint(node) == on {
		return nil
	}
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if on {
		node.Spec.Taints = append(node.Spec.Taints, karpv1.RebootingNoScheduleTaint)
	} else {
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.RebootingNoScheduleTaint) })
	}
	return c.client.Patch(ctx, node, patch)
}
