// Package nodepool keeps NodePool status: whether its node class is ready, whether it passes
// validation, whether its NodeClaims register (NodeRegistrationHealthy, as upstream's), the
// resources and node count of its NodeClaims, and a Ready condition that sums them up; and
// (HashController) upstream's hash annotations. It writes status and those two annotations
// only: a NodePool's spec and the rest of its metadata belong to Git.
package nodepool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/controllers/state"
)

// Controller reconciles NodePool status.
type Controller struct {
	client  client.Client
	cloud   cloudprovider.CloudProvider
	cluster *state.Cluster
	// validate checks what the CRD's CEL rules cannot say (the validating webhook's checks);
	// nil: nothing more.
	validate func(*karpv1.NodePool) field.ErrorList
}

// WithValidation sets the checks behind the ValidationSucceeded condition: the validating
// webhook's, so that a NodePool admitted while the webhook was not in force says what is
// wrong with it.
func (c *Controller) WithValidation(validate func(*karpv1.NodePool) field.ErrorList) *Controller {
	c.validate = validate
	return c
}

// NewController builds the NodePool status controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, cluster *state.Cluster) *Controller {
	return &Controller{client: c, cloud: cloud, cluster: cluster}
}

// Register watches NodePools, their NodeClaims and their node classes.
func (c *Controller) Register(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("nodepool.status").WithOptions(ratelimit.Options(1)).For(&karpv1.NodePool{}).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if np := o.GetLabels()[karpv1.NodePoolLabelKey]; np != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: np}}}
			}
			return nil
		}))
	for _, nc := range c.cloud.GetSupportedNodeClasses() {
		b = b.Watches(nc, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var pools karpv1.NodePoolList
			if c.client.List(ctx, &pools) != nil {
				return nil
			}
			var out []reconcile.Request
			for _, np := range pools.Items {
				if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
				}
			}
			return out
		}))
	}
	inner := reconcile.AsReconciler(mgr.GetClient(), c)
	return b.Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if err := mgr.GetClient().Get(ctx, req.NamespacedName, &karpv1.NodePool{}); apierrors.IsNotFound(err) {
			ForgetNodePool(req.Name)
			return reconcile.Result{}, nil
		}
		return inner.Reconcile(ctx, req)
	}))
}

// ForgetNodePool removes a deleted NodePool's series, so that a dashboard's sum over
// NodePools does not count one that is gone.
func ForgetNodePool(name string) {
	for _, v := range []*prometheus.GaugeVec{metrics.NodePoolUsage, metrics.NodePoolLimit, metrics.NodePoolCost} {
		v.DeletePartialMatch(prometheus.Labels{"nodepool": name})
	}
}

// Reconcile computes the status and writes it once.
func (c *Controller) Reconcile(ctx context.Context, np *karpv1.NodePool) (reconcile.Result, error) {
	if !c.cluster.Synced() {
		// Counted on part of the cluster, the status would be wrong for a moment.
		return ratelimit.Again(), nil
	}
	before := np.DeepCopy()
	if err := c.nodeClassReadiness(ctx, np); err != nil {
		return reconcile.Result{}, err
	}
	if err := c.counters(ctx, np); err != nil {
		return reconcile.Result{}, err
	}
	c.validation(np)
	c.registrationHealth(np)
	np.Status.ObservedGeneration = np.Generation
	ready := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeClassReady)
	valid := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeValidationSucceeded)
	switch {
	case ready == nil || ready.Status != metav1.ConditionTrue:
		msg := "node class is not ready"
		if ready != nil {
			msg = ready.Message
		}
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "NodeClassNotReady", Message: msg, ObservedGeneration: np.Generation})
	case valid.Status != metav1.ConditionTrue:
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "ValidationFailed", Message: valid.Message, ObservedGeneration: np.Generation})
	default:
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: np.Generation})
	}
	if equality.Semantic.DeepEqual(before.Status, np.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(c.client.Status().Patch(ctx, np, client.MergeFrom(before)))
}

// validation sets ValidationSucceeded from the validating webhook's checks.
func (c *Controller) validation(np *karpv1.NodePool) {
	cond := metav1.Condition{Type: karpv1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: "ValidationSucceeded", ObservedGeneration: np.Generation}
	if c.validate != nil {
		if errs := c.validate(np); len(errs) > 0 {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ValidationFailed", errs.ToAggregate().Error()
		}
	}
	meta.SetStatusCondition(&np.Status.Conditions, cond)
}

// registrationHealth sets NodeRegistrationHealthy, as upstream's: Unknown for a new NodePool
// and after each change of its spec (what failed before says nothing of what launches now),
// then False while its latest NodeClaim to finish failed to launch or register in time, and
// True once one registers. It is not part of Ready: the NodePool still launches.
func (c *Controller) registrationHealth(np *karpv1.NodePool) {
	cond := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeNodeRegistrationHealthy)
	set := func(status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeNodeRegistrationHealthy, Status: status, Reason: reason, Message: msg, ObservedGeneration: np.Generation})
	}
	if cond == nil || cond.ObservedGeneration != np.Generation {
		if cond != nil {
			c.cluster.ForgetRegistrations(np.Name)
		}
		set(metav1.ConditionUnknown, "AwaitingRegistration", "no NodeClaim of this generation has finished launching yet")
		return
	}
	last, ok := c.cluster.LastRegistration(np.Name)
	switch {
	case !ok:
	case last.Failed:
		set(metav1.ConditionFalse, "RegistrationFailed", last.Message)
	default:
		set(metav1.ConditionTrue, "NodeRegistrationHealthy", "")
	}
}

// nodeClassReadiness mirrors the node class's Ready condition.
func (c *Controller) nodeClassReadiness(ctx context.Context, np *karpv1.NodePool) error {
	set := func(status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeNodeClassReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: np.Generation})
	}
	ref := np.Spec.Template.Spec.NodeClassRef
	var nodeClass client.Object
	for _, nc := range c.cloud.GetSupportedNodeClasses() {
		gvk, err := c.client.GroupVersionKindFor(nc)
		if err == nil && ref != nil && gvk.Group == ref.Group && gvk.Kind == ref.Kind {
			nodeClass = nc.DeepCopyObject().(client.Object)
		}
	}
	if nodeClass == nil {
		set(metav1.ConditionFalse, "NodeClassNotSupported", fmt.Sprintf("the %s cloud provider does not serve %v", c.cloud.Name(), ref))
		return nil
	}
	if err := c.client.Get(ctx, client.ObjectKey{Name: ref.Name}, nodeClass); err != nil {
		if apierrors.IsNotFound(err) {
			set(metav1.ConditionFalse, "NodeClassNotFound", fmt.Sprintf("%s %s not found", ref.Kind, ref.Name))
			return nil
		}
		return err
	}
	u, err := runtimeConditions(nodeClass)
	if err != nil {
		return err
	}
	if cond := meta.FindStatusCondition(u, karpv1.ConditionTypeReady); cond != nil && cond.Status == metav1.ConditionTrue {
		set(metav1.ConditionTrue, "NodeClassReady", "")
	} else {
		msg := fmt.Sprintf("%s %s is not ready", ref.Kind, ref.Name)
		if cond != nil && cond.Message != "" {
			msg += ": " + cond.Message
		}
		set(metav1.ConditionFalse, "NodeClassNotReady", msg)
	}
	return nil
}

// runtimeConditions reads status.conditions of any node class.
func runtimeConditions(o client.Object) ([]metav1.Condition, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var s struct {
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return s.Status.Conditions, nil
}

// counters are what the NodePool's nodes and NodeClaims hold, with their count: its usage
// against its limits, by the definition the provisioner and disruption use
// (state.Cluster.NodePoolUsage).
func (c *Controller) counters(ctx context.Context, np *karpv1.NodePool) error {
	total, cost := c.cluster.NodePoolUsage(ctx, c.cloud, np)
	metrics.NodePoolCost.WithLabelValues(np.Name).Set(cost)
	nodes := total["nodes"]
	count := nodes.Value()
	for k, q := range total {
		metrics.NodePoolUsage.WithLabelValues(np.Name, string(k)).Set(q.AsApproximateFloat64())
	}
	// A limit removed from the spec leaves no series behind.
	metrics.NodePoolLimit.DeletePartialMatch(prometheus.Labels{"nodepool": np.Name})
	for k, q := range np.Spec.Limits {
		metrics.NodePoolLimit.WithLabelValues(np.Name, string(k)).Set(q.AsApproximateFloat64())
	}
	np.Status.Resources = total
	np.Status.Nodes = &count
	return nil
}
