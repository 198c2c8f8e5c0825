package chaos

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	watchapi "k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// watcher samples the cluster every second while a scenario runs, and keeps what the
// invariants are checked against: the worst moment of each.
type watcher struct {
	np, ns string
	// budget is the CapacityBudget the capped workload runs under.
	budget client.ObjectKey

	mu sync.Mutex
	// launched is the CPU of every NodeClaim seen launched, by name, and the phase it was
	// first seen launched in.
	launched map[string]launch
	// phase is the scenario's phase now, set by setPhase.
	phase string
	// maxDisrupting is the most nodes of the pool seen going or tainted disrupted at once.
	maxDisrupting   int
	maxDisruptingAt string
	// minHealthy is the fewest guarded pods seen Ready at once, once pdbMin had been
	// reached; -1 before.
	minHealthy, pdbMin int
	// maxOverBudget is the most the namespace's run-rate (running and in flight) was seen
	// over its CapacityBudget's hourly limit, in USD per hour.
	maxOverBudget float64
	// maxBlocked is the most pods the budget was seen holding back (status.blockedPods).
	maxBlocked int
	// maxCost is the most the capped namespace was seen running and in flight, in USD per hour.
	maxCost         float64
	maxNodes        int
	samples, failed int
}

func newWatcher(np, ns string, budget client.ObjectKey, pdbMin int) *watcher {
	return &watcher{np: np, ns: ns, budget: budget, pdbMin: pdbMin, launched: map[string]launch{}, minHealthy: -1, maxOverBudget: math.Inf(-1)}
}

// run samples every second until ctx ends.
func (w *watcher) run(ctx context.Context) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		if err := w.sample(ctx); err != nil {
			w.mu.Lock()
			w.failed++ // the API server may be down: a fault of the scenario
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (w *watcher) sample(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cs, err := claims(ctx, w.np)
	if err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: w.np}); err != nil {
		return err
	}
	var budget policyv1.CapacityBudget
	if err := kube.Get(ctx, w.budget, &budget); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	for _, nc := range cs {
		if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) {
			if cpu, ok := nc.Status.Capacity[corev1.ResourceCPU]; ok {
				if _, seen := w.launched[nc.Name]; !seen {
					w.launched[nc.Name] = launch{cpu: cpu.AsApproximateFloat64(), phase: w.phase}
				}
			}
		}
	}
	disrupting := 0
	for i := range nodes.Items {
		if nodes.Items[i].DeletionTimestamp != nil || disrupted(&nodes.Items[i]) {
			disrupting++
		}
	}
	if disrupting > w.maxDisrupting {
		w.maxDisrupting, w.maxDisruptingAt = disrupting, fmt.Sprintf("%d of %d nodes at %s", disrupting, len(nodes.Items), time.Now().Format(time.TimeOnly))
	}
	w.maxNodes = max(w.maxNodes, len(nodes.Items))
	cost, inFlight, limit := usd(budget.Status.HourlyCost), usd(budget.Status.InFlightHourlyCost), usd(budget.Status.HourlyLimit)
	if limit > 0 {
		w.maxOverBudget = max(w.maxOverBudget, cost+inFlight-limit)
	}
	// The run-rate as the budget counts it, running and in flight, as waitCapped reads it:
	// capped pods still on NodeClaims in flight when the scale-down takes them away cost
	// nothing yet as running.
	w.maxCost = max(w.maxCost, cost+inFlight)
	w.maxBlocked = max(w.maxBlocked, int(budget.Status.BlockedPods))
	return nil
}

// launch is a NodeClaim seen launched: its vCPU and the phase it was first seen in.
type launch struct {
	cpu   float64
	phase string
}

// setPhase names the phase the NodeClaims seen launched from now on belong to.
func (w *watcher) setPhase(phase string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase = phase
}

// launchedCPU is the vCPU of every NodeClaim launched while the watcher ran, in total and by
// phase; the caller holds w.mu.
func (w *watcher) launchedCPU() (float64, map[string]float64) {
	total, byPhase := 0.0, map[string]float64{}
	for _, l := range w.launched {
		total += l.cpu
		byPhase[l.phase] += l.cpu
	}
	return total, byPhase
}

func usd(m policyv1.Money) float64 {
	f, err := strconv.ParseFloat(string(m), 64)
	if err != nil {
		return 0
	}
	return f
}

// pdbApp is the app the scenario's PodDisruptionBudget guards.
const pdbApp = "guarded"

// watchPDB follows the guarded pods through a watch, not by sampling (an evicted pod's
// replacement runs within a second here), and keeps the fewest seen ready at once. A watch
// that ends (the API server restarted) is started again from a fresh list.
func (w *watcher) watchPDB(ctx context.Context) {
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := watchClient.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{"app": pdbApp}); err != nil {
			time.Sleep(time.Second)
			continue
		}
		ready := map[string]bool{}
		for i := range pods.Items {
			ready[pods.Items[i].Name] = podReady(&pods.Items[i])
		}
		w.noteHealthy(ready)
		watch, err := watchClient.Watch(ctx, &corev1.PodList{}, client.InNamespace(w.ns), client.MatchingLabels{"app": pdbApp},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: pods.ResourceVersion}})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range watch.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				break // an error event: list again
			}
			if ev.Type == watchapi.Deleted {
				delete(ready, p.Name)
			} else {
				ready[p.Name] = podReady(p)
			}
			w.noteHealthy(ready)
		}
		watch.Stop()
	}
}

func (w *watcher) noteHealthy(ready map[string]bool) {
	healthy := 0
	for _, r := range ready {
		if r {
			healthy++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.minHealthy < 0 && healthy >= w.pdbMin {
		w.minHealthy = healthy
	}
	if w.minHealthy >= 0 {
		w.minHealthy = min(w.minHealthy, healthy)
	}
}

// podReady is what a PodDisruptionBudget counts as healthy: Ready, and not going.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
