package state

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

var startupTaint = corev1.Taint{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}

func pendingPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
	}
}

// node is a registered node named as its NodeClaim; readyAt zero means not Ready yet (with
// the not-ready taint the node lifecycle controller adds, and the claim's startup taint).
func node(name string, readyAt time.Time) (*corev1.Node, *karpv1.NodeClaim) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpv1.NodeClaimSpec{StartupTaints: []corev1.Taint{startupTaint}},
		Status: karpv1.NodeClaimStatus{NodeName: name}}
	if readyAt.IsZero() {
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, startupTaint}
	} else {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readyAt)}}
		nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(readyAt)}}
	}
	return n, nc
}

// A NodeClaim is in flight until its Node is there and reports what it can allocate; then the
// Node stands for it, found by name or, before registration, by provider ID, holds the pods
// nominated to the NodeClaim, and offers its room without its not-ready, startup and
// unregistered taints while it initializes. A cordoned node offers no room, and its NodeClaim
// does not count as in flight.
func TestTheNodeStandsForItsNodeClaimOnceItReportsCapacity(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	slow, slowClaim := node("slow", time.Time{})
	ready, readyClaim := node("ready", clk.Now().Add(-5*time.Second))
	// early's Node is there, not yet registered: its NodeClaim knows it by provider ID only.
	early, earlyClaim := node("early", time.Time{})
	early.Spec.ProviderID, earlyClaim.Status.ProviderID, earlyClaim.Status.NodeName = "kwok://early", "kwok://early", ""
	early.Spec.Taints = append(early.Spec.Taints, corev1.Taint{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute})
	cordoned, cordonedClaim := node("cordoned", clk.Now().Add(-time.Minute))
	cordoned.Spec.Unschedulable = true
	// bare's Node is there, but not its status yet (it is written after the Node): its
	// NodeClaim, launched, is still what offers the room.
	bare, bareClaim := node("bare", time.Time{})
	bare.Spec.ProviderID, bareClaim.Status.ProviderID, bareClaim.Status.NodeName = "kwok://bare", "kwok://bare", ""
	bareClaim.Status.Allocatable, bare.Status.Allocatable = bare.Status.Allocatable, nil
	launching := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "launching"},
		Spec: karpv1.NodeClaimSpec{Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	objs := []client.Object{slow, slowClaim, ready, readyClaim, early, earlyClaim, cordoned, cordonedClaim, bare, bareClaim, launching, pendingPod("free")}
	for _, name := range []string{"slow", "ready", "early", "cordoned", "bare", "launching"} {
		objs = append(objs, pendingPod("on-"+name))
	}
	c := newCluster(clk, objs...)
	for _, name := range []string{"slow", "ready", "early", "cordoned", "bare", "launching"} {
		c.Nominations().Nominate(pendingPod("on-"+name), name)
	}

	snap, pending := snapshotPending(t, c)
	if !pending["free"] || !pending["on-cordoned"] || len(pending) != 2 {
		t.Errorf("pending for the solver: %v; want free and on-cordoned only", pending)
	}
	nodes := map[string]*scheduling.Node{}
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
	}
	for _, name := range []string{"launching", "bare"} {
		if n := nodes[name]; n == nil || !n.InFlight || len(n.Pods) != 1 || n.Allocatable.Cpu().IsZero() {
			t.Errorf("%s: the NodeClaim in flight holds its nominated pod: %s", name, describe(n))
		}
	}
	for _, name := range []string{"slow", "early"} {
		if n := nodes[name]; n == nil || n.InFlight || len(n.Taints) != 0 || len(n.Pods) != 1 {
			t.Errorf("%s: an initializing node offers its room without its not-ready, startup and unregistered taints, once: %s", name, describe(n))
		}
	}
	if n := nodes["cordoned"]; n != nil {
		t.Errorf("a cordoned node offers no room, nor does its NodeClaim as if in flight: %s", describe(n))
	}
	if len(snap.Nodes) != 5 {
		t.Errorf("%d nodes for the solver; want slow, ready, early, launching and bare (as the NodeClaim)", len(snap.Nodes))
	}
	// Once its NodeClaim is initialized, a node's taints all count.
	initialized := slowClaim.DeepCopy()
	initialized.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized"}}
	c.Update(initialized)
	snap, _ = snapshotPending(t, c)
	for _, n := range snap.Nodes {
		if n.Name == "slow" && len(n.Taints) != 2 {
			t.Errorf("an initialized node's taints all count: %v", n.Taints)
		}
	}
}

// snapshotPending takes a snapshot and names the pods it leaves to the solver.
func snapshotPending(t *testing.T, c *Cluster) (*snapshot.Snapshot, map[string]bool) {
	t.Helper()
	snap, err := c.Snapshot(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]bool{}
	for _, p := range snap.Pods {
		pending[p.Name] = true
	}
	return snap, pending
}

func describe(n *scheduling.Node) string {
	if n == nil {
		return "absent"
	}
	return fmt.Sprintf("inFlight=%v taints=%v pods=%d", n.InFlight, n.Taints, len(n.Pods))
}

// TestNominationsHoldUntilTheNodeIsReady: a pod nominated to a node keeps its place while the
// node is not Ready (kube-scheduler cannot bind it there yet, however long that takes), and
// for ExistingNominationTTL after the node became Ready, as long as the node has room for it
// besides the pods kube-scheduler bound there; a registered node that is still
// initializing offers its room without its not-ready and startup taints. In a scale-out of
// 500 nodes whose nodes took over 20 s to become Ready, nominations counted from when they
// were made ran out first and the next batches launched 300 more nodes.
func TestNominationsHoldUntilTheNodeIsReady(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	now := clk.Now()
	slow, slowClaim := node("slow", time.Time{})
	fresh, freshClaim := node("fresh", now.Add(-5*time.Second))
	stale, staleClaim := node("stale", now.Add(-time.Minute))
	// full became Ready 10 s ago, and kube-scheduler filled it with another pod.
	full, fullClaim := node("full", now.Add(-10*time.Second))
	other := pendingPod("other")
	other.Spec.NodeName, other.Status = "full", corev1.PodStatus{Phase: corev1.PodRunning}
	other.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
	objs := []client.Object{slow, slowClaim, fresh, freshClaim, stale, staleClaim, full, fullClaim, other,
		pendingPod("on-slow"), pendingPod("on-fresh"), pendingPod("on-stale"), pendingPod("on-full"), pendingPod("free")}
	c := newCluster(clk, objs...)
	clk.Step(-2 * time.Minute)
	for _, name := range []string{"slow", "fresh", "stale", "full"} {
		c.Nominations().Nominate(pendingPod("on-"+name), name)
	}
	clk.Step(2 * time.Minute)

	snap, pending := snapshotPending(t, c)
	if !pending["free"] || !pending["on-stale"] || !pending["on-full"] || pending["on-slow"] || pending["on-fresh"] || len(pending) != 3 {
		t.Fatalf("pending for the solver: %v; want free, on-stale (Ready a minute ago) and on-full (no room left), not on-slow (not Ready) nor on-fresh (Ready 5 s ago)", pending)
	}
	for _, n := range snap.Nodes {
		switch n.Name {
		case "slow":
			if len(n.Taints) != 0 || len(n.Pods) != 1 {
				t.Errorf("an initializing node offers its room without its not-ready and startup taints, with its nominated pod: taints %v, pods %d", n.Taints, len(n.Pods))
			}
		case "fresh":
			if len(n.Pods) != 1 {
				t.Errorf("fresh holds its nominated pod: %d", len(n.Pods))
			}
		}
	}
	// Once its NodeClaim is initialized, a node's taints all count.
	initialized := slowClaim.DeepCopy()
	initialized.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized"}}
	c.Update(initialized)
	snap, _ = snapshotPending(t, c)
	for _, n := range snap.Nodes {
		if n.Name == "slow" && len(n.Taints) != 2 {
			t.Errorf("an initialized node's taints all count: %v", n.Taints)
		}
	}
}

// A pod whose nominated node kube-scheduler filled with others waits DefaultDisplacedGrace after the
// node became Ready (kube-scheduler is placing the pending pods, and the room it needs is
// likely where the plan put one of the others), then is solved again; the snapshot says when.
func TestDisplacedPodsWaitForKubeScheduler(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	a, aClaim := node("a", clk.Now().Add(-2*time.Second))
	b, bClaim := node("b", clk.Now().Add(-2*time.Second))
	onA, onB := pendingPod("on-a"), pendingPod("on-b")
	// kube-scheduler put on-b on a, and two 1-cpu pods fill a.
	other := pendingPod("other")
	for _, p := range []*corev1.Pod{onB, other} {
		p.Spec.NodeName, p.Status = "a", corev1.PodStatus{Phase: corev1.PodRunning}
	}
	c := newCluster(clk, a, aClaim, b, bClaim, onA, onB, other)
	c.Nominations().Nominate(onA, "a")
	c.Nominations().Nominate(onB, "b")

	snap, err := c.Snapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pods) != 0 || snap.Displaced != 1 || snap.RetryAfter != 3*time.Second {
		t.Fatalf("pending %d, displaced %d, retry after %s; want on-a displaced, solved again in 3s", len(snap.Pods), snap.Displaced, snap.RetryAfter)
	}
	clk.Step(3 * time.Second)
	if snap, err = c.Snapshot(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(snap.Pods) != 1 || snap.Pods[0].Name != "on-a" || snap.Displaced != 0 {
		t.Fatalf("pending %d, displaced %d; want on-a solved again", len(snap.Pods), snap.Displaced)
	}
	if len(snap.Misfits) != 0 {
		t.Errorf("a node filled by pods of the same priority off-plan is no misfit: %v", snap.Misfits)
	}
	// b holds no room for on-b any more, so on-a, solved again, fits there.
	for _, n := range snap.Nodes {
		if n.Name != "b" {
			continue
		}
		free := n.Allocatable
		for _, p := range n.Pods {
			free = scheduling.Subtract(free, scheduling.PodRequests(p))
		}
		if ok, r := scheduling.Fits(scheduling.PodRequests(onA), free); !ok {
			t.Errorf("b has no %s left for on-a; its pods: %d", r, len(n.Pods))
		}
	}
}

// When kube-scheduler marks a nominated pod unschedulable again after its node had been
// schedulable (its NodeClaim initialized) for a second, it refused the pod there (anti-affinity
// or a spread that its off-plan bindings break, though room is left): the pod is displaced at
// once, instead of holding its room for ExistingNominationTTL. Earlier marks do not count.
func TestPodsKubeSchedulerRefusedAreDisplaced(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	a, aClaim := node("a", clk.Now().Add(-10*time.Second))
	aClaim.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now().Add(-3 * time.Second))
	b, bClaim := node("b", clk.Now().Add(-10*time.Second))
	bClaim.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now().Add(-500 * time.Millisecond))
	onA, onB, unmarked := pendingPod("on-a"), pendingPod("on-b"), pendingPod("unmarked")
	unmarked.Status.Conditions = nil
	c := newCluster(clk, a, aClaim, b, bClaim, onA, onB, unmarked)
	c.Nominations().Nominate(onA, "a")
	c.Nominations().Nominate(onB, "b")
	c.Nominations().Nominate(unmarked, "a")
	for _, p := range []*corev1.Pod{onA, onB, unmarked} {
		c.Nominations().Rejected(p)
	}

	if _, pending := snapshotPending(t, c); !pending["on-a"] || len(pending) != 1 {
		t.Errorf("pending for the solver: %v; want on-a only (refused 3 s after a was initialized; b was initialized only 0.5 s before the mark, and unmarked carries no mark)", pending)
	}
	// A new nomination starts afresh.
	c.Nominations().Nominate(onA, "a")
	if _, pending := snapshotPending(t, c); len(pending) != 0 {
		t.Errorf("pending for the solver: %v; want none, on-a renominated", pending)
	}
}

// Nominations (and kube-scheduler's refusals) of pods no longer pending are forgotten: a pod
// bound, deleted or finished needs no room held, and a long-running manager must not keep one
// entry per pod it ever nominated.
func TestSettledPodsAreForgotten(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	bound, waiting, gone := pendingPod("bound"), pendingPod("waiting"), pendingPod("gone")
	bound.Spec.NodeName = "a"
	c := newCluster(clk, bound, waiting)
	for _, p := range []*corev1.Pod{bound, waiting, gone} {
		c.Nominations().Nominate(p, "general-abcde")
		c.Nominations().Rejected(p)
	}
	clk.Step(time.Second)
	snapshotPending(t, c)
	if c.Nominations().Nominated(bound) || c.Nominations().Nominated(gone) || !c.Nominations().Nominated(waiting) {
		t.Errorf("nominated: bound %v, gone %v, waiting %v; want only the pod still pending", c.Nominations().Nominated(bound), c.Nominations().Nominated(gone), c.Nominations().Nominated(waiting))
	}
	if len(c.rejected) != 1 {
		t.Errorf("%d refusals remembered, want the pending pod's", len(c.rejected))
	}
}

func TestProvisionable(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(*corev1.Pod)
		want bool
	}{
		{"marked unschedulable", func(*corev1.Pod) {}, true},
		{"not looked at by the scheduler yet", func(p *corev1.Pod) { p.Status.Conditions = nil }, true},
		{"gated", func(p *corev1.Pod) {
			p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}, false},
		// Its gate lifted a moment ago, as one not looked at yet.
		{"gate lifted", func(p *corev1.Pod) { p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated }, true},
		{"gated by the CapacityBudget gate alone", func(p *corev1.Pod) {
			p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: policyv1.CapacityBudgetGate}}
		}, true},
		{"gated, not looked at yet", func(p *corev1.Pod) {
			p.Status.Conditions = nil
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}, false},
		{"another scheduler's, not looked at yet", func(p *corev1.Pod) {
			p.Status.Conditions = nil
			p.Spec.SchedulerName = "batch-scheduler"
		}, false},
		{"another scheduler's, marked unschedulable", func(p *corev1.Pod) { p.Spec.SchedulerName = "batch-scheduler" }, true},
		{"nominated by a preemption", func(p *corev1.Pod) {
			p.Status.Conditions = nil
			p.Status.NominatedNodeName = "node-1"
		}, false},
		{"bound", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }, false},
		{"a DaemonSet's", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}}
		}, false},
		{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, false},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pendingPod("p")
			tc.f(p)
			if got := scheduling.IsProvisionable(p); got != tc.want {
				t.Fatalf("Provisionable = %v, want %v", got, tc.want)
			}
		})
	}
}

// A ReplicaSet with fewer pods than it wants is still creating them; only the ReplicaSets
// asked about count.
func TestPodsComing(t *testing.T) {
	rs := func(name string, want, have int32, deleting bool) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: appsv1.ReplicaSetSpec{Replicas: &want}, Status: appsv1.ReplicaSetStatus{Replicas: have}}
		if deleting {
			r.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			r.Finalizers = []string{"example.com/keep"}
		}
		return r
	}
	c := NewCluster(fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(
		rs("done", 3, 3, false), rs("shrinking", 1, 3, false), rs("creating", 334, 120, false),
		rs("deleting", 3, 0, true), rs("quota", 5, 2, false),
	).Build(), clocktesting.NewFakeClock(time.Now()))
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "default", Name: name} }
	for _, tc := range []struct {
		name  string
		asked []types.NamespacedName
		want  bool
	}{
		{"none", nil, false},
		{"all created", []types.NamespacedName{key("done")}, false},
		{"scaling down", []types.NamespacedName{key("shrinking")}, false},
		{"one creating", []types.NamespacedName{key("done"), key("creating")}, true},
		{"being deleted", []types.NamespacedName{key("deleting")}, false},
		{"gone", []types.NamespacedName{key("missing")}, false},
		{"another batch's short ReplicaSet", []types.NamespacedName{key("done")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.PodsComing(context.Background(), tc.asked); got != tc.want {
				t.Fatalf("PodsComing = %v, want %v", got, tc.want)
			}
		})
	}
	pod := pendingPod("web-5d8f-abcde")
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f", Controller: ptr.To(true)}}
	if got := ReplicaSetOf(pod); got != key("web-5d8f") {
		t.Errorf("ReplicaSetOf = %v", got)
	}
	if got := ReplicaSetOf(pendingPod("bare")); got.Name != "" {
		t.Errorf("a bare pod has no ReplicaSet, got %v", got)
	}
}

// A NodeClaim the provisioner created holds the pods nominated to it even before the cache
// shows it: a batch right after the one that created it would otherwise solve those pods again
// and launch for them twice.
func TestCreatedClaimsCountBeforeTheCacheShowsThem(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	pod := pendingPod("web")
	c := newCluster(clk, pod)
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-abcde", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}}}
	c.Created(claim)
	c.Nominations().Nominate(pod, claim.Name)

	held := func() bool {
		snap, err := c.Snapshot(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range snap.Pods {
			if p.Name == pod.Name {
				return false
			}
		}
		for _, n := range snap.Nodes {
			if n.Name == claim.Name && n.InFlight && len(n.Pods) == 1 {
				return true
			}
		}
		t.Fatalf("the pod is neither pending nor on the created NodeClaim: %+v", snap.Nodes)
		return false
	}
	if !held() {
		t.Fatal("the NodeClaim was created a moment ago: its pod waits for it")
	}
	clk.Step(CreatedClaimTTL + time.Second)
	if held() {
		t.Fatal("a NodeClaim the cache never showed in 10 s is gone: its pod is solved again")
	}
}

// newCluster is a cluster whose model holds the objects (as its informers would give them),
// over a fake client that holds them too (for the few reads outside the model).
func newCluster(clk *clocktesting.FakeClock, objs ...client.Object) *Cluster {
	c := NewCluster(fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(objs...).Build(), clk)
	for _, o := range objs {
		c.Update(o)
	}
	return c
}

// What policies held back counts only pods still pending: deleted, bound, or replaced by a
// pod of the same name, they no longer count; a namespace the batch accounted for reads 0.
func TestPolicyBlockedGoesBackToZero(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	a, b, c2 := pendingPod("a"), pendingPod("b"), pendingPod("c")
	c := newCluster(clk, a, b, c2)
	c.PolicyBlocks().SetPolicyBlocked([]string{"default", "other"}, []*corev1.Pod{a, b, c2})
	if got := c.PolicyBlocks().PolicyBlockedByNamespace(); got["default"] != 3 || got["other"] != 0 || len(got) != 2 {
		t.Fatalf("blocked %v, want default 3, other 0", got)
	}
	c.Delete(a)
	bound := b.DeepCopy()
	bound.Spec.NodeName = "n"
	c.Update(bound)
	again := c2.DeepCopy()
	again.UID = "another"
	c.Update(again)
	if got := c.PolicyBlocks().PolicyBlocked("default"); got != 0 {
		t.Errorf("blocked %d after the pods went, bound or were replaced; want 0", got)
	}
	c.PolicyBlocks().SetPolicyBlocked(nil, nil)
	if got := c.PolicyBlocks().PolicyBlockedByNamespace(); len(got) != 0 {
		t.Errorf("a batch of no pods leaves %v", got)
	}
}
