package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/karpenter-policy/karpenter/test"
)

// costOut is the part of `karpenterctl cost -o json` the test reads.
type costOut struct {
	Rows []struct {
		Name        string  `json:"name"`
		Namespaces  int     `json:"namespaces"`
		Pods        int     `json:"pods"`
		CostPerHour float64 `json:"costPerHour"`
	} `json:"rows"`
	Idle []struct {
		Name        string  `json:"name"`
		CostPerHour float64 `json:"costPerHour"`
	} `json:"idle"`
	ChargedPerHour    float64  `json:"chargedPerHour"`
	IdlePerHour       float64  `json:"idlePerHour"`
	NodePricesPerHour float64  `json:"nodePricesPerHour"`
	Attribution       string   `json:"attribution"`
	Unpriced          []string `json:"unpricedNodes"`
}

func (c costOut) row(name string) (float64, bool) {
	for _, r := range c.Rows {
		if r.Name == name {
			return r.CostPerHour, true
		}
	}
	return 0, false
}

func (c costOut) idle(pool string) float64 {
	for _, r := range c.Idle {
		if r.Name == pool {
			return r.CostPerHour
		}
	}
	return 0
}

func runCost(t *testing.T, ctx context.Context, bin string, args ...string) (costOut, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"cost", "-o", "json", "--node-overlays", "--kubeconfig", local.Kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return costOut{}, fmt.Errorf("karpenterctl cost %v: %v: %s", args, err, stderr.String())
	}
	var c costOut
	if err := json.Unmarshal(out, &c); err != nil {
		return costOut{}, fmt.Errorf("karpenterctl cost %v: %v:\n%s", args, err, out)
	}
	return c, nil
}

// gauges are the samples of the metrics named, by their one label's value.
func gauges(body string, names ...string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, n := range names {
		out[n] = map[string]float64{}
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || out[name] == nil {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		_, quoted, ok2 := strings.Cut(labels, "=")
		label, err := strconv.Unquote(quoted)
		if !ok || !ok2 || err != nil {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name][label] = v
		}
	}
	return out
}

// `karpenterctl cost` on the running cluster lists every namespace with the idle room apart,
// its rows and idle add up to the node prices to the cent, and the manager's showback gauges
// say the same per namespace, per team and per NodePool; the NodePool's price agrees with
// karpenter_nodepools_cost_total, which the NodePool controller computes on its own.
func TestCostShowbackAgreesWithTheMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := karpenterctlBin(t)
	np := isolated(t, ctx, nil, nil)
	team := test.Name("team")
	a := namespace(t, ctx, "cost-a", map[string]string{"team": team})
	b := namespace(t, ctx, "cost-b", map[string]string{"team": team})
	create(t, ctx, namespacedDeployment(a, "web", 3, np.Name, "500m", "1Gi"), namespacedDeployment(b, "api", 2, np.Name, "1", "3Gi"))
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n := 0
		for _, p := range append(podsIn(ctx, a, "web"), podsIn(ctx, b, "api")...) {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		return n == 5, nil
	}); err != nil {
		t.Fatal("the five pods never ran")
	}

	var byNS, byTeam, byPool costOut
	var last string
	metricNames := []string{"karpenter_policy_namespace_cost_per_hour", "karpenter_policy_team_cost_per_hour", "karpenter_policy_nodepool_cost_per_hour",
		"karpenter_policy_nodepool_idle_cost_per_hour", "karpenter_nodepools_cost_total"}
	// The CLI and the scrape read the cluster at different moments, and other tests' nodes
	// may still be going: poll until two CLI reads either side of a scrape agree.
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if byNS, err = runCost(t, ctx, bin); err != nil {
			return false, err
		}
		body, err := httpGetBody(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if byTeam, err = runCost(t, ctx, bin, "--by", "team"); err != nil {
			return false, err
		}
		if byPool, err = runCost(t, ctx, bin, "--by", "nodepool"); err != nil {
			return false, err
		}
		again, err := runCost(t, ctx, bin)
		if err != nil {
			return false, err
		}
		if math.Abs(again.NodePricesPerHour-byNS.NodePricesPerHour) > 1e-9 || math.Abs(again.ChargedPerHour-byNS.ChargedPerHour) > 1e-9 {
			last = "the cluster changed between two reads"
			return false, nil
		}
		m := gauges(body, metricNames...)
		var diffs []string
		check := func(what string, cli, metric float64, ok bool) {
			if !ok || math.Abs(cli-metric) > 0.01 {
				diffs = append(diffs, fmt.Sprintf("%s: cli %.4f, metric %.4f (present %v)", what, cli, metric, ok))
			}
		}
		for _, ns := range []string{a, b} {
			cli, _ := byNS.row(ns)
			v, ok := m["karpenter_policy_namespace_cost_per_hour"][ns]
			check("namespace "+ns, cli, v, ok)
		}
		cliTeam, _ := byTeam.row(team)
		v, ok := m["karpenter_policy_team_cost_per_hour"][team]
		check("team "+team, cliTeam, v, ok)
		v, ok = m["karpenter_policy_nodepool_idle_cost_per_hour"][np.Name]
		check("idle of "+np.Name, byNS.idle(np.Name), v, ok)
		charged, _ := byPool.row(np.Name)
		v, ok = m["karpenter_policy_nodepool_cost_per_hour"][np.Name]
		check("price of "+np.Name, charged+byPool.idle(np.Name), v, ok)
		v, ok = m["karpenter_nodepools_cost_total"][np.Name]
		check("karpenter_nodepools_cost_total of "+np.Name, charged+byPool.idle(np.Name), v, ok)
		last = strings.Join(diffs, "; ")
		return len(diffs) == 0, nil
	}); err != nil {
		t.Fatalf("the CLI and the metrics never agreed: %v: %s", err, last)
	}

	if text, err := exec.CommandContext(ctx, bin, "cost", "--by", "team", "--node-overlays", "--kubeconfig", local.Kubeconfig).CombinedOutput(); err != nil {
		t.Errorf("karpenterctl cost -o text: %v\n%s", err, text)
	} else {
		t.Logf("karpenterctl cost --by team:\n%s", text)
	}
	var nss corev1.NamespaceList
	if err := kube.List(ctx, &nss); err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		if _, ok := byNS.row(ns.Name); !ok {
			t.Errorf("namespace %s is not in the report", ns.Name)
		}
	}
	for _, c := range []costOut{byNS, byTeam, byPool} {
		if d := c.ChargedPerHour + c.IdlePerHour - c.NodePricesPerHour; math.Abs(d) >= 0.005 {
			t.Errorf("charged %.4f + idle %.4f differs from the node prices %.4f by %.4f", c.ChargedPerHour, c.IdlePerHour, c.NodePricesPerHour, d)
		}
		if c.Attribution == "" || len(c.Unpriced) > 0 {
			t.Errorf("attribution %q, unpriced nodes %v", c.Attribution, c.Unpriced)
		}
	}
	costA, _ := byNS.row(a)
	costB, _ := byNS.row(b)
	if costA <= 0 || costB <= 0 {
		t.Errorf("namespaces %s and %s cost %.4f and %.4f an hour: both run pods", a, b, costA, costB)
	}
	if got, _ := byTeam.row(team); math.Abs(got-costA-costB) > 1e-9 {
		t.Errorf("team %s costs %.4f, its namespaces %.4f + %.4f", team, got, costA, costB)
	}
	for _, r := range byTeam.Rows {
		if r.Name == team && r.Namespaces != 2 {
			t.Errorf("team %s has %d namespaces, want 2", team, r.Namespaces)
		}
	}
}
