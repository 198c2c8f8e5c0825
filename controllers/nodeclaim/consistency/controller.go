// Package consistency checks that a launched node is what its NodeClaim said it would be, as
// upstream's NodeClaim consistency controller does: once the NodeClaim is Initialized, each
// resource the NodeClaim requested must show on the Node's capacity at 90% or more of the
// NodeClaim's status.capacity. It sets the NodeClaim's ConsistentStateFound condition (True,
// or False with reason ConsistencyCheckFailed) and publishes a FailedConsistencyCheck warning
// event per issue; it looks again every ScanPeriod. It reports; it never deletes or repairs a
// node (a node that came up short keeps running, and node repair has its own conditions).
package consistency

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// ScanPeriod is how often a NodeClaim's node is checked again, as upstream's.
const ScanPeriod = 10 * time.Minute

// MinShare is the least share of a resource's expected capacity the node must show.
const MinShare = 0.90

// ReasonFailed is the False condition's reason, as upstream's.
const ReasonFailed = "ConsistencyCheckFailed"

// Controller checks initialized NodeClaims against their nodes.
type Controller struct {
	client   client.Client
	recorder events.EventRecorder
	clock    clock.Clock

	mu      sync.Mutex
	scanned map[types.UID]time.Time // when each NodeClaim was last checked
}

// NewController builds the consistency controller.
func NewController(c client.Client, recorder events.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{client: c, recorder: recorder, clock: clk, scanned: map[types.UID]time.Time{}}
}

// due reports whether the NodeClaim is to be checked now, else when it is.
func (c *Controller) due(uid types.UID, now time.Time) (bool, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.scanned[uid]; ok && now.Sub(at) < ScanPeriod {
		return false, ScanPeriod - now.Sub(at)
	}
	c.scanned[uid] = now
	return true, 0
}

func (c *Controller) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.scanned, uid)
}

// Register watches NodeClaims.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.consistency").For(&karpv1.NodeClaim{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile checks the NodeClaim's node once it is Initialized and writes the condition. A
// NodeClaim checked within ScanPeriod is left until then: a watch event (each status write)
// does not check it again. The times live in memory, as upstream's: a new leader checks each
// NodeClaim once on start.
func (c *Controller) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp != nil {
		c.forget(nc.UID)
		return reconcile.Result{}, nil
	}
	if nc.Labels[karpv1.NodePoolLabelKey] == "" || nc.Status.NodeName == "" ||
		!meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	if ok, after := c.due(nc.UID, c.clock.Now()); !ok {
		return reconcile.Result{RequeueAfter: after}, nil
	}
	node := &corev1.Node{}
	if err := c.client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		c.forget(nc.UID)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	issues := Check(node, nc)
	for _, issue := range issues {
		log.FromContext(ctx).Info("failed consistency check", "NodeClaim", nc.Name, "Node", node.Name, "issue", issue)
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "FailedConsistencyCheck", "ConsistencyCheck", "%s", issue)
	}
	stored := nc.DeepCopy()
	cond := metav1.Condition{Type: karpv1.ConditionTypeConsistentStateFound, Status: metav1.ConditionTrue, Reason: karpv1.ConditionTypeConsistentStateFound,
		ObservedGeneration: nc.Generation}
	if len(issues) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonFailed, "Consistency Check Failed"
	}
	meta.SetStatusCondition(&nc.Status.Conditions, cond)
	if !equality.Semantic.DeepEqual(stored.Status, nc.Status) {
		if err := c.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return reconcile.Result{RequeueAfter: ScanPeriod}, nil
}

// Check lists what the node lacks: each resource the NodeClaim requested whose capacity on
// the node is below MinShare of the NodeClaim's status.capacity.
func Check(node *corev1.Node, nc *karpv1.NodeClaim) []string {
	var issues []string
	for name, requested := range nc.Spec.Resources.Requests {
		expected := nc.Status.Capacity[name]
		if requested.IsZero() || expected.IsZero() {
			continue
		}
		got := node.Status.Capacity[name]
		if share := got.AsApproximateFloat64() / expected.AsApproximateFloat64(); share < MinShare {
			issues = append(issues, fmt.Sprintf("expected %s of resource %s, but found %s (%0.1f%% of expected)", expected.String(), name, got.String(), share*100))
		}
	}
	return issues
}
