// Package pod exports upstream Karpenter's pod metrics: karpenter_pods_state (one series per
// pod, with where it runs), the time pods wait to be bound and to start while they wait
// (karpenter_pods_unbound_time_seconds, karpenter_pods_unstarted_time_seconds), and, once
// they are bound and ready, how long that took (karpenter_pods_bound_duration_seconds,
// karpenter_pods_startup_duration_seconds); with the provisioner's decisions, the same counted
// from the pod's first placement, and how long the provisioner took to decide
// (karpenter_pods_provisioning_*). A pod's series go when the pod does. It only reads the API
// server, through the cache, and the decisions; it writes nothing but metrics.
package pod

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Refresh is how often the waiting-time gauges of a pod that waits are brought up to date,
// as upstream's.
const Refresh = 30 * time.Second

// Decisions are the provisioner's scheduling decisions per pod (state.Cluster's).
type Decisions interface {
	Decision(uid types.UID) (state.PodDecision, bool)
	ForgetDecision(uid types.UID)
}

// Controller keeps each pod's series.
type Controller struct {
	client    client.Client
	clock     clock.Clock
	decisions Decisions

	mu   sync.Mutex
	pods map[types.NamespacedName]*tracked
}

// tracked is what the controller remembers of a pod: its state series' labels, and whether
// it was seen unstarted and unbound (their durations are observed when that ends).
type tracked struct {
	uid                types.UID
	state              prometheus.Labels
	unstarted, unbound bool
}

// NewController builds the pod metrics controller.
func NewController(c client.Client, clk clock.Clock) *Controller {
	return &Controller{client: c, clock: clk, pods: map[types.NamespacedName]*tracked{}}
}

// WithDecisions adds upstream's provisioning-latency series (karpenter_pods_provisioning_*),
// counted from the decisions the provisioner of this process recorded.
func (c *Controller) WithDecisions(d Decisions) *Controller {
	c.decisions = d
	return c
}

// Register watches pods.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("metrics.pod").WithOptions(ratelimit.Options(2)).For(&corev1.Pod{}).Complete(c)
}

// Reconcile brings the pod's series up to date, or removes them when it is gone.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := c.client.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	labels, err := c.stateLabels(ctx, pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.pods[req.NamespacedName]
	if t != nil && t.uid != pod.UID {
		// A new pod of the same name: the old one's series go with it.
		c.drop(req.NamespacedName, t)
		t = nil
	}
	if t == nil {
		t = &tracked{uid: pod.UID}
		c.pods[req.NamespacedName] = t
	}
	if !maps.Equal(t.state, labels) {
		if t.state != nil {
			metrics.PodsState.Delete(t.state)
		}
		metrics.PodsState.With(labels).Set(1)
		t.state = labels
	}
	decision := c.decision(pod)
	waiting := c.startup(pod, t, decision.Schedulable)
	if c.binding(pod, t, decision.Schedulable) {
		waiting = true
	}
	if c.undecided(pod, decision) {
		waiting = true
	}
	if waiting {
		return reconcile.Result{RequeueAfter: Refresh}, nil
	}
	return reconcile.Result{}, nil
}

// decision is what this process's provisioner decided about the pod (nothing without one).
func (c *Controller) decision(pod *corev1.Pod) state.PodDecision {
	if c.decisions == nil {
		return state.PodDecision{}
	}
	d, _ := c.decisions.Decision(pod.UID)
	return d
}

// startup sets the unstarted time of a pod seen pending until it is ready, then observes its
// startup duration, both also from its first placement when the provisioner placed it
// (placed non-zero); it reports whether the pod is still waiting.
func (c *Controller) startup(pod *corev1.Pod, t *tracked, placed time.Time) bool {
	name := prometheus.Labels{"name": pod.Name, "namespace": pod.Namespace}
	ready := condition(pod, corev1.PodReady)
	switch {
	case pod.Status.Phase == corev1.PodPending || (t.unstarted && ready == nil && !scheduling.IsTerminal(pod)):
		t.unstarted = true
		metrics.PodsUnstartedTime.With(name).Set(c.clock.Since(pod.CreationTimestamp.Time).Seconds())
		if placed.IsZero() {
			metrics.PodsProvisioningUnstartedTime.Delete(name)
		} else {
			metrics.PodsProvisioningUnstartedTime.With(name).Set(c.clock.Since(placed).Seconds())
		}
		return true
	case t.unstarted && ready != nil:
		metrics.PodsUnstartedTime.Delete(name)
		metrics.PodsProvisioningUnstartedTime.Delete(name)
		metrics.PodsStartupDuration.Observe(ready.LastTransitionTime.Sub(pod.CreationTimestamp.Time).Seconds())
		if !placed.IsZero() {
			metrics.PodsProvisioningStartupDuration.Observe(ready.LastTransitionTime.Sub(placed).Seconds())
		}
		t.unstarted = false
		c.forgetDecision(pod)
	case t.unstarted:
		// Terminal without being ready: no startup to observe (it would be negative).
		metrics.PodsUnstartedTime.Delete(name)
		metrics.PodsProvisioningUnstartedTime.Delete(name)
		t.unstarted = false
		c.forgetDecision(pod)
	}
	return false
}

// forgetDecision drops the provisioner's record of a pod that started or ended: nothing is
// measured from it any more.
func (c *Controller) forgetDecision(pod *corev1.Pod) {
	if c.decisions != nil {
		c.decisions.ForgetDecision(pod.UID)
	}
}

// binding sets the unbound time of a pending pod kube-scheduler has not bound, then observes
// how long binding took, both also from its first placement when the provisioner placed it;
// it reports whether the pod is still waiting.
func (c *Controller) binding(pod *corev1.Pod, t *tracked, placed time.Time) bool {
	dra := strconv.FormatBool(len(pod.Spec.ResourceClaims) > 0)
	scheduled := condition(pod, corev1.PodScheduled)
	name := prometheus.Labels{"name": pod.Name, "namespace": pod.Namespace}
	withDRA := prometheus.Labels{"name": pod.Name, "namespace": pod.Namespace, "dynamic_resources": dra}
	switch {
	case scheduled == nil && pod.Status.Phase == corev1.PodPending:
		t.unbound = true
		metrics.PodsUnboundTime.With(withDRA).Set(c.clock.Since(pod.CreationTimestamp.Time).Seconds())
		if placed.IsZero() {
			metrics.PodsProvisioningUnboundTime.DeletePartialMatch(name)
		} else {
			metrics.PodsProvisioningUnboundTime.With(withDRA).Set(c.clock.Since(placed).Seconds())
		}
		return true
	case t.unbound && scheduled != nil:
		metrics.PodsUnboundTime.DeletePartialMatch(name)
		metrics.PodsProvisioningUnboundTime.DeletePartialMatch(name)
		metrics.PodsBoundDuration.WithLabelValues(dra).Observe(scheduled.LastTransitionTime.Sub(pod.CreationTimestamp.Time).Seconds())
		if !placed.IsZero() {
			metrics.PodsProvisioningBoundDuration.WithLabelValues(dra).Observe(scheduled.LastTransitionTime.Sub(placed).Seconds())
		}
		t.unbound = false
	case t.unbound && pod.Status.Phase != corev1.PodPending:
		metrics.PodsUnboundTime.DeletePartialMatch(name)
		metrics.PodsProvisioningUnboundTime.DeletePartialMatch(name)
		t.unbound = false
	}
	return false
}

// undecided sets how long a pod the provisioner saw pending has waited for a decision, until
// a batch decided on it or it is bound; it reports whether the pod is still waiting.
func (c *Controller) undecided(pod *corev1.Pod, d state.PodDecision) bool {
	name := prometheus.Labels{"name": pod.Name, "namespace": pod.Namespace}
	if d.Seen.IsZero() || !d.Decided.IsZero() || pod.Spec.NodeName != "" || condition(pod, corev1.PodScheduled) != nil || scheduling.IsTerminal(pod) {
		metrics.PodsSchedulingUndecidedTime.Delete(name)
		return false
	}
	metrics.PodsSchedulingUndecidedTime.With(name).Set(c.clock.Since(d.Seen).Seconds())
	return true
}

// condition is the pod's condition of the type when it is True, else nil.
func condition(pod *corev1.Pod, kind corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == kind && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// forget removes a pod's series.
func (c *Controller) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.pods[key]; t != nil {
		c.drop(key, t)
	}
}

func (c *Controller) drop(key types.NamespacedName, t *tracked) {
	if t.state != nil {
		metrics.PodsState.Delete(t.state)
	}
	name := prometheus.Labels{"name": key.Name, "namespace": key.Namespace}
	metrics.PodsUnstartedTime.Delete(name)
	metrics.PodsUnboundTime.DeletePartialMatch(name)
	metrics.PodsProvisioningUnstartedTime.Delete(name)
	metrics.PodsProvisioningUnboundTime.DeletePartialMatch(name)
	metrics.PodsSchedulingUndecidedTime.Delete(name)
	delete(c.pods, key)
}

// stateLabels are the pod's karpenter_pods_state labels, as upstream's: its name, namespace,
// first owner (as a self link), node, phase, readiness, and its node's NodePool, zone,
// architecture, capacity type and instance type.
func (c *Controller) stateLabels(ctx context.Context, pod *corev1.Pod) (prometheus.Labels, error) {
	owner := ""
	if len(pod.OwnerReferences) > 0 {
		o := pod.OwnerReferences[0]
		owner = fmt.Sprintf("/apis/%s/namespaces/%s/%ss/%s", o.APIVersion, pod.Namespace, strings.ToLower(o.Kind), o.Name)
	}
	node := &corev1.Node{}
	if pod.Spec.NodeName != "" {
		if err := c.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
	}
	return prometheus.Labels{
		"name": pod.Name, "namespace": pod.Namespace, "owner": owner, "node": pod.Spec.NodeName,
		"scheduled": strconv.FormatBool(pod.Spec.NodeName != ""), "phase": string(pod.Status.Phase),
		"ready":    strconv.FormatBool(condition(pod, corev1.PodReady) != nil),
		"nodepool": node.Labels[karpv1.NodePoolLabelKey], "zone": node.Labels[corev1.LabelTopologyZone],
		"arch": node.Labels[corev1.LabelArchStable], "capacity_type": node.Labels[karpv1.CapacityTypeLabelKey],
		"instance_type": node.Labels[corev1.LabelInstanceTypeStable],
		"managed":       strconv.FormatBool(node.Labels[karpv1.NodePoolLabelKey] != ""),
	}, nil
}
