package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
	"github.com/karpenter-policy/karpenter/scheduling"
)

var disruptWorkloads = filepath.Join(workloads, "disrupt")

// disruptJSON runs simulate --disrupt on files of test/workloads/disrupt at a fixed time.
func disruptJSON(t *testing.T, nodepools, nodes string, extra ...string) *simulate.DisruptionReport {
	t.Helper()
	args := append([]string{"simulate", "--disrupt", "--nodepools", filepath.Join(disruptWorkloads, nodepools),
		"--nodes", filepath.Join(disruptWorkloads, nodes), "--now", "2026-12-01T12:00:00Z", "-o", "json"}, extra...)
	code, out, errOut := karpenterctl(t, "", args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := &simulate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil || r.Disruption == nil {
		t.Fatalf("output is not the documented JSON (%v):\n%s", err, out)
	}
	return r.Disruption
}

// objects reads a workload file's objects.
func objects(t *testing.T, path string) []runtime.Object {
	t.Helper()
	docs, err := offline.ReadPaths([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	scheme := install.NewScheme()
	var out []runtime.Object
	for _, d := range docs {
		if d.Object == nil {
			continue
		}
		obj, err := scheme.New(d.GVK())
		if err != nil {
			t.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
	return out
}

// replay is the cluster of a nodes file as commands change it: where each pod runs and what
// each node is.
type replay struct {
	nodes map[string]*replayNode
	pods  map[string]*corev1.Pod
	on    map[string]string
}

type replayNode struct {
	zone, pool string
	taints     []corev1.Taint
}

func newReplay(t *testing.T, nodepools, nodes string) *replay {
	r := &replay{nodes: map[string]*replayNode{}, pods: map[string]*corev1.Pod{}, on: map[string]string{}}
	for _, o := range objects(t, filepath.Join(disruptWorkloads, nodes)) {
		switch v := o.(type) {
		case *corev1.Node:
			r.nodes[v.Name] = &replayNode{zone: v.Labels[corev1.LabelTopologyZone], pool: v.Labels[karpv1.NodePoolLabelKey], taints: v.Spec.Taints}
		case *corev1.Pod:
			key := v.Namespace + "/" + v.Name
			r.pods[key], r.on[key] = v, v.Spec.NodeName
		}
	}
	return r
}

// apply moves the command's pods and removes its nodes, after adding its replacements with
// their NodePool's taints.
func (r *replay) apply(t *testing.T, cmd simulate.CommandReport, taints map[string][]corev1.Taint) {
	for _, rep := range cmd.Replacements {
		r.nodes[rep.Name] = &replayNode{zone: rep.Zone, pool: rep.NodePool, taints: taints[rep.NodePool]}
	}
	for _, m := range cmd.Moves {
		if _, ok := r.nodes[m.To]; !ok {
			t.Errorf("%s moves to %s, which is neither a node nor a replacement of its command", m.Pod, m.To)
		}
		r.on[m.Pod] = m.To
	}
	for _, n := range cmd.Nodes {
		delete(r.nodes, n)
		for p, on := range r.on {
			if on == n && !strings.HasPrefix(p, "kube-system/") {
				t.Errorf("%s stays on %s, which %s removes", p, n, cmd.Reason)
			}
		}
	}
}

// check asserts every pod's constraints on the current placement: taints tolerated, node
// selectors met, hostname anti-affinity, and zone spread within maxSkew.
func (r *replay) check(t *testing.T, when string) {
	t.Helper()
	zoneCount := map[string]map[string]int{}
	hostApps := map[string]map[string]int{}
	for key, p := range r.pods {
		if strings.HasPrefix(key, "kube-system/") {
			continue
		}
		n := r.nodes[r.on[key]]
		if n == nil {
			t.Errorf("%s: %s is on %s, which is gone", when, key, r.on[key])
			continue
		}
		for _, taint := range n.taints {
			if !scheduling.Tolerates(p, []corev1.Taint{taint}, true) {
				t.Errorf("%s: %s is on %s, whose taint %s it does not tolerate", when, key, r.on[key], taint.Key)
			}
		}
		if z, ok := p.Spec.NodeSelector[corev1.LabelTopologyZone]; ok && n.zone != z {
			t.Errorf("%s: %s selects %s, is in %s", when, key, z, n.zone)
		}
		app := p.Labels["app"]
		if p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil {
			if hostApps[r.on[key]] == nil {
				hostApps[r.on[key]] = map[string]int{}
			}
			if hostApps[r.on[key]][app]++; hostApps[r.on[key]][app] > 1 {
				t.Errorf("%s: two %s pods on %s despite their anti-affinity", when, app, r.on[key])
			}
		}
		if len(p.Spec.TopologySpreadConstraints) > 0 {
			if zoneCount[app] == nil {
				zoneCount[app] = map[string]int{"us-east-1a": 0, "us-east-1b": 0, "us-east-1c": 0}
			}
			zoneCount[app][n.zone]++
		}
	}
	for app, counts := range zoneCount {
		lo, hi := 1<<30, 0
		for _, n := range counts {
			lo, hi = min(lo, n), max(hi, n)
		}
		if hi-lo > 1 {
			t.Errorf("%s: %s's zone spread is %v, skew over 1", when, app, counts)
		}
	}
}

func poolTaints(t *testing.T, nodepools string) map[string][]corev1.Taint {
	out := map[string][]corev1.Taint{}
	for _, o := range objects(t, filepath.Join(disruptWorkloads, nodepools)) {
		if np, ok := o.(*karpv1.NodePool); ok {
			out[np.Name] = np.Spec.Template.Spec.Taints
		}
	}
	return out
}

func TestSimulateDisruptConsolidatesAnOverprovisionedCluster(t *testing.T) {
	d := disruptJSON(t, "nodepools.yaml", "overprovisioned.yaml")
	r := newReplay(t, "nodepools.yaml", "overprovisioned.yaml")
	taints := poolTaints(t, "nodepools.yaml")
	r.check(t, "before")
	pinned := map[string]bool{"ip-10-0-3-22": true, "ip-10-0-3-23": true, "static-1": true}
	sawEmpty := false
	for i, cmd := range d.Commands {
		for _, n := range cmd.Nodes {
			if pinned[n] {
				t.Errorf("command %d (%s) disrupts %s, which do-not-disrupt, a PDB or being unmanaged holds", i, cmd.Reason, n)
			}
			if n == "ip-10-0-3-26" || n == "ip-10-0-3-27" {
				sawEmpty = sawEmpty || cmd.Reason == "Empty"
				if cmd.Reason != "Empty" {
					t.Errorf("%s, empty but for a DaemonSet pod, went as %s", n, cmd.Reason)
				}
			}
		}
		if cmd.Decision == "replace" && (len(cmd.Replacements) != 1 || cmd.PricePerHourAfter >= cmd.PricePerHourBefore) {
			t.Errorf("command %d: consolidation replaces with one cheaper node: %+v", i, cmd)
		}
		r.apply(t, cmd, taints)
		r.check(t, "after command "+cmd.Reason)
	}
	if !sawEmpty {
		t.Error("the empty nodes did not go as Empty")
	}
	reasons := map[string]string{}
	for _, u := range d.Unconsolidatable {
		reasons[u.Node] = u.Reason
	}
	if !strings.Contains(reasons["ip-10-0-3-22"], "shop/ledger-0 has karpenter.sh/do-not-disrupt") || !strings.Contains(reasons["ip-10-0-3-23"], "PodDisruptionBudget shop/db") {
		t.Errorf("unconsolidatable reasons: %v", reasons)
	}
	// Within 1.10 x the fractional lower bound of the pods that may move, plus what the
	// nodes nothing may disrupt cost.
	bound := lowerBound(t, r, pinned)
	pinnedCost := 0.384 + 0.384 + 0.192 // two m6i.2xlarge and an m6i.xlarge, on-demand in us-east-1
	if d.Totals.PricePerHourAfter > 1.10*(bound+pinnedCost) {
		t.Errorf("consolidated to $%.4f/hour; the bound is 1.10 x ($%.4f + $%.4f pinned)", d.Totals.PricePerHourAfter, bound, pinnedCost)
	}
	if d.Totals.NodesAfter >= d.Totals.NodesBefore || d.Totals.PricePerHourAfter >= d.Totals.PricePerHourBefore {
		t.Errorf("totals %+v", d.Totals)
	}
	t.Logf("%d commands: %d nodes $%.4f/hour -> %d nodes $%.4f/hour (bound $%.4f + pinned $%.4f)", len(d.Commands),
		d.Totals.NodesBefore, d.Totals.PricePerHourBefore, d.Totals.NodesAfter, d.Totals.PricePerHourAfter, bound, pinnedCost)
}

// A hundred m6i.2xlarge nodes, a thousand pods of mixed sizes (a fifth zone-spread), nothing
// pinned: consolidation ends within 1.10 x the fractional lower bound of the pods, the cost no
// packing can beat. Multi-node deletes do most of it; single-node replacements of the nodes
// they leave, tried across all candidates (not only the budget's first), do the rest.
func TestSimulateDisruptConsolidatesALargeClusterNearTheBound(t *testing.T) {
	d := disruptJSON(t, "nodepools.yaml", "overprovisioned-100.yaml")
	r := newReplay(t, "nodepools.yaml", "overprovisioned-100.yaml")
	bound := lowerBound(t, r, nil)
	if ratio := d.Totals.PricePerHourAfter / bound; ratio > 1.10 {
		t.Errorf("consolidated to $%.4f/hour, %.3f x the bound $%.4f; want at most 1.10 x", d.Totals.PricePerHourAfter, ratio, bound)
	}
	t.Logf("%d commands: %d nodes $%.4f/hour -> %d nodes $%.4f/hour, %.3f x the bound $%.4f", len(d.Commands),
		d.Totals.NodesBefore, d.Totals.PricePerHourBefore, d.Totals.NodesAfter, d.Totals.PricePerHourAfter, d.Totals.PricePerHourAfter/bound, bound)
}

// lowerBound is the solver's fractional lower bound for the pods not on pinned nodes, solved
// afresh.
func lowerBound(t *testing.T, r *replay, pinned map[string]bool) float64 {
	var pods []runtime.Object
	for key, p := range r.pods {
		if strings.HasPrefix(key, "kube-system/") {
			continue
		}
		if orig := p.Spec.NodeName; pinned[orig] {
			continue
		}
		cp := p.DeepCopy()
		cp.Spec.NodeName = ""
		pods = append(pods, cp)
	}
	var pools []*karpv1.NodePool
	for _, o := range objects(t, filepath.Join(disruptWorkloads, "nodepools.yaml")) {
		pools = append(pools, o.(*karpv1.NodePool))
	}
	rep, err := simulate.Run(context.Background(), &simulate.Input{NodePools: pools, Workloads: pods, InstanceTypes: catalog.Embedded().ForProvider()})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Totals.LowerBoundPerHour
}

func TestSimulateDisruptRollsDriftOneAtATime(t *testing.T) {
	d := disruptJSON(t, "drifted-nodepools.yaml", "drifted.yaml")
	if len(d.Commands) != 5 {
		t.Fatalf("%d commands, want the five drifted nodes one by one: %+v", len(d.Commands), d.Commands)
	}
	for i, cmd := range d.Commands {
		if cmd.Reason != "Drifted" || len(cmd.Nodes) != 1 {
			t.Errorf("command %d: %s of %v; a nodes: 1 Drifted budget rolls one node at a time, a nodes: 0 Underutilized budget holds consolidation", i, cmd.Reason, cmd.Nodes)
		}
		if want := "drifted-" + string(rune('0'+i)); cmd.Nodes[0] != want {
			t.Errorf("command %d replaces %s; the longest drifted (%s) goes first", i, cmd.Nodes[0], want)
		}
	}
}

func TestSimulateDisruptExpiresRegardlessOfBudgets(t *testing.T) {
	d := disruptJSON(t, "expiring-nodepools.yaml", "expiring.yaml")
	var expired []string
	for _, cmd := range d.Commands {
		if cmd.Reason != "Expired" {
			t.Errorf("%s command under a nodes: 0 budget: %+v", cmd.Reason, cmd)
		}
		expired = append(expired, cmd.Nodes...)
	}
	if strings.Join(expired, ",") != "expiring-0,expiring-1" {
		t.Errorf("expired %v; want the two nodes past their 720h", expired)
	}
}

func TestSimulateDisruptMaxCommandsAndBadFlags(t *testing.T) {
	d := disruptJSON(t, "nodepools.yaml", "overprovisioned.yaml", "--max-commands", "1")
	if len(d.Commands) != 1 || d.Commands[0].Reason != "Empty" {
		t.Errorf("--max-commands 1: %+v", d.Commands)
	}
	for _, args := range [][]string{
		{"simulate", "--disrupt", "--nodepools", filepath.Join(disruptWorkloads, "nodepools.yaml")},
		{"simulate", "--disrupt", "--nodepools", filepath.Join(disruptWorkloads, "nodepools.yaml"), "--nodes", filepath.Join(disruptWorkloads, "drifted.yaml"), "--feature-gates", "Bogus=true"},
		{"simulate", "--nodepools", filepath.Join(disruptWorkloads, "nodepools.yaml"), "--workload", filepath.Join(workloads, "apps.yaml"), "--nodes", filepath.Join(disruptWorkloads, "drifted.yaml")},
	} {
		if code, _, errOut := karpenterctl(t, "", args...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
}

// The sample disruption CapacityPolicy holds the nodes of tier=prod pods during office hours:
// only nodes without them (empty ones, the batch node) go; after hours consolidation acts.
func TestSimulateDisruptHonoursTheSampleDisruptionPolicy(t *testing.T) {
	policies := []string{"--policies", filepath.Join(repo, "config", "samples", "examples", "capacitypolicy-disruption.yaml"),
		"--policies", filepath.Join(disruptWorkloads, "namespaces.yaml")}
	at := func(now string) *simulate.DisruptionReport {
		args := append([]string{"simulate", "--disrupt", "--nodepools", filepath.Join(disruptWorkloads, "nodepools.yaml"),
			"--nodes", filepath.Join(disruptWorkloads, "overprovisioned.yaml"), "--now", now, "-o", "json"}, policies...)
		code, out, errOut := karpenterctl(t, "", args...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		r := &simulate.Report{}
		if err := json.Unmarshal([]byte(out), r); err != nil || r.Disruption == nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return r.Disruption
	}
	office := at("2026-12-01T10:30:00Z")
	for _, cmd := range office.Commands {
		for _, m := range cmd.Moves {
			if strings.HasPrefix(m.Pod, "shop/") {
				t.Errorf("at 10:30 a %s command moves %s: the policy holds tier=prod pods' nodes", cmd.Reason, m.Pod)
			}
		}
	}
	denied := false
	for _, u := range office.Unconsolidatable {
		denied = denied || strings.Contains(u.Reason, "denied by policy") && strings.Contains(u.Reason, "between 09:00 and 17:00 UTC")
	}
	if !denied {
		t.Errorf("no node says the policy held it: %+v", office.Unconsolidatable)
	}
	evening := at("2026-12-01T18:00:00Z")
	if evening.Totals.PricePerHourAfter >= office.Totals.PricePerHourAfter {
		t.Errorf("after hours $%.4f/hour, in office hours $%.4f: consolidation should act once the window closes",
			evening.Totals.PricePerHourAfter, office.Totals.PricePerHourAfter)
	}
}
