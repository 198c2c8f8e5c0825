// Package lifecycle drives a NodeClaim from creation to a ready node: launch through the cloud
// provider, registration when the Node with its provider ID appears, initialization when that
// Node is Ready with its startup taints gone. Each step is a small function setting one
// condition; Reconcile runs them in order and writes status once.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
)

// ProviderIDIndex indexes NodeClaims by status.providerID.
const ProviderIDIndex = "status.providerID"

// errDeleted stops a reconcile whose NodeClaim a step deleted.
var errDeleted = errors.New("nodeclaim deleted")

// MaxConcurrentReconciles: launches and drains wait on the cloud and on evictions, so many run
// at once.
const MaxConcurrentReconciles = 100

// Controller reconciles NodeClaims.
type Controller struct {
	client   client.Client
	cloud    cloudprovider.CloudProvider
	recorder events.EventRecorder
	clock    clock.Clock
}

// NewController builds the lifecycle controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, recorder events.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{client: c, cloud: cloud, recorder: recorder, clock: clk}
}

// Register indexes NodeClaims by provider ID and watches NodeClaims and the Nodes they become.
func (c *Controller) Register(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &karpv1.NodeClaim{}, ProviderIDIndex, func(o client.Object) []string {
		if id := o.(*karpv1.NodeClaim).Status.ProviderID; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.lifecycle").
		WithOptions(controller.Options{MaxConcurrentReconciles: MaxConcurrentReconciles}).
		For(&karpv1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			node := o.(*corev1.Node)
			var claims karpv1.NodeClaimList
			if node.Spec.ProviderID == "" || c.client.List(ctx, &claims, client.MatchingFields{ProviderIDIndex: node.Spec.ProviderID}) != nil {
				return nil
			}
			var out []reconcile.Request
			for _, nc := range claims.Items {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
			}
			return out
		})).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile runs launch, registration and initialization, then writes status once.
func (c *Controller) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	before := nc.DeepCopy()
	// The finalizer is there before any instance exists, so none can outlive its NodeClaim.
	controllerutil.AddFinalizer(nc, karpv1.TerminationFinalizer)
	var result reconcile.Result
	var err error
	for _, step := range []func(context.Context, *karpv1.NodeClaim) (reconcile.Result, error){c.liveness, c.launch, c.register, c.initialize} {
		if result, err = step(ctx, nc); err != nil || !result.IsZero() {
			break
		}
	}
	if errors.Is(err, errDeleted) {
		return reconcile.Result{}, nil
	}
	nc.Status.ObservedGeneration = nc.Generation
	setReady(nc)
	if !equality.Semantic.DeepEqual(before.Labels, nc.Labels) || !equality.Semantic.DeepEqual(before.Annotations, nc.Annotations) ||
		!equality.Semantic.DeepEqual(before.Finalizers, nc.Finalizers) {
		patched := nc.DeepCopy()
		if perr := c.client.Patch(ctx, patched, client.MergeFrom(before)); perr != nil {
			return reconcile.Result{}, perr
		}
		nc.ResourceVersion = patched.ResourceVersion
	}
	if !equality.Semantic.DeepEqual(before.Status, nc.Status) {
		if perr := c.client.Status().Patch(ctx, nc, client.MergeFrom(before)); perr != nil {
			return reconcile.Result{}, perr
		}
	}
	return result, err
}

func (c *Controller) setCondition(nc *karpv1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: nc.Generation})
}

// Liveness limits: a NodeClaim not launched within LaunchTTL of its creation, or not
// registered within RegistrationTTL of its launch, is deleted; its pods are provisioned again.
const (
	LaunchTTL       = 5 * time.Minute
	RegistrationTTL = 15 * time.Minute
)

// liveness deletes a NodeClaim stuck before launch or before registration.
func (c *Controller) liveness(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	now := c.clock.Now()
	var reason string
	if launched := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched); launched == nil || launched.Status != metav1.ConditionTrue {
		deadline := nc.CreationTimestamp.Add(LaunchTTL)
		if now.After(deadline) {
			reason = fmt.Sprintf("not launched within %s", LaunchTTL)
		}
	} else if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
		deadline := launched.LastTransitionTime.Add(RegistrationTTL)
		if now.After(deadline) {
			reason = fmt.Sprintf("not registered within %s of its launch", RegistrationTTL)
		}
	}
	if reason == "" {
		return reconcile.Result{}, nil
	}
	c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "LivenessTimeout", "Liveness", "Deleting NodeClaim %s: %s", nc.Name, reason)
	log.FromContext(ctx).Info("deleting nodeclaim", "NodeClaim", nc.Name, "reason", reason)
	if err := c.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, errDeleted
}

// launch creates the instance once.
func (c *Controller) launch(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.Status.ProviderID != "" {
		return reconcile.Result{}, nil
	}
	launched, err := c.cloud.Create(ctx, nc)
	switch {
	case cloudprovider.IsInsufficientCapacityError(err):
		// The pods go back to the provisioner, which will pick other offerings.
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "InsufficientCapacityError", "Launch", "NodeClaim %s launch failed, %v", nc.Name, err)
		if derr := c.client.Delete(ctx, nc); derr != nil && !apierrors.IsNotFound(derr) {
			return reconcile.Result{}, derr
		}
		return reconcile.Result{}, errDeleted
	case cloudprovider.IsNodeClassNotReadyError(err):
		c.setCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "NodeClassNotReady", err.Error())
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	case err != nil:
		c.setCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "LaunchFailed", err.Error())
		return reconcile.Result{}, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	for k, v := range launched.Labels {
		if nc.Labels == nil {
			nc.Labels = map[string]string{}
		}
		nc.Labels[k] = v
	}
	for k, v := range launched.Annotations {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[k] = v
	}
	nc.Status.ProviderID, nc.Status.ImageID = launched.Status.ProviderID, launched.Status.ImageID
	nc.Status.Capacity, nc.Status.Allocatable = launched.Status.Capacity, launched.Status.Allocatable
	c.setCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
	log.FromContext(ctx).Info("launched nodeclaim", "NodeClaim", nc.Name, "providerID", nc.Status.ProviderID,
		"instanceType", nc.Labels[karpv1.LabelInstanceType], "zone", nc.Labels[karpv1.LabelTopologyZone], "capacityType", nc.Labels[karpv1.CapacityTypeLabelKey])
	return reconcile.Result{}, nil
}

// node finds the Node with the NodeClaim's provider ID.
func (c *Controller) node(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		if nodes.Items[i].Spec.ProviderID == nc.Status.ProviderID {
			return &nodes.Items[i], nil
		}
	}
	return nil, nil
}

// register links the Node: it gets the NodeClaim's labels and loses the unregistered taint.
func (c *Controller) register(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
		return reconcile.Result{}, nil
	}
	node, err := c.node(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil {
		c.setCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, "AwaitingNode", "the node has not registered")
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range nc.Labels {
		node.Labels[k] = v
	}
	node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
	controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != karpv1.UnregisteredTaintKey {
			taints = append(taints, t)
		}
	}
	node.Spec.Taints = taints
	if err := c.client.Patch(ctx, node, patch); err != nil {
		return reconcile.Result{}, fmt.Errorf("registering node %s: %w", node.Name, err)
	}
	nc.Status.NodeName = node.Name
	for k, q := range node.Status.Allocatable {
		metrics.NodesAllocatable.WithLabelValues(node.Name, nc.Labels[karpv1.NodePoolLabelKey], string(k)).Set(q.AsApproximateFloat64())
	}
	c.setCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
	return reconcile.Result{}, nil
}

// initialize waits for the Node to be Ready with its startup taints gone.
func (c *Controller) initialize(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	node, err := c.node(ctx, nc)
	if err != nil || node == nil {
		return reconcile.Result{}, err
	}
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
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
	if node.Labels[karpv1.NodeInitializedLabelKey] != "true" {
		patch := client.MergeFrom(node.DeepCopy())
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
