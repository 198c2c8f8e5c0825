package chaos

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
)

// only runs one of TestChaos's two runs, without the comparison: for checking that an
// invariant fails when its protection is removed.
var only = flag.String("chaos.only", "", "clean or faulted: run only that run of TestChaos")

// size is how big a chaos run is.
type size struct {
	up, down int32
	// kills is the most SIGKILLs of a manager in each phase.
	kills int
	// budgetNodes is the NodePool's disruption budget.
	budgetNodes int
	timeout     time.Duration
}

var (
	short    = size{up: 100, down: 10, kills: 3, budgetNodes: 3, timeout: 5 * time.Minute}
	fullSize = size{up: 500, down: 50, kills: 8, budgetNodes: 5, timeout: 10 * time.Minute}
)

// cappedLimit is the capped namespace's hourly limit, in USD: about two thirds of what its
// pods ask for in the short form (25 pods of 1 vCPU ran at $0.46/h), a sixth in the full one.
const cappedLimit = "0.30"

// phases name the scenario's parts, in order, for the capacity launched in each: the guarded
// pods' nodes before the load, then the scale-up, the scale-down and the drift.
var phases = []string{"before", "scale-up", "scale-down", "drift"}

// result is what a run measured.
type result struct {
	launchedCPU float64
	// byPhase is launchedCPU by the phase each NodeClaim was first seen launched in.
	byPhase map[string]float64
	kills   []string
}

// A 500-pod scale-up, a 500 -> 50 scale-down (100 -> 10 in the short form) and a drift of
// every node that is left, once without faults and once with the leader SIGKILLed at random moments, kube-apiserver and etcd
// restarted once each, and half the launches in one zone failing for insufficient capacity. Watchers
// sample every second; the faulted run must keep every promise the clean one does, and its
// scale-up and scale-down launch no more than 10% more capacity.
func TestChaos(t *testing.T) {
	sz := short
	if *full {
		sz = fullSize
	}
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -chaos.seed=%d)", s, s)
	rng := rand.New(rand.NewPCG(uint64(s), 0))

	switch *only {
	case "clean":
		scenario(t, "chaos-clean", sz, nil)
		return
	case "faulted":
		scenario(t, "chaos-faulted", sz, rng)
		return
	}
	clean := scenario(t, "chaos-clean", sz, nil)
	faulted := scenario(t, "chaos-faulted", sz, rng)
	t.Logf("launched %.0f vCPU without faults, %.0f with (%s)", clean.launchedCPU, faulted.launchedCPU, strings.Join(faulted.kills, ", "))
	for _, phase := range phases {
		t.Logf("  %s: %.0f vCPU without faults, %.0f with", phase, clean.byPhase[phase], faulted.byPhase[phase])
	}
	// The bound is on what the scale-up and the scale-down launch: capacity for the same pods,
	// which a fault must not make the manager launch twice. The drift replaces whatever
	// nodes the scale-down's consolidation happened to leave, so what it launches follows
	// that end state, not the faults; it is reported, not bounded.
	cleanCPU, faultedCPU := clean.byPhase["scale-up"]+clean.byPhase["scale-down"], faulted.byPhase["scale-up"]+faulted.byPhase["scale-down"]
	if faultedCPU > 1.1*cleanCPU {
		t.Errorf("the faulted run's scale-up and scale-down launched %.0f vCPU, more than 10%% over the clean run's %.0f", faultedCPU, cleanCPU)
	}
}

// scenario runs the scale-up and scale-down in namespace ns, with faults when rng is set,
// and checks every invariant its watcher kept.
func scenario(t *testing.T, ns string, sz size, rng *rand.Rand) result {
	ctx, cancel := context.WithTimeout(context.Background(), 3*sz.timeout)
	defer cancel()
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	faultyClass := func(c *kwokv1alpha1.KWOKNodeClass) {
		if rng != nil {
			// Half the launches in one zone fail: the launch is retried elsewhere, with the
			// same types in another zone, so capacity stays comparable with the clean run.
			c.Spec.InsufficientCapacity = &kwokv1alpha1.InsufficientCapacityInjection{Percent: 50,
				Offerings: []kwokv1alpha1.OfferingSelector{{Zone: catalog.EmbeddedZones[0]}}}
		}
	}
	poolSpec := func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("0s")
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: fmt.Sprint(sz.budgetNodes)}}
		// Nodes of 4 to 16 vCPU: a scale-down then leaves nodes to empty and nodes to replace
		// by smaller ones (evicting guarded pods), and the runs stay short.
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
			Key: karpv1.LabelInstanceCPU, Operator: corev1.NodeSelectorOpIn, Values: []string{"4", "8", "16"}})
	}
	np, _ := pool(t, ctx, faultyClass, poolSpec)
	// The capped namespace's pods have a NodePool of their own: what they run then depends
	// on the budget alone, not on how the load's nodes happen to leave room, and the clean
	// and faulted runs compare the load's capacity only. Sharing room across namespaces under
	// the budget is test/e2e's TestCapacityBudgetGateKeepsHeldPodsOutOfSpareRoom.
	cappedPool, _ := pool(t, ctx, faultyClass, poolSpec)
	// A second namespace wants more than its CapacityBudget allows: its pods partly stay
	// pending, by design, and its run-rate must never pass the limit, faults or not.
	capped := ns + "-capped"
	budget := cappedNamespace(t, ctx, capped, cappedLimit)
	// The guarded pods spread one per node, so that consolidating the scale-down's nodes
	// evicts them, and their PodDisruptionBudget lets one go at a time.
	pdbMin := 9
	pdb := &k8spolicyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pdbApp},
		Spec: k8spolicyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(int32(pdbMin))),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pdbApp}}}}
	guarded := deployment(ns, pdbApp, 10, np.Name, "500m")
	guarded.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1,
		TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pdbApp}}}}
	create(t, ctx, pdb, guarded)
	cappedLoad := deployment(capped, "capped", sz.up/4, cappedPool.Name, "1")
	waitRunning(t, ctx, ns, pdbApp, 10, 2*time.Minute)

	w := newWatcher(np.Name, ns, budget, pdbMin)
	w.setPhase(phases[0])
	// The guarded pods' nodes are sampled as launched before the load, whenever the watcher's
	// goroutine first runs.
	if err := w.sample(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stopWatching := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { w.run(wctx) })
	watching.Go(func() { w.watchPDB(wctx) })
	var kills []string
	faults := func(phase string, restart string) func() {
		if rng == nil {
			return func() {}
		}
		fctx, stop := context.WithCancel(ctx)
		var done sync.WaitGroup
		done.Go(func() { kills = append(kills, inject(t, fctx, rng, phase, sz.kills, restart)...) })
		return func() { stop(); done.Wait() }
	}

	load := deployment(ns, "load", sz.up, np.Name, "1")
	w.setPhase(phases[1])
	stop := faults("scale-up", "kube-apiserver")
	start := time.Now()
	create(t, ctx, load, cappedLoad)
	waitRunning(t, ctx, ns, "load", int(sz.up), sz.timeout)
	// The capped namespace runs what its budget lets through, the rest gated, before the
	// scale-down takes it away: its pods start after the load's, their NodeClaims launched
	// before their gates are lifted.
	waitCapped(t, ctx, capped, budget, sz.timeout)
	stop()
	t.Logf("%s: %d pods running after %s", ns, sz.up, time.Since(start).Round(time.Second))

	w.setPhase(phases[2])
	stop = faults("scale-down", "etcd")
	start = time.Now()
	if err := kube.Delete(ctx, cappedLoad); err != nil {
		t.Fatal(err)
	}
	if err := kube.Patch(ctx, load, client.RawPatch(client.Merge.Type(), fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, sz.down))); err != nil {
		t.Fatal(err)
	}
	settled := settle(t, ctx, np.Name, ns, int(sz.down), sz.timeout)
	stop()
	t.Logf("%s: scaled down to %d and settled to %s after %s", ns, sz.down, settled, time.Since(start).Round(time.Second))
	waitRunning(t, ctx, ns, "load", int(sz.down), 2*time.Minute)

	// Drift every node: each replacement evicts a guarded pod, three nodes at a time by
	// the budget, one guarded pod at a time by the PodDisruptionBudget.
	w.setPhase(phases[3])
	stop = faults("drift", "")
	start = time.Now()
	before, err := claims(ctx, np.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Patch(ctx, np, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"template":{"metadata":{"labels":{"chaos.example.com/revision":"2"}}}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, sz.timeout, true, func(ctx context.Context) (bool, error) {
		now, err := claims(ctx, np.Name)
		if err != nil {
			return false, nil
		}
		names := map[string]bool{}
		for _, nc := range now {
			names[nc.Name] = true
		}
		for _, nc := range before {
			if names[nc.Name] {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("%s: the drifted nodes were not all replaced within %s", ns, sz.timeout)
	}
	settled = settle(t, ctx, np.Name, ns, int(sz.down), sz.timeout)
	stop()
	t.Logf("%s: replaced %d drifted nodes and settled to %s after %s", ns, len(before), settled, time.Since(start).Round(time.Second))
	waitRunning(t, ctx, ns, pdbApp, 10, 2*time.Minute)
	stopWatching()
	watching.Wait()
	expectNoLeaks(t, ctx, np.Name)
	expectNoLeaks(t, ctx, cappedPool.Name)

	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%s: %d samples (%d failed while the control plane was down); at most %d nodes, %d disrupting at once; PDB down to %d healthy; capped namespace at most $%.2f/h, $%.2f/h from its limit, at most %d pods held back",
		ns, w.samples, w.failed, w.maxNodes, w.maxDisrupting, w.minHealthy, w.maxCost, w.maxOverBudget, w.maxBlocked)
	if w.maxDisrupting > sz.budgetNodes {
		t.Errorf("%s: the NodePool's budget allows %d nodes disrupted at once; seen %s", ns, sz.budgetNodes, w.maxDisruptingAt)
	}
	if w.minHealthy < pdbMin {
		t.Errorf("%s: the PodDisruptionBudget keeps %d pods available; seen %d", ns, pdbMin, w.minHealthy)
	}
	if w.maxOverBudget > 0 {
		t.Errorf("%s: the namespace's run-rate went $%.2f/h over its CapacityBudget of $%s/h", capped, w.maxOverBudget, cappedLimit)
	}
	// The invariant is tested only if the namespace ran pods and wanted more than its budget
	// allowed. How close to the limit it runs is the planner's packing (a new NodeClaim's idle
	// room is charged to the namespaces on it), not a promise.
	if w.maxCost == 0 || w.maxBlocked == 0 {
		t.Errorf("%s: ran at most $%.2f/h with at most %d pods held back, against a limit of $%s/h: the budget never held pods back, so it was not tested", capped, w.maxCost, w.maxBlocked, cappedLimit)
	}
	total, byPhase := w.launchedCPU()
	return result{launchedCPU: total, byPhase: byPhase, kills: kills}
}

// settle waits until the pool has nothing left to consolidate: want pods of load running,
// no node going or tainted, and no NodeClaim created or deleted for 30 seconds.
func settle(t *testing.T, ctx context.Context, np, ns string, want int, timeout time.Duration) string {
	t.Helper()
	var state, last string
	since := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		cs, err := claims(ctx, np)
		if err != nil {
			return false, nil
		}
		var nodes corev1.NodeList
		if kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np}) != nil {
			return false, nil
		}
		n, err := running(ctx, ns, "load")
		if err != nil {
			return false, nil
		}
		var names []string
		busy := n != want
		for _, nc := range cs {
			names = append(names, nc.Name)
			busy = busy || nc.DeletionTimestamp != nil
		}
		for i := range nodes.Items {
			busy = busy || nodes.Items[i].DeletionTimestamp != nil || disrupted(&nodes.Items[i])
		}
		state = fmt.Sprintf("%d NodeClaims, %d nodes, %d of %d pods running", len(cs), len(nodes.Items), n, want)
		if key := strings.Join(names, ","); busy || key != last {
			last, since = key, time.Now()
		}
		return time.Since(since) > 30*time.Second, nil
	}); err != nil {
		t.Fatalf("%s never settled after the scale-down: %s", ns, state)
	}
	return state
}

// inject kills a manager (the leader, three times in four) at random moments of the phase,
// kills times at most, and restarts the named control plane process (if any) once, at a
// random moment in its first seconds; the schedule comes from rng alone. It returns what it did, and when.
func inject(t *testing.T, ctx context.Context, rng *rand.Rand, phase string, kills int, restart string) []string {
	type event struct {
		at   time.Duration
		kill bool
	}
	var events []event
	if restart != "" {
		events = append(events, event{at: time.Duration(2+rng.IntN(15)) * time.Second})
	}
	at := time.Duration(1+rng.IntN(10)) * time.Second
	for range kills {
		events = append(events, event{at: at, kill: true})
		at += time.Duration(5+rng.IntN(20)) * time.Second
	}
	slices.SortFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	var did []string
	start := time.Now()
	for _, e := range events {
		select {
		case <-ctx.Done():
			return did
		case <-time.After(e.at - time.Since(start)):
		}
		when := time.Since(start).Round(100 * time.Millisecond)
		if !e.kill {
			if err := local.Kill(restart); err != nil {
				t.Errorf("killing %s: %v", restart, err)
				continue
			}
			time.Sleep(2 * time.Second)
			if err := local.Restart(restart); err != nil {
				t.Errorf("restarting %s: %v", restart, err)
			}
			did = append(did, fmt.Sprintf("%s: %s restarted at %s", phase, restart, when))
			continue
		}
		victim := local.Leader(ctx)
		if victim == "" || rng.IntN(4) == 0 {
			victim = fmt.Sprintf("karpenter-%d", rng.IntN(managers))
		}
		if !local.Running(victim) {
			continue // down already, the supervisor about to start it again
		}
		if err := local.Kill(victim); err == nil {
			did = append(did, fmt.Sprintf("%s: SIGKILL %s at %s", phase, victim, when))
		}
	}
	return did
}
