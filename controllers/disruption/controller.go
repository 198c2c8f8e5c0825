package disruption

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
)

// The pass's timing. Right after a pass that handed over commands, the next runs at once, so
// that a budget of several nodes fills within seconds. After a pass that found nothing to do,
// the next runs when the cluster model has changed (at most every PollPeriod), or when time
// alone can change a decision (consolidateAfter, expireAfter or a do-not-disrupt duration
// running out, a budget's schedule opening or closing: Cluster.NextChange), and at the
// latest after IdlePassInterval: an idle cluster is not re-examined every few seconds.
// ValidationDelay is how long a consolidation waits before it is validated on a fresh
// snapshot, as upstream waits.
const (
	PollPeriod       = 10 * time.Second
	MinPassInterval  = time.Second
	IdlePassInterval = 5 * time.Minute
	ValidationDelay  = 15 * time.Second
	// PolicyRecheck is how soon a pass runs again when the policy gate denied a command.
	PolicyRecheck = time.Minute
	// UnconsolidatableEvery rate-limits the Unconsolidatable event per node.
	UnconsolidatableEvery = 15 * time.Minute
)

// Controller runs disruption passes on the leader and hands their commands to the
// orchestrator, which carries several out at once.
type Controller struct {
	cloud    cloudprovider.CloudProvider
	cluster  *state.Cluster
	recorder events.EventRecorder
	clock    clock.Clock
	engine   *policies.Engine
	opts     methods.Options
	methods  []methods.Method
	// Orchestrator carries the commands out.
	Orchestrator *Orchestrator

	mu    sync.Mutex
	noted map[string]time.Time // by node and reason: when the last Unconsolidatable event was told
	// blocked is when each NodePool and reason was last told blocked by its budget.
	blocked map[string]time.Time
	// pools are the NodePools whose budget series are exported.
	pools map[string]bool
	// idle is the model's revision when the last pass found nothing to do, and wake when
	// time alone may change that.
	idle     uint64
	wake     time.Time
	wasIdle  bool
	interval time.Duration
}

// NewController builds the disruption controller; engine, when set, gates every command.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, cluster *state.Cluster, recorder events.EventRecorder, clk clock.Clock,
	engine *policies.Engine, opts methods.Options) *Controller {
	ctl := &Controller{cloud: cloud, cluster: cluster, recorder: recorder, clock: clk, engine: engine, opts: opts,
		methods: methods.Methods(), noted: map[string]time.Time{}, blocked: map[string]time.Time{}, pools: map[string]bool{}, interval: MinPassInterval,
		Orchestrator: NewOrchestrator(c, cluster, recorder, clk)}
	ctl.opts.Evaluated = func(m methods.Method, took time.Duration) {
		metrics.DisruptionEvaluationDuration.WithLabelValues(strings.ToLower(string(m.Reason())), m.Consolidation()).Observe(took.Seconds())
	}
	ctl.opts.Solved = func(took time.Duration) {
		metrics.SchedulingDuration.WithLabelValues("disruption").Observe(took.Seconds())
	}
	if _, ok := cloud.(cloudprovider.Rebooter); ok {
		ctl.opts.CanReboot = true
		ctl.Orchestrator.reboots = NewRebootHistory()
		ctl.opts.Reboots = func(nc *karpv1.NodeClaim) int { return ctl.Orchestrator.reboots.Count(nc, clk.Now()) }
	}
	for _, m := range ctl.methods {
		switch mn := m.(type) {
		case *methods.MultiNode:
			mn.Clock = clk.Now
		case *methods.SingleNode:
			mn.Clock = clk.Now
		}
	}
	return ctl
}

// NeedLeaderElection is true: one replica disrupts.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start waits for the model to sync, adopts or rolls back what a stopped manager left in
// flight, then runs passes until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("disruption")
	ctx = log.IntoContext(ctx, logger)
	for !c.cluster.Synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(100 * time.Millisecond):
		}
	}
	for {
		err := c.Orchestrator.Adopt(ctx, c.cluster.Objects())
		if err == nil {
			break
		}
		logger.Error(err, "adopting the disruption commands in flight")
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(5 * time.Second):
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(c.interval):
		}
		acted, err := c.Reconcile(ctx)
		if err != nil {
			logger.Error(err, "disruption pass")
		}
		switch {
		case acted:
			c.interval = 0
		case c.idleNow() && c.Orchestrator.Len() == 0:
			// With commands in flight, the budget they hold comes back as each ends: look
			// again within MinPassInterval (a pass runs only once the model changed).
			c.interval = PollPeriod
		default:
			c.interval = MinPassInterval
		}
	}
}

// due reports whether a pass may find something the last did not: the model changed, or the
// time the last one said (wake) has come.
func (c *Controller) due() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.wasIdle || c.cluster.Revision() != c.idle || !c.clock.Now().Before(c.wake)
}

func (c *Controller) idleNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wasIdle
}

// setIdle records the outcome of a pass at revision rev: idle with nothing to do until wake
// (or IdlePassInterval), or not.
func (c *Controller) setIdle(idle bool, rev uint64, wake time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	latest := c.clock.Now().Add(IdlePassInterval)
	if wake.IsZero() || wake.After(latest) {
		wake = latest
	}
	c.wasIdle, c.idle, c.wake = idle, rev, wake
}

// Reconcile runs one pass when it is due and hands its commands to the orchestrator; it
// reports whether it handed any.
func (c *Controller) Reconcile(ctx context.Context) (bool, error) {
	if !c.due() {
		return false, nil
	}
	rev := c.cluster.Revision()
	start := c.clock.Now()
	snap, err := c.Snapshot(ctx)
	if err != nil {
		return false, err
	}
	c.observe(snap)
	cmds, m, err := methods.Pass(ctx, snap, c.methods)
	took := c.clock.Since(start)
	metrics.DisruptionPassDuration.Observe(took.Seconds())
	log.FromContext(ctx).Info("disruption pass", "nodes", len(snap.Nodes), "candidates", len(snap.Candidates), "commands", len(cmds),
		"inFlight", c.Orchestrator.Len(), "duration", took.String())
	if mn, ok := m.(*methods.MultiNode); ok && mn.TimedOut {
		metrics.ConsolidationTimeouts.WithLabelValues("multi").Inc()
	}
	for _, method := range c.methods {
		if sn, ok := method.(*methods.SingleNode); ok && sn.TimedOut {
			metrics.ConsolidationTimeouts.WithLabelValues("single").Inc()
		}
	}
	c.noteUnconsolidatable(snap)
	c.noteRepair(snap)
	c.noteScores(snap)
	c.noteInvalidEvictionCosts(ctx, snap)
	if err != nil {
		return false, err
	}
	if len(cmds) == 0 {
		// Nothing to do until something changes, or time does.
		wake := snap.NextChange()
		for _, u := range snap.Unconsolidatable {
			if strings.HasPrefix(u.Reason, "denied by policy") {
				// A policy may decide by the time (input.now), which no one can tell ahead:
				// look again within PolicyRecheck.
				if at := c.clock.Now().Add(PolicyRecheck); wake.IsZero() || at.Before(wake) {
					wake = at
				}
				break
			}
		}
		c.setIdle(true, rev, wake)
		return false, nil
	}
	c.setIdle(false, rev, time.Time{})
	if m.Reason() == methods.ReasonUnderutilized {
		for _, cmd := range cmds {
			c.noteCandidate(cmd)
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-c.clock.After(ValidationDelay):
		}
		fresh, err := c.Snapshot(ctx)
		if err != nil {
			return false, err
		}
		var valid []*methods.Command
		for _, cmd := range cmds {
			if why := methods.Validate(ctx, cmd, fresh, m, nil); why != "" {
				log.FromContext(ctx).Info("dropped a consolidation that no longer holds", "nodes", names(cmd.Candidates), "why", why)
				c.noteRejected(cmd, why)
				continue
			}
			valid = append(valid, cmd)
		}
		cmds, snap = valid, fresh
	}
	for _, cmd := range cmds {
		id := c.Orchestrator.Add(snap, cmd)
		log.FromContext(ctx).Info("disrupting", "command", id, "reason", cmd.Reason, "decision", cmd.Decision, "nodes", names(cmd.Candidates),
			"replacements", len(cmd.Replacements), "savingsPerHour", cmd.Savings())
	}
	return len(cmds) > 0, nil
}

// Snapshot is disruption's view of the model: the nodes of commands in flight count as
// disrupting, and the policy gate, when policies apply, checks every command.
func (c *Controller) Snapshot(ctx context.Context) (*methods.Cluster, error) {
	snap, err := c.cluster.Placed(ctx, c.cloud)
	if err != nil {
		return nil, err
	}
	opts := c.opts
	if opts.NodeRepair {
		opts.RepairPolicies = func(np *karpv1.NodePool) []cloudprovider.RepairPolicy {
			ps, err := c.cloud.RepairPolicies(ctx, np)
			if err != nil {
				// The provider's own policies still hold (a node class not ready adds none).
				log.FromContext(ctx).V(1).Info("repair policies", "NodePool", np.Name, "error", err.Error())
			}
			return ps
		}
	}
	mc := methods.NewCluster(snap, opts)
	mc.InFlight(c.Orchestrator.InFlight())
	mc.Hold(c.Orchestrator.Held())
	if c.engine != nil {
		g := methods.NewPolicyCheck(planner.New(c.engine, snap.Objects.Namespaces, snap.Objects.CapacityBudgets, snap.Objects.ClusterCapacityBudgets, snap.Now), mc)
		c.recordGate(g)
		mc.Check = g
	}
	return mc, nil
}

// observe exports the budgets' allowances and the eligible nodes, with upstream's reason
// label values (lower case), and tells a NodePool whose budget blocks a reason entirely.
func (c *Controller) observe(snap *methods.Cluster) {
	for name := range snap.NodePools {
		for _, r := range methods.BudgetReasons {
			total, consuming := methods.BudgetUse(snap, name, r)
			reason := strings.ToLower(string(r))
			metrics.NodePoolAllowedDisruptions.WithLabelValues(name, reason).Set(float64(total))
			metrics.NodePoolNodesConsumingBudgets.WithLabelValues(name, reason).Set(float64(consuming))
			// Repair's budget blocks nothing while repair is off.
			if total == 0 && snap.PoolSizes[name] > 0 && (r != methods.ReasonUnhealthy || c.opts.NodeRepair) {
				c.tellBlockedPool(name, reason)
			}
		}
	}
	// A NodePool gone leaves no series behind.
	c.mu.Lock()
	for name := range c.pools {
		if _, ok := snap.NodePools[name]; !ok {
			metrics.NodePoolAllowedDisruptions.DeletePartialMatch(prometheus.Labels{"nodepool": name})
			metrics.NodePoolNodesConsumingBudgets.DeletePartialMatch(prometheus.Labels{"nodepool": name})
			delete(c.pools, name)
		}
	}
	for name := range snap.NodePools {
		c.pools[name] = true
	}
	c.mu.Unlock()
	for _, m := range c.methods {
		n := 0
		for _, cand := range snap.Candidates {
			if m.Qualifies(snap, cand) {
				n++
			}
		}
		if m.Reason() == methods.ReasonUnderutilized && m.Consolidation() == "single" {
			continue
		}
		metrics.DisruptionEligibleNodes.WithLabelValues(strings.ToLower(string(m.Reason()))).Set(float64(n))
	}
}

// noteUnconsolidatable emits an Unconsolidatable event per node left alone, at most once per
// UnconsolidatableEvery for the same reason (a new reason, such as a policy denial after a
// nomination, is told at once). Entries older than that are forgotten, so nodes long gone do
// not accumulate.
func (c *Controller) noteUnconsolidatable(snap *methods.Cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for key, at := range c.noted {
		if now.Sub(at) >= UnconsolidatableEvery {
			delete(c.noted, key)
		}
	}
	for _, u := range snap.Unconsolidatable {
		key := u.Node + "\x00" + u.Reason
		if _, ok := c.noted[key]; ok {
			continue
		}
		c.noted[key] = now
		for _, cand := range snap.Candidates {
			if cand.Name() == u.Node {
				// A node that graceful disruption must leave alone (do-not-disrupt on it or on
				// a pod, named; a PDB; nominated pods) is DisruptionBlocked, as upstream;
				// one no method would act on is Unconsolidatable.
				reason := "Unconsolidatable"
				if cand.Blocked != "" && cand.Blocked == u.Reason {
					reason = "DisruptionBlocked"
				}
				c.tell(cand, corev1.EventTypeNormal, reason, "%s", u.Reason)
			}
		}
	}
}

// noteRepair emits, for each unhealthy node repair left alone, NodeRepairBlocked (the pool's
// breaker; also on the NodePool, as upstream) or DisruptionBlocked on its NodeClaim and its
// Node, at most once per UnconsolidatableEvery for the same message.
func (c *Controller) noteRepair(snap *methods.Cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for _, n := range snap.RepairNotes {
		key := n.Node + "\x00" + n.Message
		if _, ok := c.noted[key]; ok || n.NodeClaim == nil {
			continue
		}
		c.noted[key] = now
		c.recorder.Eventf(n.NodeClaim, nil, corev1.EventTypeWarning, n.Event, "Repair", "%s", n.Message)
		c.recorder.Eventf(nodeObject(c.Orchestrator.client, n.Node), nil, corev1.EventTypeWarning, n.Event, "Repair", "%s", n.Message)
		poolKey := "NodePool\x00" + n.NodePool + "\x00" + n.Message
		if _, ok := c.noted[poolKey]; !ok && n.Event == "NodeRepairBlocked" && n.NodePool != "" {
			c.noted[poolKey] = now
			c.recorder.Eventf(nodePoolObject(c.Orchestrator.client, n.NodePool), nil, corev1.EventTypeWarning, n.Event, "Repair", "%s", n.Message)
		}
	}
}

func names(cands []*methods.Candidate) []string {
	out := make([]string, 0, len(cands))
	for _, c := range cands {
		out = append(out, c.Name())
	}
	return out
}
