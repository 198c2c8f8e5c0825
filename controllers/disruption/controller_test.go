package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	cloudfake "github.com/karpenter-policy/karpenter/cloudprovider/fake"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/metrics/metricstest"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// The Unconsolidatable event is told once per node and reason within UnconsolidatableEvery:
// the same reason again waits, a new reason is told at once, and after the interval the old
// one is told again.
func TestUnconsolidatableEventsAreRateLimitedPerReason(t *testing.T) {
	rec := &objectRecorder{}
	clk := clocktesting.NewFakeClock(now)
	ctl := NewController(nil, nil, nil, rec, clk, nil, methods.Options{})
	snap := func(reason string) *methods.Cluster {
		return &methods.Cluster{Candidates: []*methods.Candidate{{Node: &scheduling.Node{Name: "a"}, NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}},
			Unconsolidatable: []methods.Unconsolidatable{{Node: "a", Reason: reason}}}
	}
	told := func() int {
		n := 0
		for _, e := range rec.take() {
			if strings.HasPrefix(e, "NodeClaim/") {
				n++
			}
		}
		return n
	}
	for i, step := range []struct {
		advance time.Duration
		reason  string
		want    int
	}{
		{0, "pods are nominated to it", 1},
		{10 * time.Second, "pods are nominated to it", 0},
		{10 * time.Second, "denied by policy: office hours", 1},
		{10 * time.Second, "denied by policy: office hours", 0},
		{UnconsolidatableEvery, "denied by policy: office hours", 1},
	} {
		clk.Step(step.advance)
		ctl.noteUnconsolidatable(snap(step.reason))
		if got := told(); got != step.want {
			t.Errorf("step %d (%q): %d events, want %d", i, step.reason, got, step.want)
		}
	}
	if len(ctl.noted) != 1 {
		t.Errorf("%d reasons remembered, want 1 (the old ones forgotten)", len(ctl.noted))
	}
}

// fleet is a NodePool "general" of n drifted m5.large nodes, each with a NodeClaim and a pod,
// and a Drifted budget of `budget` nodes.
type fleet struct {
	client  client.Client
	clock   *clocktesting.FakeClock
	cluster *state.Cluster
	ctl     *Controller
	cloud   *cloudfake.Provider
}

func catalog() []*cloudprovider.InstanceType {
	mk := func(name string, cpu int, price float64) *cloudprovider.InstanceType {
		it := &cloudprovider.InstanceType{Name: name, Labels: map[string]string{corev1.LabelInstanceTypeStable: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 4*cpu)),
				corev1.ResourcePods: resource.MustParse("110")}}
		for _, z := range []string{"z-a", "z-b"} {
			it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true})
		}
		return it
	}
	return []*cloudprovider.InstanceType{mk("m5.large", 2, 0.1), mk("m5.xlarge", 4, 0.2)}
}

func newFleet(t *testing.T, n int, budget string) *fleet {
	t.Helper()
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general", UID: "np"}, Spec: karpv1.NodePoolSpec{
		Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}}},
		Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.MustParseNillableDuration("Never"),
			Budgets: []karpv1.Budget{{Nodes: budget, Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}}}}}
	objs := []client.Object{np}
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)), Labels: map[string]string{
			karpv1.NodePoolLabelKey: "general", corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "z-a", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}},
			Spec: corev1.NodeSpec{ProviderID: "fake://" + name},
			Status: corev1.NodeStatus{Allocatable: catalog()[0].Allocatable(), Capacity: catalog()[0].Capacity,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)), Labels: map[string]string{karpv1.NodePoolLabelKey: "general"},
			Finalizers: []string{karpv1.TerminationFinalizer}},
			Status: karpv1.NodeClaimStatus{NodeName: name, ProviderID: "fake://" + name, Capacity: catalog()[0].Capacity, Conditions: []metav1.Condition{
				{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized"},
				{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodeClassDrifted", LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(n-i) * time.Minute))}}}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		objs = append(objs, node, nc, pod)
	}
	f := &fleet{clock: clocktesting.NewFakeClock(now), cloud: cloudfake.New()}
	f.cloud.InstanceTypes = catalog()
	f.client = fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(objs...).WithStatusSubresource(&karpv1.NodeClaim{}).Build()
	f.cluster = state.NewCluster(f.client, f.clock)
	f.sync(t)
	f.ctl = NewController(f.client, f.cloud, f.cluster, events.NewFakeRecorder(1000), f.clock, nil, methods.Options{})
	return f
}

// sync gives the model what the API server holds, as its informers would.
func (f *fleet) sync(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var nodes corev1.NodeList
	var claims karpv1.NodeClaimList
	var pods corev1.PodList
	var pools karpv1.NodePoolList
	for _, l := range []client.ObjectList{&nodes, &claims, &pods, &pools} {
		if err := f.client.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range f.cluster.Objects().Nodes {
		if err := f.client.Get(ctx, client.ObjectKeyFromObject(o), &corev1.Node{}); apierrors.IsNotFound(err) {
			f.cluster.Delete(o)
		}
	}
	for _, o := range f.cluster.Objects().NodeClaims {
		if err := f.client.Get(ctx, client.ObjectKeyFromObject(o), &karpv1.NodeClaim{}); apierrors.IsNotFound(err) {
			f.cluster.Delete(o)
		}
	}
	for i := range nodes.Items {
		f.cluster.Update(&nodes.Items[i])
	}
	for i := range claims.Items {
		f.cluster.Update(&claims.Items[i])
	}
	for i := range pods.Items {
		f.cluster.Update(&pods.Items[i])
	}
	for i := range pools.Items {
		f.cluster.Update(&pools.Items[i])
	}
}

// candidateNamed is the snapshot's candidate of that name.
func candidateNamed(t *testing.T, mc *methods.Cluster, name string) *methods.Candidate {
	t.Helper()
	for _, c := range mc.Candidates {
		if c.Name() == name {
			return c
		}
	}
	t.Fatalf("no candidate %s", name)
	return nil
}

// reconcileAll runs the orchestrator once over every command in flight.
func (f *fleet) reconcileAll(t *testing.T) {
	t.Helper()
	o := f.ctl.Orchestrator
	o.mu.Lock()
	var ids []string
	for id := range o.commands {
		ids = append(ids, id)
	}
	o.mu.Unlock()
	for _, id := range ids {
		if _, err := o.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: id}}); err != nil {
			t.Fatalf("reconciling %s: %v", id, err)
		}
	}
	for len(o.source) > 0 {
		<-o.source
	}
	f.sync(t)
}

// disrupting counts the nodes that are tainted or whose NodeClaim is being deleted.
func (f *fleet) disrupting(t *testing.T) (tainted, deleting int) {
	t.Helper()
	var nodes corev1.NodeList
	if err := f.client.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if hasTaint(&n, karpv1.DisruptedTaintKey) {
			tainted++
		}
	}
	var claims karpv1.NodeClaimList
	_ = f.client.List(context.Background(), &claims)
	for _, nc := range claims.Items {
		if nc.Labels[CommandLabel] == "" && (nc.DeletionTimestamp != nil) {
			deleting++
		}
	}
	return tainted, deleting
}

func (f *fleet) initializeReplacements(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	var claims karpv1.NodeClaimList
	if err := f.client.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Labels[CommandLabel] == "" || meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			continue
		}
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized"})
		if err := f.client.Status().Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
		n++
	}
	f.sync(t)
	return n
}

// A Drifted budget of 3 on six drifted nodes: passes hand over one command each until three
// are in flight, then none while they are; each command taints its node, launches its
// replacement, and once the replacement is initialized deletes the node. Never four.
func TestDriftRollsThreeAtATimeNeverFour(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, 6, "3")
	labels := []string{"drifted", "general", karpv1.CapacityTypeOnDemand, "", "graceful"}
	disruptedBefore := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues(labels...))
	podsBefore := testutil.ToFloat64(metrics.PodsDisruptionInitiated.WithLabelValues(labels...))
	byPool := metrics.DisruptionDecisionsByNodePool.WithLabelValues("general", "replace", "drifted", "")
	byPoolBefore := testutil.ToFloat64(byPool)
	evaluated := map[string]string{"reason": "drifted", "consolidation_type": ""}
	evaluatedBefore, _ := metricstest.Observations(t, metrics.DisruptionEvaluationDuration, evaluated)
	solved := map[string]string{"controller": "disruption"}
	solvedBefore, _ := metricstest.Observations(t, metrics.SchedulingDuration, solved)
	for pass := range 5 {
		if _, err := f.ctl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := f.ctl.Orchestrator.Len(), min(pass+1, 3); got != want {
			t.Fatalf("after pass %d: %d commands in flight, want %d", pass, got, want)
		}
	}
	f.reconcileAll(t)
	if tainted, _ := f.disrupting(t); tainted != 3 {
		t.Fatalf("%d nodes tainted, want the 3 of the commands in flight", tainted)
	}
	for range 3 {
		if _, err := f.ctl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f.ctl.Orchestrator.Len() != 3 {
		t.Fatalf("with three tainted the budget allows no fourth: %d in flight", f.ctl.Orchestrator.Len())
	}
	if n := f.initializeReplacements(t); n != 3 {
		t.Fatalf("%d replacements launched, want 3", n)
	}
	f.reconcileAll(t)
	if f.ctl.Orchestrator.Len() != 0 {
		t.Fatalf("with their replacements initialized the commands finish: %d in flight", f.ctl.Orchestrator.Len())
	}
	if _, deleting := f.disrupting(t); deleting != 3 {
		t.Fatalf("%d candidates deleted, want 3", deleting)
	}
	if n := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues(labels...)) - disruptedBefore; n != 3 {
		t.Errorf("karpenter_nodeclaims_disrupted_total%v rose by %v, want 3", labels, n)
	}
	if n := testutil.ToFloat64(metrics.PodsDisruptionInitiated.WithLabelValues(labels...)) - podsBefore; n != 3 {
		t.Errorf("karpenter_pods_disruption_initiated_total%v rose by %v, want 3 (a pod each)", labels, n)
	}
	if n, _ := metricstest.Observations(t, metrics.DisruptionEvaluationDuration, evaluated); n-evaluatedBefore < 3 {
		t.Errorf("%d drift evaluations observed, want one for each pass that launched (3 or more)", n-evaluatedBefore)
	}
	if n, _ := metricstest.Observations(t, metrics.SchedulingDuration, solved); n-solvedBefore < 3 {
		t.Errorf("%d disruption solves observed, want a simulation for each replacement (3 or more)", n-solvedBefore)
	}
	if n := testutil.ToFloat64(byPool) - byPoolBefore; n != 3 {
		t.Errorf("karpenter_voluntary_disruption_decisions_by_nodepool_total{general,replace,drifted} rose by %v, want 3", n)
	}
	// The deleted nodes still drain: they count against the budget until they are gone.
	if _, err := f.ctl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if f.ctl.Orchestrator.Len() != 0 {
		t.Fatalf("while 3 nodes drain the budget allows nothing: %d in flight", f.ctl.Orchestrator.Len())
	}
}

// A replacement that fails (deleted) rolls its command back: the candidate loses its taint,
// its NodeClaim the command and the DisruptionReason condition.
func TestFailedReplacementRollsBack(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, 2, "1")
	if _, err := f.ctl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	f.reconcileAll(t)
	var claims karpv1.NodeClaimList
	_ = f.client.List(ctx, &claims)
	var candidate string
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Labels[CommandLabel] != "" {
			if err := f.client.Delete(ctx, nc); err != nil {
				t.Fatal(err)
			}
		}
		if nc.Annotations[CommandAnnotation] != "" {
			candidate = nc.Name
		}
	}
	if candidate == "" {
		t.Fatal("no candidate was marked")
	}
	f.sync(t)
	f.clock.Step(cacheGrace + time.Second)
	f.reconcileAll(t)
	assertUnmarked(t, f, candidate)
	if f.ctl.Orchestrator.Len() != 0 {
		t.Fatal("a rolled back command is no longer in flight")
	}
}

// A replacement that does not initialize within ReplacementTimeout rolls its command back and
// is kept, released from the command, as upstream keeps it. While it stays uninitialized no
// command counts on its room, so the drifted node is not tried again (a second replacement
// would be launched to fail the same way); once it is gone, the node is.
func TestReplacementTimeoutRollsBack(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, 1, "1")
	failures := metrics.DisruptionQueueFailures.WithLabelValues("replace", "drifted", "")
	failuresBefore := testutil.ToFloat64(failures)
	if _, err := f.ctl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	f.reconcileAll(t)
	var claims karpv1.NodeClaimList
	_ = f.client.List(ctx, &claims, client.HasLabels{CommandLabel})
	if len(claims.Items) != 1 {
		t.Fatalf("%d replacements, want 1", len(claims.Items))
	}
	replacement := claims.Items[0].Name
	f.clock.Step(ReplacementTimeout + time.Second)
	f.reconcileAll(t)
	assertUnmarked(t, f, "node-0")
	if n := testutil.ToFloat64(failures) - failuresBefore; n != 1 {
		t.Errorf("karpenter_voluntary_disruption_queue_failures_total{replace,drifted} rose by %v, want 1 (the replacement)", n)
	}
	kept := &karpv1.NodeClaim{}
	if err := f.client.Get(ctx, client.ObjectKey{Name: replacement}, kept); err != nil {
		t.Fatalf("the replacement that did not initialize in time is kept: %v", err)
	}
	if kept.DeletionTimestamp != nil || kept.Labels[CommandLabel] != "" {
		t.Fatalf("the kept replacement is released from its command, not deleted: labels %v, deleting %v", kept.Labels, kept.DeletionTimestamp != nil)
	}
	// The node is left alone (untainted, where anyone can see it) for RollbackHold; after it,
	// as long as the replacement has not initialized, the pod would go there, which no command
	// counts on.
	f.sync(t)
	if _, err := f.ctl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.ctl.Orchestrator.Len(); n != 0 {
		t.Fatalf("right after the rollback a pass started %d commands on the held node", n)
	}
	f.clock.Step(RollbackHold)
	if _, err := f.ctl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.ctl.Orchestrator.Len(); n != 0 {
		t.Fatalf("with the kept replacement not initialized the drifted node is tried again: %d commands", n)
	}
	if err := f.client.Delete(ctx, kept); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	if _, err := f.ctl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.ctl.Orchestrator.Len(); n != 1 {
		t.Fatalf("with the kept replacement gone the drifted node is not tried again: %d commands", n)
	}
}

func assertUnmarked(t *testing.T, f *fleet, name string) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{}
	nc := &karpv1.NodeClaim{}
	if err := f.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	if hasTaint(node, karpv1.DisruptedTaintKey) || nc.Annotations[CommandAnnotation] != "" ||
		meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) != nil || nc.DeletionTimestamp != nil {
		t.Fatalf("%s is still marked: taints %v, annotations %v, conditions %v", name, node.Spec.Taints, nc.Annotations, nc.Status.Conditions)
	}
}

// A manager that starts after another stopped adopts what is in flight from the objects: a
// command whose replacements all exist is tracked to its end; one that had not created its
// replacement is rolled back; a taint no command accounts for is removed, unless its node is
// being deleted (termination taints it).
func TestAdoptOrRollBackWhatIsInFlight(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, 4, "3")
	for range 3 {
		if _, err := f.ctl.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f.reconcileAll(t)
	// The manager stops: a new one starts with nothing in memory. One command's replacement
	// is removed as if it had never been created; node-3 carries a stray taint.
	var claims karpv1.NodeClaimList
	_ = f.client.List(ctx, &claims, client.HasLabels{CommandLabel})
	if len(claims.Items) != 3 {
		t.Fatalf("%d replacements, want 3", len(claims.Items))
	}
	if err := f.client.Delete(ctx, &claims.Items[0]); err != nil {
		t.Fatal(err)
	}
	lost := claims.Items[0].Labels[CommandLabel]
	var all0 karpv1.NodeClaimList
	stray := &corev1.Node{}
	_ = f.client.Get(ctx, client.ObjectKey{Name: "node-3"}, stray)
	if stray.Annotations[CommandAnnotation] != "" {
		t.Fatal("node-3 must be outside the commands for this test")
	}
	stray.Spec.Taints = append(stray.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	if err := f.client.Update(ctx, stray); err != nil {
		t.Fatal(err)
	}
	// One adopted command is a repair that bounds its drain: the bound survives the restart.
	var bounded string
	_ = f.client.List(ctx, &all0)
	for i := range all0.Items {
		nc := &all0.Items[i]
		if id := nc.Annotations[CommandAnnotation]; id != "" && id != lost && bounded == "" {
			bounded = nc.Name
			nc.Annotations[DrainBoundAnnotation] = "45s"
			if err := f.client.Update(ctx, nc); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.sync(t)
	next := NewController(f.client, f.cloud, f.cluster, events.NewFakeRecorder(1000), f.clock, nil, methods.Options{})
	if err := next.Orchestrator.Adopt(ctx, f.cluster.Objects()); err != nil {
		t.Fatal(err)
	}
	f.ctl = next
	f.sync(t)
	if got := next.Orchestrator.Len(); got != 2 {
		t.Fatalf("%d commands adopted, want the 2 whose replacements exist", got)
	}
	var all karpv1.NodeClaimList
	_ = f.client.List(ctx, &all)
	for _, nc := range all.Items {
		if nc.Annotations[CommandAnnotation] == lost {
			t.Errorf("the command that lost its replacement is rolled back, but %s still carries it", nc.Name)
		}
	}
	if _ = f.client.Get(ctx, client.ObjectKey{Name: "node-3"}, stray); hasTaint(stray, karpv1.DisruptedTaintKey) {
		t.Error("a taint no command accounts for is removed")
	}
	if n := f.initializeReplacements(t); n != 2 {
		t.Fatalf("%d replacements to initialize, want 2", n)
	}
	f.reconcileAll(t)
	if _, deleting := f.disrupting(t); deleting != 2 || next.Orchestrator.Len() != 0 {
		t.Fatalf("the adopted commands finish: %d candidates deleted, %d in flight", deleting, next.Orchestrator.Len())
	}
	if tainted, _ := f.disrupting(t); tainted != 2 {
		t.Fatalf("only the deleted candidates stay tainted: %d", tainted)
	}
	_ = f.client.List(ctx, &all)
	for _, nc := range all.Items {
		deadline, want := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey], ""
		if nc.Name == bounded {
			want = now.Add(45 * time.Second).UTC().Format(time.RFC3339)
		}
		if deadline != want {
			t.Errorf("nodeclaim %s: termination deadline %q, want %q", nc.Name, deadline, want)
		}
	}
}

// A blocked node's event is DisruptionBlocked and names what blocks it (a pod's
// do-not-disrupt names the pod); a node no method acts on is Unconsolidatable.
func TestBlockedNodesAreDisruptionBlocked(t *testing.T) {
	rec := &objectRecorder{}
	ctl := NewController(nil, nil, nil, rec, clocktesting.NewFakeClock(now), nil, methods.Options{})
	blocked := "pod default/db-0 has karpenter.sh/do-not-disrupt"
	ctl.noteUnconsolidatable(&methods.Cluster{Candidates: []*methods.Candidate{
		{Node: &scheduling.Node{Name: "a"}, NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, Blocked: blocked},
		{Node: &scheduling.Node{Name: "b"}, NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "b"}}}},
		Unconsolidatable: []methods.Unconsolidatable{{Node: "a", Reason: blocked}, {Node: "b", Reason: "no cheaper replacement"}}})
	got := rec.take()
	want := []string{"NodeClaim/a Normal DisruptionBlocked " + blocked, "Node/a Normal DisruptionBlocked " + blocked,
		"NodeClaim/b Normal Unconsolidatable no cheaper replacement", "Node/b Normal Unconsolidatable no cheaper replacement"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// A repair command bounds its node's drain: the NodeClaim's termination deadline is set to now
// plus the bound as it is deleted (0: now, its pods deleted at once), never later than a
// deadline already set; without a bound the NodeClaim's own period applies and none is set.
func TestRepairBoundsTheDrain(t *testing.T) {
	d := func(d time.Duration) *time.Duration { return &d }
	for _, tc := range []struct {
		name      string
		bound     *time.Duration
		set, want string // the deadline before, and after
		mode      string // the termination mode counted ("": the NodeClaim's own)
	}{
		{name: "forceful", bound: d(0), want: now.UTC().Format(time.RFC3339), mode: "forceful"},
		{name: "bounded", bound: d(45 * time.Second), want: now.Add(45 * time.Second).UTC().Format(time.RFC3339), mode: "eventual"},
		{name: "an earlier deadline stays", bound: d(45 * time.Second), set: now.Add(10 * time.Second).UTC().Format(time.RFC3339),
			want: now.Add(10 * time.Second).UTC().Format(time.RFC3339), mode: "eventual"},
		{name: "a later one is tightened", bound: d(45 * time.Second), set: now.Add(time.Hour).UTC().Format(time.RFC3339),
			want: now.Add(45 * time.Second).UTC().Format(time.RFC3339), mode: "eventual"},
		{name: "unbounded", bound: nil, want: ""}, // the NodeClaim's own mode
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t, 3, "1")
			if tc.set != "" {
				nc := &karpv1.NodeClaim{}
				if err := f.client.Get(context.Background(), client.ObjectKey{Name: "node-0"}, nc); err != nil {
					t.Fatal(err)
				}
				if nc.Annotations == nil {
					nc.Annotations = map[string]string{}
				}
				nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = tc.set
				if err := f.client.Update(context.Background(), nc); err != nil {
					t.Fatal(err)
				}
			}
			mc, err := f.ctl.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cand := candidateNamed(t, mc, "node-0")
			cand.NodeClaim.Status.ImageID = "ami-0repaired"
			// As upstream labels it: the condition in snake case, the image, the drain's mode.
			mode := tc.mode
			if mode == "" {
				mode = metrics.TerminationMode(cand.NodeClaim)
			}
			counted := metrics.NodeClaimsUnhealthyDisrupted.WithLabelValues("example_unhealthy", cand.NodePool.Name, cand.CapacityType, "ami-0repaired", mode)
			before := testutil.ToFloat64(counted)
			f.ctl.Orchestrator.Add(mc, &methods.Command{Reason: methods.ReasonUnhealthy, Decision: methods.DecisionDelete, Candidates: []*methods.Candidate{cand},
				Forceful: true, DrainBound: tc.bound, Condition: "ExampleUnhealthy"})
			f.reconcileAll(t)
			if got := testutil.ToFloat64(counted) - before; got != 1 {
				t.Errorf("karpenter_nodeclaims_unhealthy_disrupted_total{condition=\"example_unhealthy\",image_id=\"ami-0repaired\",termination_mode=%q} rose by %v, want 1", mode, got)
			}
			nc := &karpv1.NodeClaim{}
			if err := f.client.Get(context.Background(), client.ObjectKey{Name: "node-0"}, nc); err != nil {
				t.Fatal(err)
			}
			if nc.DeletionTimestamp == nil || nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] != tc.want {
				t.Fatalf("deleted with the deadline %q: deletion %v, annotations %v", tc.want, nc.DeletionTimestamp, nc.Annotations)
			}
		})
	}
}

// A reboot command commits the reboot on the NodeClaim (Rebooting True RebootRequested, the
// drain's bound, DisruptionReason) and nothing else: no taint, no deletion. The same command
// again, from a pass that read a stale model, commits nothing more, and the history counts one.
func TestRepairRebootCommits(t *testing.T) {
	f := newFleet(t, 3, "1")
	mc, err := f.ctl.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cand := candidateNamed(t, mc, "node-0")
	drain := 90 * time.Second
	cmd := &methods.Command{Reason: methods.ReasonUnhealthy, Decision: methods.DecisionReboot, Candidates: []*methods.Candidate{cand},
		Condition: "ExampleUnhealthy", RebootDrain: &drain}
	for range 2 {
		f.ctl.Orchestrator.Add(mc, cmd)
		f.reconcileAll(t)
	}
	nc := &karpv1.NodeClaim{}
	if err := f.client.Get(context.Background(), client.ObjectKey{Name: "node-0"}, nc); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != karpv1.RebootReasonRequested || !strings.Contains(cond.Message, "ExampleUnhealthy") {
		t.Fatalf("Rebooting %+v", cond)
	}
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDisruptionReason) || nc.Annotations[karpv1.RebootTerminationGracePeriodAnnotationKey] != "1m30s" {
		t.Errorf("DisruptionReason %v, drain %q", nc.Status.Conditions, nc.Annotations[karpv1.RebootTerminationGracePeriodAnnotationKey])
	}
	if tainted, deleting := f.disrupting(t); tainted != 0 || deleting != 0 {
		t.Errorf("tainted %d, deleting %d: a reboot removes nothing", tainted, deleting)
	}
	if n := f.ctl.Orchestrator.reboots.Count(nc, now); n != 1 {
		t.Errorf("history counts %d reboots, want 1", n)
	}
}
