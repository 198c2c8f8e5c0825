package chaos

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

var soakDuration = flag.Duration("soak.duration", 0, "run the soak (make soak) for this long; 0 skips it")

// gauges are the leader's process figures at one moment.
type gauges struct {
	at                    time.Duration
	goroutines, heapBytes float64
	nodes                 int
}

// The soak: random scale-ups and -downs of three Deployments of different sizes for
// -soak.duration, then down to zero. The leader's goroutines and heap stay flat (the last
// quarter's average within 25% of the second quarter's, after warming up), and at the end
// the pool empties with nothing leaked.
func TestSoak(t *testing.T) {
	if *soakDuration <= 0 {
		t.Skip("the soak runs with make soak (-soak.duration)")
	}
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -chaos.seed=%d)", s, s)
	rng := rand.New(rand.NewPCG(uint64(s), 1))
	ctx, cancel := context.WithTimeout(context.Background(), *soakDuration+15*time.Minute)
	defer cancel()
	np, _ := pool(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("10s")
	})
	// Three Deployments in a namespace without a budget, scaled in this order (a seed replays
	// the same scale changes), and one in a namespace whose CapacityBudget holds back part of
	// what it asks for: the CapacityBudget gate's webhook, the held pods' gates and the
	// budget's status run through the soak too, on a pool of their own.
	apps := []struct{ ns, name, cpu string }{
		{"default", "soak-small", "250m"}, {"default", "soak-medium", "1"}, {"default", "soak-large", "3"},
		{soakCapped, "soak-capped", "1"},
	}
	cappedPool, _ := pool(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("10s")
	})
	budget := cappedNamespace(t, ctx, soakCapped, cappedLimit)
	for _, a := range apps {
		p := np.Name
		if a.ns == soakCapped {
			p = cappedPool.Name
		}
		create(t, ctx, deployment(a.ns, a.name, 0, p, a.cpu))
	}
	w := newWatcher(cappedPool.Name, soakCapped, budget, 0)
	wctx, stopWatching := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { w.run(wctx) })
	lead := leader(t, ctx, time.Minute)
	var series []gauges
	start := time.Now()
	nextScale := time.Duration(0)
	scales := 0
	for time.Since(start) < *soakDuration {
		if time.Since(start) >= nextScale {
			for _, a := range apps {
				n := rng.IntN(150)
				if a.ns == soakCapped {
					n = 10 + rng.IntN(50) // more, at times, than its budget lets run
				}
				patch := client.RawPatch(client.Merge.Type(), fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
				if err := kube.Patch(ctx, named(a.ns, a.name), patch); err != nil {
					t.Fatal(err)
				}
			}
			scales++
			nextScale = time.Since(start) + time.Duration(20+rng.IntN(40))*time.Second
		}
		if g, err := sampleGauges(ctx, lead); err == nil {
			g.at = time.Since(start)
			if cs, err := claims(ctx, np.Name); err == nil {
				g.nodes = len(cs)
			}
			series = append(series, g)
		}
		time.Sleep(10 * time.Second)
	}
	if now := local.Leader(ctx); now != lead {
		t.Fatalf("the Lease moved from %s to %s during the soak: its figures are not one process's", lead, now)
	}
	for _, a := range apps {
		if err := kube.Patch(ctx, named(a.ns, a.name), client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"replicas":0}}`))); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d scale changes in %s", scales, *soakDuration)
	report(t, series)
	if len(series) >= 8 {
		q := len(series) / 4
		early, late := mean(series[q:2*q]), mean(series[3*q:])
		if late.goroutines > 1.25*early.goroutines {
			t.Errorf("goroutines grew from %.0f to %.0f on average (second quarter to last)", early.goroutines, late.goroutines)
		}
		if late.heapBytes > 1.25*early.heapBytes {
			t.Errorf("heap grew from %.1f MiB to %.1f MiB on average (second quarter to last)", early.heapBytes/(1<<20), late.heapBytes/(1<<20))
		}
	}
	settle(t, ctx, np.Name, "default", 0, 10*time.Minute)
	settle(t, ctx, cappedPool.Name, soakCapped, 0, 10*time.Minute)
	stopWatching()
	watching.Wait()
	for _, p := range []string{np.Name, cappedPool.Name} {
		expectNoLeaks(t, ctx, p)
		if cs, err := claims(ctx, p); err != nil || len(cs) != 0 {
			t.Errorf("%d NodeClaims of %s left once every Deployment was at zero (%v)", len(cs), p, err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%s: %d samples; at most $%.2f/h, $%.2f/h from its limit of $%s/h, at most %d pods held back",
		soakCapped, w.samples, w.maxCost, w.maxOverBudget, cappedLimit, w.maxBlocked)
	if w.maxOverBudget > 0 {
		t.Errorf("%s: the namespace's run-rate went $%.2f/h over its CapacityBudget of $%s/h", soakCapped, w.maxOverBudget, cappedLimit)
	}
	if w.maxCost == 0 || w.maxBlocked == 0 {
		t.Errorf("%s: ran at most $%.2f/h with at most %d pods held back: the budget never held pods back, so it was not tested", soakCapped, w.maxCost, w.maxBlocked)
	}
	expectBudgetIdle(t, ctx, budget)
}

// soakCapped is the soak's namespace under a CapacityBudget.
const soakCapped = "soak-capped"

// expectBudgetIdle waits, for a minute at most, until the budget's status says what an empty
// namespace costs and holds back: nothing (its figures must not keep their last values).
func expectBudgetIdle(t *testing.T, ctx context.Context, key client.ObjectKey) {
	t.Helper()
	var b policyv1.CapacityBudget
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		if kube.Get(ctx, key, &b) != nil {
			return false, nil
		}
		return usd(b.Status.HourlyCost) == 0 && usd(b.Status.InFlightHourlyCost) == 0 && b.Status.BlockedPods == 0, nil
	}); err != nil {
		t.Errorf("%s: with no pod left, the budget still shows $%s/h running, $%s/h in flight and %d pods blocked",
			key, b.Status.HourlyCost, b.Status.InFlightHourlyCost, b.Status.BlockedPods)
	}
}

// named is the soak's Deployment of that name, to patch.
func named(ns, name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func mean(gs []gauges) gauges {
	var m gauges
	for _, g := range gs {
		m.goroutines += g.goroutines / float64(len(gs))
		m.heapBytes += g.heapBytes / float64(len(gs))
	}
	return m
}

// report logs the series, at most 24 rows of it.
func report(t *testing.T, series []gauges) {
	step := max(1, len(series)/24)
	var b strings.Builder
	fmt.Fprintf(&b, "%10s %10s %10s %8s\n", "elapsed", "goroutines", "heap MiB", "nodes")
	for i := 0; i < len(series); i += step {
		g := series[i]
		fmt.Fprintf(&b, "%10s %10.0f %10.1f %8d\n", g.at.Round(time.Second), g.goroutines, g.heapBytes/(1<<20), g.nodes)
	}
	t.Log("the leader over the soak:\n" + b.String())
}

// sampleGauges reads go_goroutines and go_memstats_heap_inuse_bytes from a manager's metrics.
func sampleGauges(ctx context.Context, name string) (gauges, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(local.ManagerPorts[name].Metrics)+"/metrics", nil)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return gauges{}, err
	}
	defer resp.Body.Close()
	var g gauges
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_goroutines":
			g.goroutines, _ = strconv.ParseFloat(value, 64)
		case "go_memstats_heap_inuse_bytes":
			g.heapBytes, _ = strconv.ParseFloat(value, 64)
		}
	}
	return g, sc.Err()
}
