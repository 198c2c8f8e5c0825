// Package provisioning turns pending pods into NodeClaims: a batcher gathers the pods the
// scheduler could not place, and the provisioner solves the batch against the cluster's state
// and creates the NodeClaims the solver decides, nominating the pods to them so that the next
// batch does not launch again for the same pods.
package provisioning

import (
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"

	"cmp"
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Provisioner launches capacity for pending pods.
type Provisioner struct {
	client   client.Client
	cluster  *state.Cluster
	cloud    cloudprovider.CloudProvider
	recorder events.EventRecorder
	clock    clock.Clock
	batcher  *Batcher
	// nominationEvents limits the Nominated events, one per pod: a scale-out of a thousand pods
	// would write a thousand Events to an API server busy binding those pods. Upstream Karpenter
	// limits them the same way (5 per second, bursts of 10); the nomination itself is not limited.
	nominationEvents flowcontrol.RateLimiter
	// engine, when set, applies CapacityBudgets and CapacityPolicies to every batch.
	engine *policies.Engine
	// retrying is set while a batch is due for displaced pods (see state.DefaultDisplacedGrace).
	retrying atomic.Bool
}

// WithPolicies makes the provisioner consult the policy engine.
func (p *Provisioner) WithPolicies(e *policies.Engine) *Provisioner {
	p.engine = e
	return p
}

// NewProvisioner builds the provisioner; idle and max are the batch windows.
func NewProvisioner(c client.Client, cluster *state.Cluster, cloud cloudprovider.CloudProvider, recorder events.EventRecorder, clk clock.Clock, idle, maxWindow time.Duration) *Provisioner {
	return &Provisioner{client: c, cluster: cluster, cloud: cloud, recorder: recorder, clock: clk, batcher: NewBatcher(clk, idle, maxWindow),
		nominationEvents: flowcontrol.NewTokenBucketRateLimiterWithClock(NominationEventsPerSecond, NominationEventsBurst, clk)}
}

// The rate and burst of Nominated events.
const (
	NominationEventsPerSecond = 5
	NominationEventsBurst     = 10
)

// nominate records that the pod should schedule on the NodeClaim, and says so in an Event while
// the event rate allows.
func (p *Provisioner) nominate(pod *corev1.Pod, nc *karpv1.NodeClaim) {
	p.cluster.Nominate(pod, nc.Name)
	if p.nominationEvents.TryAccept() {
		p.recorder.Eventf(pod, nc, corev1.EventTypeNormal, "Nominated", "Provisioning", "Pod should schedule on NodeClaim %s", nc.Name)
	}
}

// Register adds the pod trigger and the provisioning loop to the manager.
func (p *Provisioner) Register(mgr ctrl.Manager) error {
	if err := mgr.Add(p); err != nil {
		return err
	}
	provisionable := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && state.Provisionable(pod)
	})
	return ctrl.NewControllerManagedBy(mgr).Named("provisioning.trigger").WithOptions(ratelimit.Options(1)).
		For(&corev1.Pod{}, builder.WithPredicates(provisionable, predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }})).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			pod := &corev1.Pod{}
			if err := p.client.Get(ctx, req.NamespacedName, pod); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			// A pod already nominated is waiting for its node: kube-scheduler marking it again as
			// nodes come up is no new work and must not hold a batch of new pods open, but it
			// opens one, in which the nomination is checked (the pod is displaced when others took
			// its room, or kube-scheduler refused it on its schedulable node).
			switch {
			case !state.Provisionable(pod):
			case p.cluster.Nominated(pod):
				// kube-scheduler marked it again: if its node was schedulable by then, the
				// nomination failed (see state.Cluster.Rejected).
				p.cluster.Rejected(pod)
				p.batcher.Nudge()
			default:
				p.batcher.TriggerFor(pod.UID, state.ReplicaSetOf(pod))
			}
			return reconcile.Result{}, nil
		}))
}

// NeedLeaderElection is true: only the leader launches.
func (p *Provisioner) NeedLeaderElection() bool { return true }

// RetryInterval is how often pods still pending are tried again, for changes no pod event
// announces (a NodeClaim that failed to launch, capacity freed elsewhere, a limit raised).
const RetryInterval = 10 * time.Second

// Start runs batches until ctx ends.
func (p *Provisioner) Start(ctx context.Context) error {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.clock.After(RetryInterval):
				p.batcher.Nudge()
			}
		}
	}()
	for {
		if !p.batcher.Wait(ctx, func(replicaSets []types.NamespacedName) bool { return p.cluster.PodsComing(ctx, replicaSets) }) {
			return nil
		}
		if err := p.Provision(ctx); err != nil {
			log.FromContext(ctx).Error(err, "provisioning")
			// Try again soon: the pods are still pending.
			p.batcher.Trigger()
		}
	}
}

// retryIn opens a batch after d, unless a retry is already waiting.
func (p *Provisioner) retryIn(ctx context.Context, d time.Duration) {
	if !p.retrying.CompareAndSwap(false, true) {
		return
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-p.clock.After(d):
		}
		p.retrying.Store(false)
		p.batcher.Nudge()
	}()
}

// createParallelism is how many NodeClaims of a batch are created at once.
const createParallelism = 32

// Provision solves the pending pods once and creates the NodeClaims decided.
func (p *Provisioner) Provision(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("provisioner")
	snap, err := p.cluster.Snapshot(ctx, p.cloud)
	if err != nil {
		return err
	}
	if snap.Displaced > 0 {
		logger.V(1).Info("pods displaced from their nominated nodes wait for kube-scheduler", "pods", snap.Displaced, "retryAfter", snap.RetryAfter.String())
		p.retryIn(ctx, snap.RetryAfter)
	}
	if len(snap.Pods) == 0 {
		return nil
	}
	start := p.clock.Now()
	res, outcome, err := p.solve(ctx, SolverInput(snap))
	if err != nil {
		return fmt.Errorf("solving: %w", err)
	}
	metrics.SchedulingDuration.Observe(p.clock.Since(start).Seconds())
	logger.Info("solved", "pods", len(snap.Pods), "nodeClaims", len(res.NodeClaims), "unschedulable", len(res.Unschedulable),
		"pricePerHour", res.PricePerHour(), "duration", p.clock.Since(start).String())
	for name, pods := range res.Existing {
		for _, pod := range pods {
			p.cluster.Nominate(pod, name)
		}
	}
	// In parallel: a scale-out of hundreds of NodeClaims created one round trip after the
	// other (each through the validating webhook) took a minute on a busy control plane. A
	// NodeClaim that fails to be created leaves its pods unnominated, for the next batch.
	errs := make([]error, len(res.NodeClaims))
	workqueue.ParallelizeUntil(ctx, createParallelism, len(res.NodeClaims), func(i int) {
		c := res.NodeClaims[i]
		nc := NodeClaimFor(snap.NodePool(c.NodePool), c)
		if err := p.client.Create(ctx, nc); err != nil {
			errs[i] = fmt.Errorf("creating nodeclaim for nodepool %s: %w", c.NodePool, err)
			return
		}
		p.cluster.Created(nc)
		metrics.NodeClaimsCreated.WithLabelValues("provisioning", c.NodePool).Inc()
		logger.Info("created nodeclaim", "NodeClaim", nc.Name, "NodePool", c.NodePool, "instanceType", c.InstanceType.Name,
			"instanceTypes", len(c.InstanceTypes), "pods", len(c.Pods))
		for _, pod := range c.Pods {
			p.nominate(pod, nc)
		}
	})
	failed := 0
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d NodeClaims not created, the first: %w", failed, len(errs), first)
	}
	blocked := p.reportPolicies(ctx, outcome)
	for _, u := range res.Unschedulable {
		if blocked[u.Pod] {
			continue
		}
		p.recorder.Eventf(u.Pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Provisioning", "Failed to schedule pod, %s", u.Reason)
	}
	return nil
}

// SolverInput is the solver's input for a snapshot: its pods, nodes and NodePools, with the
// DaemonSet overhead each NodePool's nodes would carry.
func SolverInput(snap *state.Snapshot) *solver.Input {
	in := &solver.Input{Pods: snap.Pods, Nodes: snap.Nodes, Requests: snap.Requests}
	for _, np := range snap.NodePools {
		// A static NodePool keeps its own size (controllers/static): its nodes take pods as
		// existing nodes, but nothing is launched for them.
		if np.NodePool.IsStatic() {
			continue
		}
		in.NodePools = append(in.NodePools, &solver.NodePool{NodePool: np.NodePool, InstanceTypes: np.InstanceTypes,
			DaemonSetOverhead: solver.DaemonSetOverhead(np.NodePool, snap.DaemonSets), Usage: np.Usage})
	}
	return in
}

// solve runs the batch through the policies when the engine is set, else the solver alone.
func (p *Provisioner) solve(ctx context.Context, in *solver.Input) (*solver.Result, *planner.Outcome, error) {
	if p.engine == nil {
		res, err := solver.Solve(in)
		return res, nil, err
	}
	pl, err := NewPlanner(ctx, p.client, p.engine, p.clock.Now())
	if err != nil {
		return nil, nil, err
	}
	out, err := pl.Solve(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	return out.Result, out, nil
}

// NewPlanner gathers what the policies read from the cluster (namespaces with their labels,
// each namespace's governing CapacityBudget) into a planner over the engine; the provisioner
// and the disruption gate share it.
func NewPlanner(ctx context.Context, c client.Client, engine *policies.Engine, now time.Time) (*planner.Planner, error) {
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	var budgets policyv1.CapacityBudgetList
	if err := c.List(ctx, &budgets); err != nil {
		return nil, fmt.Errorf("listing capacitybudgets: %w", err)
	}
	pl := &planner.Planner{Engine: engine, Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{}, Now: now}
	for _, ns := range nss.Items {
		pl.Namespaces[ns.Name] = policies.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	pl.Budgets = governing(budgets.Items)
	return pl, nil
}

// governing picks each namespace's CapacityBudget: the first by name, when there are several.
func governing(budgets []policyv1.CapacityBudget) map[string]*policyv1.CapacityBudget {
	out := map[string]*policyv1.CapacityBudget{}
	for i := range budgets {
		b := &budgets[i]
		if b.DeletionTimestamp != nil {
			continue
		}
		if cur, ok := out[b.Namespace]; !ok || b.Name < cur.Name {
			out[b.Namespace] = b
		}
	}
	return out
}

// reportPolicies turns a batch's policy outcome into Events and metrics: the pods a Deny
// keeps pending get an Event naming the policy and the numbers; Warn and DryRun results and
// evaluation errors go on the policy objects. It returns the blocked pods.
func (p *Provisioner) reportPolicies(ctx context.Context, out *planner.Outcome) map[*corev1.Pod]bool {
	blocked := map[*corev1.Pod]bool{}
	if out == nil {
		return blocked
	}
	counts := map[string]int{}
	for name := range out.Namespaces {
		counts[name] = 0
	}
	for _, b := range out.Blocked {
		blocked[b.Pod] = true
		counts[b.Pod.Namespace]++
		p.recorder.Eventf(b.Pod, nil, corev1.EventTypeWarning, "PolicyDenied", "Provisioning", "%s", b.Violation.Message)
	}
	for ns, n := range counts {
		metrics.PolicyBlockedPods.WithLabelValues(ns).Set(float64(n))
	}
	p.cluster.SetPolicyBlocked(counts)
	for _, v := range out.Warnings {
		p.eventOn(ctx, v.Source, corev1.EventTypeWarning, "PolicyWarning", v.Message)
	}
	for _, v := range out.DryRun {
		p.eventOn(ctx, v.Source, corev1.EventTypeNormal, "PolicyDryRun", "would deny: "+v.Message)
	}
	for _, e := range out.Errors {
		log.FromContext(ctx).Error(e.Err, "policy evaluation failed", "source", e.Source.String(), "decisionPoint", e.DecisionPoint)
		p.eventOn(ctx, e.Source, corev1.EventTypeWarning, "EvaluationFailed", e.Error())
	}
	return blocked
}

// eventOn records an Event on the policy object a result came from.
func (p *Provisioner) eventOn(ctx context.Context, src policies.Source, kind, reason, msg string) {
	var obj client.Object
	switch src.Kind {
	case "CapacityBudget":
		obj = &policyv1.CapacityBudget{}
	case "CapacityPolicy":
		obj = &policyv1.CapacityPolicy{}
	default:
		return
	}
	if err := p.client.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Name}, obj); err != nil {
		return
	}
	p.recorder.Eventf(obj, nil, kind, reason, "Provisioning", "%s", msg)
}

// NodeClaimFor builds the NodeClaim of a decision (a batch's, or a disruption replacement) from its
// NodePool's template.
func NodeClaimFor(np *karpv1.NodePool, c *solver.NodeClaim) *karpv1.NodeClaim {
	reqs := c.Requirements.Copy()
	// The NodePool is named by the NodeClaim's label; requirements on Karpenter's own label are
	// refused by validation.
	delete(reqs, karpv1.NodePoolLabelKey)
	names := make([]string, 0, len(c.InstanceTypes))
	for _, it := range c.InstanceTypes {
		names = append(names, it.Name)
	}
	sort.Strings(names)
	if o := c.Offering; o.ReservationID != "" {
		// The solver gave this NodeClaim room in a capacity reservation: launch into it and
		// nothing else, so that the next NodeClaim's share of the room is not taken. If the
		// room is gone at launch, the NodeClaim fails and the pods are provisioned again.
		names = []string{c.InstanceType.Name}
		reqs[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeReserved)
		reqs[karpv1.LabelTopologyZone] = scheduling.NewRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, o.Zone)
		reqs[karpv1.LabelCapacityReservationID] = scheduling.NewRequirement(karpv1.LabelCapacityReservationID, corev1.NodeSelectorOpIn, o.ReservationID)
	}
	reqs[karpv1.LabelInstanceType] = scheduling.NewRequirement(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, names...).Intersect(reqsOr(reqs, karpv1.LabelInstanceType))
	labels := map[string]string{karpv1.NodePoolLabelKey: np.Name}
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	annotations := map[string]string{karpv1.NodePoolHashAnnotationKey: np.Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
	for k, v := range np.Spec.Template.Annotations {
		annotations[k] = v
	}
	t := np.Spec.Template.Spec
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%s", np.Name, utilrand.String(5)),
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: ptrTrue()}},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints: t.Taints, StartupTaints: t.StartupTaints,
			Requirements:           reqs.NodeSelectorRequirements(),
			Resources:              karpv1.ResourceRequirements{Requests: c.Requests},
			NodeClassRef:           t.NodeClassRef,
			ExpireAfter:            t.ExpireAfter,
			TerminationGracePeriod: t.TerminationGracePeriod,
		},
	}
}

func reqsOr(rs scheduling.Requirements, key string) *scheduling.Requirement {
	if r, ok := rs[key]; ok {
		return r
	}
	return scheduling.NewRequirement(key, corev1.NodeSelectorOpExists)
}

func ptrTrue() *bool { b := true; return &b }
