package disruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/provisioning"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
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
	noted  map[string]time.Time // by node and reason: when the last Unconsolidatable event was told
	period time.Duration
	delay  time.Duration
}

// NewController builds the disruption controller; engine, when set, gates every command.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, cluster *state.Cluster, recorder events.EventRecorder, clk clock.Clock,
	engine *policies.Engine, opts Options) *Controller {
	ctl := &Controller{client: c, cloud: cloud, cluster: cluster, recorder: recorder, clock: clk, queue: NewQueue(c, cluster, recorder),
		engine: engine, opts: opts, methods: Methods(), noted: map[string]time.Time{}, period: PollPeriod, delay: ValidationDelay}
	for _, m := range ctl.methods {
		if mn, ok := m.(*MultiNode); ok {
			mn.Clock = clk.Now
		}
	}
	return ctl
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
	present := make([]string, 0, len(nodes.Items))
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
		present = append(present, nodes.Items[i].Name)
	}
	c.cluster.KeepPodEvents(present)
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
	}
	for i := range pdbs.Items {
		in.PDBs = append(in.PDBs, &pdbs.Items[i])
	}
	for i := range claims.Items {
		nc := claims.Items[i].DeepCopy()
		nc.Status.LastPodEventTime = metav1.NewTime(LastPodEvent(nc, c.cluster.LastPodEvent(nc.Status.NodeName)))
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
		pl, err := provisioning.NewPlanner(ctx, c.client, c.engine, in.Now)
		if err != nil {
			return nil, err
		}
		snap.Gate = NewPolicyGate(pl, snap)
	}
	return snap, nil
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
// UnconsolidatableEvery for the same reason (a new reason, such as a policy denial after a
// nomination, is told at once). Entries older than that are forgotten, so nodes long gone do
// not accumulate.
func (c *Controller) noteUnconsolidatable(snap *Cluster) {
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
			if cand.Name() == u.Node && cand.NodeClaim != nil {
				c.recorder.Eventf(cand.NodeClaim, nil, corev1.EventTypeNormal, "Unconsolidatable", "Disruption", "%s", u.Reason)
			}
		}
	}
}
