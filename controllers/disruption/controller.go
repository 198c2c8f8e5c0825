package disruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	provpolicy "github.com/karpenter-policy/karpenter/controllers/provisioning/policy"
	solver "github.com/karpenter-policy/karpenter/controllers/provisioning/scheduling"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
)

// PollPeriod is how often the controller runs a pass; ValidationDelay is how long a
// consolidation command waits before it is validated on a fresh snapshot.
const (
	PollPeriod      = 10 * time.Second
	ValidationDelay = 15 * time.Second
	// UnconsolidatableEvery rate-limits the Unconsolidatable event per node.
	UnconsolidatableEvery = 15 * time.Minute
)

// Controller runs disruption passes on the leader: every PollPeriod it snapshots the cluster
// from the caches, runs the methods, validates a consolidation after ValidationDelay, and hands
// the commands to the queue, one at a time. It reads through the cached client; the queue
// writes.
type Controller struct {
	client   client.Client
	cloud    cloudprovider.CloudProvider
	cluster  *state.Cluster
	recorder events.EventRecorder
	clock    clock.Clock
	queue    *Queue
	engine   *policies.Engine
	opts     Options
	methods  []Method

	mu     sync.Mutex
	noted  map[string]time.Time
	period time.Duration
	delay  time.Duration
}

// NewController builds the disruption controller; engine, when set, gates every command.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, cluster *state.Cluster, recorder events.EventRecorder, clk clock.Clock,
	engine *policies.Engine, opts Options) *Controller {
	return &Controller{client: c, cloud: cloud, cluster: cluster, recorder: recorder, clock: clk, queue: NewQueue(c, cluster, recorder, clk),
		engine: engine, opts: opts, methods: Methods(), noted: map[string]time.Time{}, period: PollPeriod, delay: ValidationDelay}
}

// NeedLeaderElection is true: one replica disrupts.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start cleans the taints a command interrupted by a restart left, then runs a pass every
// PollPeriod until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("disruption")
	ctx = log.IntoContext(ctx, logger)
	if err := c.queue.CleanStaleTaints(ctx); err != nil {
		logger.Error(err, "cleaning stale disruption taints")
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(c.period):
			if err := c.Reconcile(ctx); err != nil {
				logger.Error(err, "disruption pass")
			}
		}
	}
}

// Reconcile runs one pass and carries its commands out.
func (c *Controller) Reconcile(ctx context.Context) error {
	snap, err := c.Snapshot(ctx)
	if err != nil {
		return err
	}
	c.observe(snap)
	cmds, m, err := Pass(ctx, snap, c.methods)
	if mn, ok := m.(*MultiNode); ok && mn.TimedOut {
		metrics.ConsolidationTimeouts.WithLabelValues("multi").Inc()
	}
	c.noteUnconsolidatable(snap)
	if err != nil || len(cmds) == 0 {
		return err
	}
	if m.Reason() == ReasonUnderutilized {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(c.delay):
		}
		fresh, err := c.Snapshot(ctx)
		if err != nil {
			return err
		}
		var valid []*Command
		for _, cmd := range cmds {
			if why := Validate(ctx, cmd, fresh, m, nil); why != "" {
				log.FromContext(ctx).Info("dropped a consolidation that no longer holds", "nodes", names(cmd.Candidates), "why", why)
				continue
			}
			valid = append(valid, cmd)
		}
		cmds, snap = valid, fresh
	}
	for _, cmd := range cmds {
		if err := c.queue.Execute(ctx, snap, cmd); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot builds the disruption snapshot from the caches: nodes, their pods, NodeClaims
// (with this process's pod events), NodePools with their instance types and DaemonSet
// overhead, PDBs, nominations, and the policy gate.
func (c *Controller) Snapshot(ctx context.Context) (*Cluster, error) {
	var nodes corev1.NodeList
	var pods corev1.PodList
	var claims karpv1.NodeClaimList
	var pools karpv1.NodePoolList
	var pdbs k8spolicyv1.PodDisruptionBudgetList
	var daemonSets appsv1.DaemonSetList
	for _, l := range []client.ObjectList{&nodes, &pods, &claims, &pools, &pdbs, &daemonSets} {
		if err := c.client.List(ctx, l); err != nil {
			return nil, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	var templates []corev1.PodTemplateSpec
	for _, ds := range daemonSets.Items {
		templates = append(templates, ds.Spec.Template)
	}
	// Nodes the provisioner nominated pending pods to: it counts on their room.
	nominated := map[string]bool{}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			if target, ok := c.cluster.NominationOf(p); ok {
				nominated[target] = true
			}
		}
	}
	in := Input{Now: c.clock.Now(), Options: c.opts, Nominated: func(name string) bool { return nominated[name] }}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
	}
	for i := range pdbs.Items {
		in.PDBs = append(in.PDBs, &pdbs.Items[i])
	}
	for i := range claims.Items {
		nc := claims.Items[i].DeepCopy()
		// The last pod event: this process's, else status's, else the node's initialization.
		last := nc.Status.LastPodEventTime.Time
		if t := c.cluster.LastPodEvent(nc.Status.NodeName); t.After(last) {
			last = t
		}
		if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeInitialized); cond != nil && cond.LastTransitionTime.After(last) {
			last = cond.LastTransitionTime.Time
		}
		nc.Status.LastPodEventTime = metav1.NewTime(last)
		in.NodeClaims = append(in.NodeClaims, nc)
	}
	for i := range pools.Items {
		np := &pools.Items[i]
		if np.DeletionTimestamp != nil {
			continue
		}
		its, err := c.cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			continue
		}
		in.NodePools = append(in.NodePools, &NodePoolState{NodePool: np, InstanceTypes: its, DaemonSetOverhead: solver.DaemonSetOverhead(np, templates)})
	}
	snap := NewCluster(in)
	if c.engine != nil {
		gate, err := c.gate(ctx, snap)
		if err != nil {
			return nil, err
		}
		snap.Gate = gate
	}
	return snap, nil
}

// gate gathers what the policy gate reads: namespaces with their labels, budgets, usage.
func (c *Controller) gate(ctx context.Context, snap *Cluster) (*PolicyGate, error) {
	var nss corev1.NamespaceList
	if err := c.client.List(ctx, &nss); err != nil {
		return nil, err
	}
	var budgets policyv1.CapacityBudgetList
	if err := c.client.List(ctx, &budgets); err != nil {
		return nil, err
	}
	g := &PolicyGate{Engine: c.engine, Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{}}
	for _, ns := range nss.Items {
		g.Namespaces[ns.Name] = policies.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	for i := range budgets.Items {
		if b := &budgets.Items[i]; g.Budgets[b.Namespace] == nil || b.Name < g.Budgets[b.Namespace].Name {
			g.Budgets[b.Namespace] = b
		}
	}
	book := provpolicy.PriceBook{}
	for _, np := range snap.NodePools {
		for _, it := range np.InstanceTypes {
			book[it.Name] = it
		}
	}
	g.Usage = provpolicy.UsageOf(snap.Nodes, book)
	return g, nil
}

// observe exports the budgets' allowances and the eligible nodes.
func (c *Controller) observe(snap *Cluster) {
	b := NewBudgets(snap)
	for name := range snap.NodePools {
		for _, r := range budgetReasons {
			metrics.NodePoolAllowedDisruptions.WithLabelValues(name, string(r)).Set(float64(b.Allowed(name, r)))
		}
	}
	for _, m := range c.methods {
		n := 0
		for _, cand := range snap.Candidates {
			if m.Qualifies(snap, cand) {
				n++
			}
		}
		if m.Reason() == ReasonUnderutilized && m.Consolidation() == "single" {
			continue
		}
		metrics.DisruptionEligibleNodes.WithLabelValues(string(m.Reason())).Set(float64(n))
	}
}

// noteUnconsolidatable emits an Unconsolidatable event per node left alone, at most once per
// UnconsolidatableEvery.
func (c *Controller) noteUnconsolidatable(snap *Cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for _, u := range snap.Unconsolidatable {
		if at, ok := c.noted[u.Node]; ok && now.Sub(at) < UnconsolidatableEvery {
			continue
		}
		c.noted[u.Node] = now
		for _, cand := range snap.Candidates {
			if cand.Name() == u.Node && cand.NodeClaim != nil {
				c.recorder.Eventf(cand.NodeClaim, nil, corev1.EventTypeNormal, "Unconsolidatable", "Disruption", "%s", u.Reason)
			}
		}
	}
}
