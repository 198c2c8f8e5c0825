// Package static keeps static NodePools (spec.replicas) at their size: it launches NodeClaims
// until the pool has replicas of them, removes the cheapest to disrupt first when it has
// more, and replaces drifted ones one for one, the replacement launched and initialized
// before the old one is deleted, within the pool's Drifted budget (with TerminateFirstDrift,
// the old one goes first where no replacement can launch beside it: terminatefirst.go). Expired NodeClaims are
// deleted by controllers/nodeclaim/expiration, as any NodeClaim's; this controller then
// launches up to replicas again. It is the only writer of a static pool's NodeClaims; provisioning never launches
// for a static pool and disruption never picks its nodes (docs/disruption.md, "Static
// NodePools"). It does not schedule pods: kube-scheduler binds them to the nodes.
package static

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Recheck is how often a static pool is looked at while a replacement initializes or an
// expiry is ahead.
const Recheck = 5 * time.Second

// CapacityRecheck is how soon a static pool that cannot launch a node looks again. What it
// waits for (a capacity reservation slot freed, an offering available again) is outside the
// cluster and no watch event brings it: a fixed recheck, not the error backoff, which grows
// to five minutes and would leave a freed slot unused that long.
const CapacityRecheck = 30 * time.Second

// Controller reconciles static NodePools.
type Controller struct {
	client client.Client
	// reader lists NodeClaims from the API server, not the cache: a NodeClaim just created
	// must be counted at the next reconcile, or the pool would launch it twice.
	reader   client.Reader
	cloud    cloudprovider.CloudProvider
	recorder events.EventRecorder
	clock    clock.Clock
	// overlays, when set, applies NodeOverlays to the pool's instance types (the NodeOverlay
	// feature gate), as the provisioner's snapshot and the launch do.
	overlays cloudprovider.LaunchOverlays
	// terminateFirst is the TerminateFirstDrift feature gate: a drifted node that cannot be
	// replaced first goes first.
	terminateFirst bool
}

// NewController builds the static NodePool controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, recorder events.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{client: c, cloud: cloud, recorder: recorder, clock: clk}
}

// WithOverlays makes the pool's NodeClaims chosen, and marked, at overlaid prices.
func (c *Controller) WithOverlays(o cloudprovider.LaunchOverlays) *Controller {
	c.overlays = o
	return c
}

// WithTerminateFirstDrift turns on upstream's terminate-first for drift (the
// TerminateFirstDrift feature gate): a drifted node of a pool at its limits.nodes, or whose
// capacity reservation slot is the only room a replacement could take, is deleted first and
// the pool refilled once it is gone.
func (c *Controller) WithTerminateFirstDrift(on bool) *Controller {
	c.terminateFirst = on
	return c
}

// Register watches NodePools and their NodeClaims.
func (c *Controller) Register(mgr ctrl.Manager) error {
	c.reader = mgr.GetAPIReader()
	byPool := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if pool := o.GetLabels()[karpv1.NodePoolLabelKey]; pool != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pool}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).Named("nodepool.static").WithOptions(ratelimit.Options(1)).
		For(&karpv1.NodePool{}).
		Watches(&karpv1.NodeClaim{}, byPool).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile brings one static NodePool to its size, one step at a time.
func (c *Controller) Reconcile(ctx context.Context, np *karpv1.NodePool) (reconcile.Result, error) {
	if !np.IsStatic() || np.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	var list karpv1.NodeClaimList
	reader := c.reader
	if reader == nil {
		reader = c.client
	}
	if err := reader.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return reconcile.Result{}, err
	}
	s := c.survey(np, list.Items)
	if len(s.Active) > s.Desired || len(s.Drifted) > 0 {
		// Which nodes may go depends on their pods and do-not-disrupt: listed only when a
		// node could go, not on every recheck.
		pods, protected, err := c.podsByNode(ctx, np)
		if err != nil {
			return reconcile.Result{}, err
		}
		s.Pods = pods
		s.protect(protected)
	}
	if c.terminateFirst && len(s.Drifted) > 0 && refillable(np) {
		if err := c.surveyLaunch(ctx, np, &s); err != nil {
			return reconcile.Result{}, err
		}
	}
	act := Plan(s)
	logger := log.FromContext(ctx).WithValues("NodePool", np.Name, "replicas", s.Desired, "active", len(s.Active))
	switch {
	case act.Create > 0:
		if err := c.create(ctx, np, act.Create); err != nil {
			var none *cannotLaunch
			if !errors.As(err, &none) {
				return reconcile.Result{}, err
			}
			// Upstream's warning for a NodePool no instance type can launch for; the recorder
			// folds the one repeated at every recheck into a series.
			c.recorder.Eventf(np, nil, corev1.EventTypeWarning, "NoCompatibleInstanceTypes", "Static",
				"NodePool requirements filtered out all compatible available instance types: %s", none.why)
			logger.Info("static nodepool cannot launch a node now", "want", act.Create, "why", none.why, "recheck", CapacityRecheck.String())
			return reconcile.Result{RequeueAfter: CapacityRecheck}, nil
		}
		logger.Info("launching static nodeclaims", "count", act.Create, "why", act.Why)
	case len(act.Delete) > 0:
		decision, reason := "delete", strings.ToLower(staticReason(act.Why))
		if act.TerminateFirst != "" {
			decision = methods.TerminateFirstDecision
		}
		for _, nc := range act.Delete {
			if err := c.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err)
			}
			c.recorder.Eventf(nc, nil, corev1.EventTypeNormal, "DisruptionTerminating", "Static", "Static NodePool %s: %s", np.Name, act.Why)
			metrics.DisruptionDecisions.WithLabelValues(decision, reason, "static").Inc()
			metrics.DisruptionDecisionsByNodePool.WithLabelValues(np.Name, decision, reason, "static").Inc()
			if act.TerminateFirst != "" {
				metrics.DisruptionTerminateFirstDecisions.WithLabelValues(np.Name, reason, act.TerminateFirst).Inc()
			}
		}
		logger.Info("removing static nodeclaims", "count", len(act.Delete), "why", act.Why, "terminateFirst", act.TerminateFirst)
	}
	for _, nc := range act.Blocked {
		// Upstream's DisruptionBlocked, on the NodeClaim and its Node. The recorder folds the
		// same event repeated at every recheck into one series.
		c.recorder.Eventf(nc, nil, corev1.EventTypeNormal, "DisruptionBlocked", "Static", "%s", act.BlockedWhy)
		if nc.Status.NodeName != "" {
			node := &corev1.Node{}
			if err := c.client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err == nil {
				c.recorder.Eventf(node, nil, corev1.EventTypeNormal, "DisruptionBlocked", "Static", "%s", act.BlockedWhy)
			}
		}
	}
	if act.Wait {
		return reconcile.Result{RequeueAfter: Recheck}, nil
	}
	return reconcile.Result{}, nil
}

func staticReason(why string) string {
	switch why {
	case WhyDrifted, WhyTerminateFirst:
		return string(methods.ReasonDrifted)
	}
	return "ScaleDown"
}

// Survey is what the plan is made from: a static pool's NodeClaims, sorted oldest first.
type Survey struct {
	Desired int
	// Limit is the pool's limits.nodes, nil without one: the NodeClaims being deleted count
	// against it until they are gone, as upstream's, so a replacement or a scale-up waits for
	// them when the pool is at its limit.
	Limit *int
	// Active are the NodeClaims not being deleted; Deleting counts those being deleted.
	Active   []*karpv1.NodeClaim
	Deleting int
	// Drifted are the initialized active NodeClaims to replace, oldest first.
	Drifted []*karpv1.NodeClaim
	// Uninitialized counts active NodeClaims not yet Initialized.
	Uninitialized int
	// DriftAllowed is how many of the pool's nodes its Drifted budget lets be disrupted now.
	DriftAllowed int
	// Pods counts, by node name, the pods that would need another node.
	Pods map[string]int
	// Protected are the NodeClaims that must not be picked: karpenter.sh/do-not-disrupt on
	// the NodeClaim, its Node, or one of its pods, as upstream's static pools honour it.
	Protected map[*karpv1.NodeClaim]bool
	// TerminateFirst: the TerminateFirstDrift gate is on and the pool can refill (Ready, not
	// being deleted): a drifted node that cannot be replaced first goes first.
	TerminateFirst bool
	// CannotLaunch says why the pool cannot launch a node now ("" when it can, or unknown);
	// FreesRoom are the drifted NodeClaims whose capacity reservation slot, once free, would
	// let it. Both are surveyed with TerminateFirst only.
	CannotLaunch string
	FreesRoom    map[*karpv1.NodeClaim]bool
}

// protect marks the NodeClaims whose nodes are protected (by node name), or that carry
// do-not-disrupt themselves, and leaves them out of the drifted ones to replace.
func (s *Survey) protect(nodes map[string]bool) {
	s.Protected = map[*karpv1.NodeClaim]bool{}
	for _, nc := range s.Active {
		if nodes[nc.Status.NodeName] || nc.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			s.Protected[nc] = true
		}
	}
	var drifted []*karpv1.NodeClaim
	for _, nc := range s.Drifted {
		if !s.Protected[nc] {
			drifted = append(drifted, nc)
		}
	}
	s.Drifted = drifted
}

func (c *Controller) survey(np *karpv1.NodePool, claims []karpv1.NodeClaim) Survey {
	now := c.clock.Now()
	s := Survey{Desired: int(*np.Spec.Replicas)}
	if limit, ok := np.Spec.Limits[corev1.ResourceName("nodes")]; ok {
		l := int(limit.Value())
		s.Limit = &l
		s.Desired = min(s.Desired, l)
	}
	sort.Slice(claims, func(i, j int) bool {
		if !claims[i].CreationTimestamp.Equal(&claims[j].CreationTimestamp) {
			return claims[i].CreationTimestamp.Before(&claims[j].CreationTimestamp)
		}
		return claims[i].Name < claims[j].Name
	})
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			s.Deleting++
			continue
		}
		s.Active = append(s.Active, nc)
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			s.Uninitialized++
			continue
		}
		if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDrifted) {
			s.Drifted = append(s.Drifted, nc)
		}
	}
	s.DriftAllowed = methods.AllowedDisruptions(np, methods.ReasonDrifted, now, len(s.Active)+s.Deleting, s.Deleting)
	return s
}

// Why an Action acts.
const (
	WhyScaleUp   = "scaling up to replicas"
	WhyScaleDown = "scaling down to replicas"
	WhyDrifted   = "replacing a drifted node"
	// WhyTerminateFirst is why a drifted node goes before its replacement launches.
	WhyTerminateFirst = "terminating a drifted node first: no replacement can launch beside it"
	// WhyAtLimit is why a drifted node of a pool at its limits.nodes stays: its replacement
	// would be a node over the limit (upstream's DisruptionBlocked message).
	WhyAtLimit = "static NodePool is at its node limit and cannot stage a replacement"
)

// Action is the next step for a static pool: create some NodeClaims, or delete some, and
// whether to look again soon (a replacement is initializing). Blocked are drifted NodeClaims
// the budget would let go that cannot be replaced, with why.
type Action struct {
	Create     int
	Delete     []*karpv1.NodeClaim
	Why        string
	Wait       bool
	Blocked    []*karpv1.NodeClaim
	BlockedWhy string
	// TerminateFirst, when Delete goes before any replacement, says why it could not launch
	// first (methods.TerminateFirstStaticAtLimit or TerminateFirstNoReservedCapacity).
	TerminateFirst string
}

// Plan is the next step, pure. Too few NodeClaims: launch the rest. Too many: remove the
// excess, stale ones first, then those whose nodes run the fewest pods, then the newest. At
// size with a drifted node (the oldest first) and nothing initializing: surge by one, its
// replacement, within the pool's Drifted budget; once that is initialized, the drifted one
// goes. A pool that cannot surge (at its limits.nodes, or unable to launch: surveyed with
// TerminateFirst only) terminates first under TerminateFirstDrift, else reports the drifted
// nodes blocked.
func Plan(s Survey) Action {
	stale := s.Drifted
	canRoll := len(s.Drifted) > 0 && s.DriftAllowed > 0
	why := WhyDrifted
	surge := 0
	if canRoll {
		surge = 1
	}
	// room is how many NodeClaims the node limit lets exist beside the active and deleting ones.
	room := math.MaxInt
	if s.Limit != nil {
		room = *s.Limit - len(s.Active) - s.Deleting
	}
	switch n := len(s.Active); {
	case n < s.Desired:
		if create := min(s.Desired-n, room); create > 0 {
			return Action{Create: create, Why: WhyScaleUp, Wait: true}
		}
		// At the limit with NodeClaims still being deleted: they free room when they go.
		return Action{Wait: true}
	case n > s.Desired+surge:
		if del := cheapestToDisrupt(s.Active, stale, s.Pods, s.Protected, n-s.Desired); len(del) > 0 {
			return Action{Delete: del, Why: WhyScaleDown}
		}
		// Every node over the size is protected: the pool stays over it until one is not.
		return Action{Wait: true}
	case n == s.Desired+1 && canRoll:
		if s.Uninitialized > 0 {
			return Action{Wait: true}
		}
		return Action{Delete: stale[:1], Why: why, Wait: true}
	case n == s.Desired && canRoll && s.Uninitialized == 0:
		k := min(s.DriftAllowed, len(stale))
		if s.CannotLaunch != "" {
			return terminateFirstForRoom(s, k)
		}
		if s.Limit != nil && n >= *s.Limit {
			// At the limit: no replacement can be staged beside the node. Under
			// TerminateFirstDrift the nodes the budget allows go first and the pool refills;
			// else they stay until the limit or replicas change.
			if s.TerminateFirst {
				return Action{Delete: stale[:k], Why: WhyTerminateFirst, TerminateFirst: methods.TerminateFirstStaticAtLimit, Wait: true}
			}
			return Action{Wait: true, Blocked: stale[:k], BlockedWhy: WhyAtLimit}
		}
		if room < 1 {
			// The last replaced node is still going; its room comes back when it is gone.
			return Action{Wait: true}
		}
		return Action{Create: 1, Why: why, Wait: true}
	}
	return Action{Wait: s.Uninitialized > 0 || len(stale) > 0}
}

// cheapestToDisrupt picks n of the NodeClaims to remove: stale ones first, then those whose
// nodes run the fewest pods to reschedule, then the newest.
func cheapestToDisrupt(active, stale []*karpv1.NodeClaim, pods map[string]int, protected map[*karpv1.NodeClaim]bool, n int) []*karpv1.NodeClaim {
	isStale := map[*karpv1.NodeClaim]bool{}
	for _, nc := range stale {
		isStale[nc] = true
	}
	var out []*karpv1.NodeClaim
	for _, nc := range active {
		if !protected[nc] {
			out = append(out, nc)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		// As upstream's: NodeClaims not launched yet, then empty nodes, then the cheapest to
		// disrupt (drifted ones first here, then the fewest pods, then the newest).
		if li, lj := out[i].Status.ProviderID != "", out[j].Status.ProviderID != ""; li != lj {
			return !li
		}
		pi, pj := pods[out[i].Status.NodeName], pods[out[j].Status.NodeName]
		if (pi == 0) != (pj == 0) {
			return pi == 0
		}
		if isStale[out[i]] != isStale[out[j]] {
			return isStale[out[i]]
		}
		if pi != pj {
			return pi < pj
		}
		return out[j].CreationTimestamp.Before(&out[i].CreationTimestamp)
	})
	return out[:min(n, len(out))]
}

// podsByNode counts, per node, the pods that would need another node: not DaemonSet, mirror
// or finished pods; and names the pool's nodes that do-not-disrupt protects, on the node or on
// one of its pods.
func (c *Controller) podsByNode(ctx context.Context, np *karpv1.NodePool) (map[string]int, map[string]bool, error) {
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods); err != nil {
		return nil, nil, err
	}
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return nil, nil, err
	}
	out, protected := map[string]int{}, map[string]bool{}
	for i := range nodes.Items {
		if nodes.Items[i].Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" {
			protected[nodes.Items[i].Name] = true
		}
	}
	now := c.clock.Now()
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || !scheduling.IsReschedulable(p) {
			continue
		}
		out[p.Spec.NodeName]++
		if holds, _ := scheduling.DoNotDisrupt(p, now); holds {
			protected[p.Spec.NodeName] = true
		}
	}
	return out, protected, nil
}

// instanceTypes are the pool's instance types, with the NodeOverlays when they apply.
func (c *Controller) instanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	its, err := c.cloud.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, fmt.Errorf("instance types of nodepool %s: %w", np.Name, err)
	}
	if c.overlays != nil {
		its = c.overlays(np.Name, its)
	}
	return its, nil
}

// create launches n NodeClaims from the pool's template: the cheapest instance types its
// requirements allow, as the solver picks them for an empty node with the DaemonSets'
// overhead.
func (c *Controller) create(ctx context.Context, np *karpv1.NodePool, n int) error {
	its, err := c.instanceTypes(ctx, np)
	if err != nil {
		return err
	}
	shape, err := Shape(np, its)
	if err != nil {
		return &cannotLaunch{why: err.Error()}
	}
	for range n {
		nc := solver.NodeClaimFor(np, shape)
		if err := c.client.Create(ctx, nc); err != nil {
			return fmt.Errorf("creating a nodeclaim for static nodepool %s: %w", np.Name, err)
		}
		metrics.Created(metrics.ProvisionedReason, nc)
	}
	return nil
}

// cannotLaunch is create's error when no instance type and offering of the pool's can launch
// a node now (the solver's reason in why).
type cannotLaunch struct{ why string }

func (e *cannotLaunch) Error() string { return "static nodepool cannot launch a node: " + e.why }

// Shape is the NodeClaim a static pool launches: the solver's choice for one pod that
// requests nothing, on the pool alone, treated as dynamic.
func Shape(np *karpv1.NodePool, its []*cloudprovider.InstanceType) (*solver.NodeClaim, error) {
	return shapeFreeing(np, its, nil)
}

// shapeFreeing is Shape with capacity reservation slots counted as free (freed, by
// reservation ID): the node the pool could launch once a node of its own in that
// reservation is gone.
func shapeFreeing(np *karpv1.NodePool, its []*cloudprovider.InstanceType, freed map[string]int) (*solver.NodeClaim, error) {
	dynamic := np.DeepCopy()
	dynamic.Spec.Replicas = nil
	dynamic.Spec.Limits = nil
	placeholder := &corev1.Pod{}
	placeholder.Name, placeholder.Namespace, placeholder.UID = "static-"+np.Name, "kube-system", types.UID("static-"+np.Name)
	placeholder.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: np.Name}
	placeholder.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	res, err := solver.Solve(&solver.Input{Pods: []*corev1.Pod{placeholder},
		NodePools: []*solver.NodePool{{NodePool: dynamic, InstanceTypes: its}}, Requests: scheduling.NewPodRequestCache(), FreedReservations: freed})
	if err != nil {
		return nil, err
	}
	if len(res.NodeClaims) != 1 {
		why := "no instance type fits its requirements"
		for _, u := range res.Unschedulable {
			why = u.Reason
		}
		return nil, fmt.Errorf("static nodepool %s cannot launch a node: %s", np.Name, why)
	}
	return res.NodeClaims[0], nil
}
