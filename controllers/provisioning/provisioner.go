// Package provisioning turns pending pods into NodeClaims: a batcher gathers the pods the
// scheduler could not place, and the provisioner solves the batch against the cluster's state
// and creates the NodeClaims the solver decides, nominating the pods to them so that the next
// batch does not launch again for the same pods.
package provisioning

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
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
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Provisioner launches capacity for pending pods.
type Provisioner struct {
	// scheduling are the policies every solve runs under.
	scheduling solver.Policies
	// incompatibleTold is when each NodePool was last warned NoCompatibleInstanceTypes.
	incompatibleMu   sync.Mutex
	incompatibleTold map[string]time.Time
	client           client.Client
	cluster          *state.Cluster
	cloud            cloudprovider.CloudProvider
	recorder         events.EventRecorder
	clock            clock.Clock
	batcher          *Batcher
	// nominationEvents limits the Nominated events, one per pod: a scale-out of a thousand pods
	// would write a thousand Events to an API server busy binding those pods. Upstream Karpenter
	// limits them the same way (5 per second, bursts of 10); the nomination itself is not limited.
	nominationEvents flowcontrol.RateLimiter
	// engine, when set, applies CapacityBudgets and CapacityPolicies to every batch.
	engine *policies.Engine
	// retrying is set while a batch is due for displaced pods (see state.DefaultDisplacedGrace).
	retrying atomic.Bool
	// buffers, when set, is told what each batch did with the CapacityBuffers' virtual pods.
	buffers func(map[types.NamespacedName]scheduling.BufferPlacement)
}

// WithBuffers has every batch report what it did with the CapacityBuffers' virtual pods.
func (p *Provisioner) WithBuffers(report func(map[types.NamespacedName]scheduling.BufferPlacement)) *Provisioner {
	p.buffers = report
	return p
}

// Trigger opens a batch: something pending pods wait for changed (a CapacityBuffer).
func (p *Provisioner) Trigger() { p.batcher.Trigger() }

// WithPolicies makes the provisioner consult the policy engine.
func (p *Provisioner) WithPolicies(e *policies.Engine) *Provisioner {
	p.engine = e
	return p
}

// WithScheduling sets the scheduling policies every solve runs under (PREFERENCE_POLICY,
// MIN_VALUES_POLICY).
func (p *Provisioner) WithScheduling(sp solver.Policies) *Provisioner {
	p.scheduling = sp
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
	p.cluster.Nominations().Nominate(pod, nc.Name)
	if p.nominationEvents.TryAccept() {
		p.recorder.Eventf(pod, nc, corev1.EventTypeNormal, "Nominated", "Provisioning", "Pod should schedule on NodeClaim %s", nc.Name)
	}
}

// Register adds the pod trigger and the provisioning loop to the manager.
func (p *Provisioner) Register(mgr ctrl.Manager) error {
	if err := mgr.Add(p); err != nil {
		return err
	}
	if err := p.registerGate(mgr); err != nil {
		return err
	}
	provisionable := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && scheduling.IsProvisionable(pod)
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
			case !scheduling.IsProvisionable(pod):
			case p.cluster.Nominations().Nominated(pod):
				// kube-scheduler marked it again: if its node was schedulable by then, the
				// nomination failed (see state.Cluster.Rejected).
				p.cluster.Nominations().Rejected(pod)
				p.batcher.Nudge()
			default:
				p.batcher.TriggerFor(pod.UID, state.ReplicaSetOf(pod))
			}
			if scheduling.IsProvisionable(pod) {
				// Seen pending: the provisioning-latency metrics count from here.
				p.cluster.Decisions().AckPods(pod)
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
				// Only pods still pending need another look; an idle cluster costs nothing. A
				// buffer's room is looked at again too: pods that took it bind without ever
				// being pending, and no event announces that.
				if p.cluster.PendingPods() > 0 || len(p.cluster.BufferPods()) > 0 {
					p.batcher.Nudge()
				}
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
	if !p.cluster.Synced() {
		// A decision on part of the cluster would launch for pods whose nodes are not known
		// yet; the retry brings the batch back.
		logger.V(1).Info("waiting for the cluster model to sync")
		p.retryIn(ctx, time.Second)
		return nil
	}
	// Gated pods whose NodeClaims launched without the watch seeing it (under the leader
	// before this one, or before their nomination was recorded).
	p.liftLaunched(ctx)
	snap, err := p.cluster.Snapshot(ctx, p.cloud)
	if err != nil {
		return err
	}
	if snap.Displaced > 0 {
		logger.V(1).Info("pods displaced from their nominated nodes wait for kube-scheduler", "pods", snap.Displaced, "retryAfter", snap.RetryAfter.String())
		p.retryIn(ctx, snap.RetryAfter)
	}
	unresolved := make([]*corev1.Pod, 0, len(snap.Unresolved))
	for _, u := range snap.Unresolved {
		p.recorder.Eventf(u.Pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Provisioning", "Failed to schedule pod, %s", u.Reason)
		unresolved = append(unresolved, u.Pod)
	}
	// Left out of the solve is a decision too: no place for now.
	p.decided(nil, unresolved)
	metrics.SchedulerIgnoredPods.Set(float64(len(snap.Unresolved)))
	p.holdMisfits(ctx, snap)
	if len(snap.Pods) > 0 {
		p.noteIncompatiblePools(snap)
	}
	if len(snap.Pods) == 0 {
		// Nothing pending: nothing is held back either.
		p.cluster.PolicyBlocks().SetPolicyBlocked(nil, nil)
		metrics.UnschedulablePods.WithLabelValues("provisioner").Set(0)
		metrics.SetPendingPodsByZone("provisioner", nil)
		return nil
	}
	in, prepared, err := p.prepare(snap)
	if err != nil {
		return fmt.Errorf("solving: %w", err)
	}
	start := p.clock.Now()
	res, outcome, err := p.solve(ctx, snap, in, prepared)
	if err != nil {
		return fmt.Errorf("solving: %w", err)
	}
	metrics.SchedulingDuration.WithLabelValues("provisioner").Observe(p.clock.Since(start).Seconds())
	// A buffer's virtual pod that finds no place is headroom not kept, not a pod that waits:
	// it is counted apart from the unschedulable ones.
	unschedulable, bufferUnplaced := 0, 0
	for _, u := range res.Unschedulable {
		if scheduling.IsVirtual(u.Pod) {
			bufferUnplaced++
		} else {
			unschedulable++
		}
	}
	metrics.UnschedulablePods.WithLabelValues("provisioner").Set(float64(unschedulable))
	p.markDecisions(res)
	logger.Info("solved", "pods", len(snap.Pods), "nodeClaims", len(res.NodeClaims), "unschedulable", unschedulable,
		"bufferPodsUnplaced", bufferUnplaced, "pricePerHour", res.PricePerHour(), "duration", p.clock.Since(start).String())
	var placed []*corev1.Pod
	for name, pods := range res.Existing {
		pods = realPods(pods)
		for _, pod := range pods {
			p.cluster.Nominations().Nominate(pod, name)
		}
		if p.cluster.Launched(name) {
			placed = append(placed, pods...)
		}
	}
	// A buffer's virtual pods are not nominated, gated or evented: what the batch did with
	// them goes on the buffer (controllers/capacitybuffer).
	if p.buffers != nil {
		p.buffers(bufferPlacements(res))
	}
	// Pods with room on a node, or on a launched NodeClaim, go ahead now; those on NodeClaims
	// still launching or new once these launch (schedulinggate.go).
	p.lift(ctx, placed)
	// In parallel: a scale-out of hundreds of NodeClaims created one round trip after the
	// other (each through the validating webhook) took a minute on a busy control plane. A
	// NodeClaim that fails to be created leaves its pods unnominated, for the next batch.
	errs := make([]error, len(res.NodeClaims))
	workqueue.ParallelizeUntil(ctx, createParallelism, len(res.NodeClaims), func(i int) {
		c := res.NodeClaims[i]
		nc := solver.NodeClaimFor(snap.NodePool(c.NodePool), c)
		if err := p.client.Create(ctx, nc); err != nil {
			errs[i] = fmt.Errorf("creating nodeclaim for nodepool %s: %w", c.NodePool, err)
			return
		}
		p.cluster.Created(nc)
		metrics.Created(metrics.ProvisionedReason, nc)
		logger.Info("created nodeclaim", "NodeClaim", nc.Name, "NodePool", c.NodePool, "instanceType", c.InstanceType.Name,
			"instanceTypes", len(c.InstanceTypes), "pods", len(c.Pods))
		for _, pod := range realPods(c.Pods) {
			p.nominate(pod, nc)
		}
	})
	// What the policies held back stands whether or not every NodeClaim was created.
	blocked := p.reportPolicies(ctx, outcome)
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
	for _, u := range res.Unschedulable {
		if blocked[u.Pod] || scheduling.IsVirtual(u.Pod) {
			continue
		}
		p.recorder.Eventf(u.Pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Provisioning", "Failed to schedule pod, %s", u.Reason)
	}
	return nil
}

// prepare builds the batch's solver input and prepares it once: the pending pods by effective
// zone are read from it, and without policies the batch is solved from it.
func (p *Provisioner) prepare(snap *snapshot.Snapshot) (*solver.Input, *solver.Prepared, error) {
	in := p.scheduling.Apply(snap.SolverInput())
	prepared, err := solver.Prepare(in)
	if err != nil {
		return nil, nil, err
	}
	metrics.SetPendingPodsByZone("provisioner", prepared.EffectiveZones())
	return in, prepared, nil
}

// solve runs the batch through the policies when the engine is set, else the solver alone
// (planner.Decide).
func (p *Provisioner) solve(ctx context.Context, snap *snapshot.Snapshot, in *solver.Input, prepared *solver.Prepared) (*solver.Result, *planner.Outcome, error) {
	run := metrics.StartSolve("provisioner", len(in.Pods), p.clock.Now(), p.clock.Since)
	defer run.Done()
	in.Progress = run.Progress
	var pl *planner.Planner
	if p.engine != nil {
		pl = planner.New(p.engine, snap.Objects.Namespaces, snap.Objects.CapacityBudgets, snap.Objects.ClusterCapacityBudgets, snap.Now)
	}
	return planner.Decide(ctx, pl, in, prepared)
}

// markDecisions records which real pods the batch placed and which it could not, and observes
// how long those decided for the first time waited for it.
func (p *Provisioner) markDecisions(res *solver.Result) {
	var placed, unplaced []*corev1.Pod
	for _, pods := range res.Existing {
		placed = append(placed, realPods(pods)...)
	}
	for _, c := range res.NodeClaims {
		placed = append(placed, realPods(c.Pods)...)
	}
	for _, u := range res.Unschedulable {
		if !scheduling.IsVirtual(u.Pod) {
			unplaced = append(unplaced, u.Pod)
		}
	}
	p.decided(placed, unplaced)
}

// decided records a batch's decisions and observes how long the pods decided for the first
// time waited for one.
func (p *Provisioner) decided(placed, unplaced []*corev1.Pod) {
	for _, d := range p.cluster.Decisions().MarkDecisions(placed, unplaced) {
		metrics.PodsSchedulingDecisionDuration.Observe(d.Seconds())
	}
}

// reportPolicies turns a batch's policy outcome into Events and metrics: the pods a Deny
// keeps pending get an Event naming the policy and the numbers; Warn and DryRun results and
// evaluation errors go on the policy objects. It returns the blocked pods.
func (p *Provisioner) reportPolicies(ctx context.Context, out *planner.Outcome) map[*corev1.Pod]bool {
	blocked := map[*corev1.Pod]bool{}
	if out == nil {
		p.cluster.PolicyBlocks().SetPolicyBlocked(nil, nil)
		return blocked
	}
	namespaces := make([]string, 0, len(out.Namespaces))
	for name := range out.Namespaces {
		namespaces = append(namespaces, name)
	}
	pods := make([]*corev1.Pod, 0, len(out.Blocked))
	for _, b := range out.Blocked {
		blocked[b.Pod] = true
		if scheduling.IsVirtual(b.Pod) {
			// The buffer's Provisioning condition says it (bufferPlacements).
			continue
		}
		pods = append(pods, b.Pod)
		p.recorder.Eventf(b.Pod, nil, corev1.EventTypeWarning, "PolicyDenied", "Provisioning", "%s", b.Violation.Message)
	}
	// karpenter_policy_blocked_pods and status.blockedPods count those still pending.
	p.cluster.PolicyBlocks().SetPolicyBlocked(namespaces, pods)
	p.recordDecisions(out)
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

// holdMisfits leaves out of the batch the pods whose workload is backing off (see
// state.MisfitBackoff): those displaced from a node that cannot hold them beside its
// DaemonSet and higher-priority pods, and those of a workload kube-scheduler preempted from
// such a node, launched lately. Each new such node gets a Warning event on the pod; a batch
// comes back when the first backoff ends.
func (p *Provisioner) holdMisfits(ctx context.Context, snap *snapshot.Snapshot) {
	misfit := func(pod *corev1.Pod, node, why string) {
		until, news := p.cluster.Misfit(pod, node)
		if !news {
			return
		}
		wait := until.Sub(p.clock.Now()).Round(time.Second)
		log.FromContext(ctx).Info("pod does not fit on the node launched for it; backing off", "pod", klog.KObj(pod), "node", node, "backoff", wait.String())
		metrics.LaunchBackoffs.Inc()
		p.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "LaunchBackoff", "Provisioning",
			"%s node %s, launched lately, cannot hold the pod beside its DaemonSet and higher-priority pods; not launching for it again for %s",
			why, node, wait)
	}
	for _, m := range snap.Misfits {
		misfit(m.Pod, m.Node, "The pod was displaced:")
	}
	for _, pod := range snap.Pods {
		if node, ok := p.cluster.PreemptedFrom(pod); ok && snap.Preempted(pod, node) {
			misfit(pod, node, "A pod of its workload was preempted:")
		}
	}
	var first time.Time
	kept := snap.Pods[:0]
	for _, pod := range snap.Pods {
		if until, ok := p.cluster.BackedOff(pod); ok {
			if first.IsZero() || until.Before(first) {
				first = until
			}
			continue
		}
		kept = append(kept, pod)
	}
	snap.Pods = kept
	if !first.IsZero() {
		p.retryIn(ctx, first.Sub(p.clock.Now()))
	}
}

// IncompatibleEvery rate-limits the NoCompatibleInstanceTypes event per NodePool, as upstream's.
const IncompatibleEvery = time.Minute

// noteIncompatiblePools warns, as upstream's NoCompatibleInstanceTypes event on the NodePool,
// about each dynamic NodePool whose own requirements leave none of its instance types'
// available offerings: it can launch nothing for any pod.
func (p *Provisioner) noteIncompatiblePools(snap *snapshot.Snapshot) {
	p.incompatibleMu.Lock()
	defer p.incompatibleMu.Unlock()
	now := p.clock.Now()
	for _, np := range snap.NodePools {
		// Told recently: nothing to look at. Else one available offering is enough to know.
		if at, ok := p.incompatibleTold[np.NodePool.Name]; ok && now.Sub(at) < IncompatibleEvery {
			continue
		}
		if np.NodePool.IsStatic() || scheduling.AnyOffering(np.InstanceTypes, scheduling.NewRequirements(np.NodePool.Spec.Template.Spec.Requirements...), scheduling.Available) {
			continue
		}
		if p.incompatibleTold == nil {
			p.incompatibleTold = map[string]time.Time{}
		}
		p.incompatibleTold[np.NodePool.Name] = now
		p.recorder.Eventf(np.NodePool, nil, corev1.EventTypeWarning, "NoCompatibleInstanceTypes", "Provisioning", "NodePool requirements filtered out all compatible available instance types")
	}
}
