package methods

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Every command of every pass over random clusters is checked by a validator that shares no
// code with the methods (its own resource sums, label matching, budget arithmetic and PDB
// counting):
//
//   - a candidate is a managed, Ready node of a known NodePool, not being deleted, not
//     annotated do-not-disrupt, with no pod annotated do-not-disrupt and no pod a PDB forbids
//     evicting (graceful commands only);
//   - the candidates of one NodePool are no more than its budget allows for the reason;
//   - every pod of a candidate moves, to a node that is not a candidate or to a replacement;
//   - what moves to a node fits in what its pods leave free, and the node's labels satisfy
//     each moved pod's node selector; a replacement's type holds its requests;
//   - consolidation saves money: replacements cost less than the candidates;
//   - applying the command and passing again loses no pod, and the passes stop.
func TestPassPropertiesOnRandomClusters(t *testing.T) {
	seeds := 80
	if testing.Short() {
		seeds = 20
	}
	byReason := map[Reason]int{}
	defer func() {
		// The random clusters must exercise every method, or the properties say little.
		for _, r := range []Reason{ReasonEmpty, ReasonDrifted, ReasonUnderutilized} {
			if byReason[r] == 0 {
				t.Errorf("no %s command in %d random clusters: %v", r, seeds, byReason)
			}
		}
		t.Logf("commands checked: %v", byReason)
	}()
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		w := randomWorld(rng)
		c := w.cluster()
		total := countPods(c)
		for pass := 0; ; pass++ {
			if pass == 25 {
				t.Errorf("seed %d: no fixed point after 25 passes", seed)
				break
			}
			cmds, m, err := Pass(context.Background(), c, Methods())
			if err != nil {
				t.Fatalf("seed %d pass %d: %v", seed, pass, err)
			}
			if len(cmds) == 0 {
				break
			}
			for _, problem := range validateCommands(w, c, m, cmds) {
				t.Errorf("seed %d pass %d (%s): %s", seed, pass, m.Reason(), problem)
			}
			for _, cmd := range cmds {
				byReason[cmd.Reason]++
				c = c.Apply(cmd)
			}
			if got := countPods(c); got != total {
				t.Fatalf("seed %d pass %d: %d pods, had %d", seed, pass, got, total)
			}
		}
	}
}

func countPods(c *Cluster) int {
	n := 0
	for _, node := range c.Nodes {
		for _, p := range node.Pods {
			if !isDaemon(p) {
				n++
			}
		}
	}
	return n
}

// randomWorld is one or two NodePools with random budgets, 3 to 14 nodes of random types,
// capacity types and zones, pods with random requests, zone selectors, do-not-disrupt and
// PDBs, some nodes drifted or empty.
func randomWorld(rng *rand.Rand) world {
	var w world
	catalog := types()
	nPools := 1 + rng.IntN(2)
	for i := range nPools {
		name := []string{"default", "batch"}[i]
		np := nodePool(name)
		switch rng.IntN(4) {
		case 0:
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: fmt.Sprint(rng.IntN(3))}}
		case 1:
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: fmt.Sprintf("%d%%", 10+rng.IntN(90))}}
		case 2:
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}, {Nodes: "100%"}}
		}
		if rng.IntN(3) == 0 {
			np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeOnDemand}
		}
		w.pools = append(w.pools, np)
	}
	nNodes := 3 + rng.IntN(12)
	for i := range nNodes {
		it := catalog[rng.IntN(len(catalog))]
		ct := []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}[rng.IntN(2)]
		zone := []string{"z-a", "z-b"}[rng.IntN(2)]
		name := fmt.Sprintf("n%02d", i)
		pool := w.pools[rng.IntN(len(w.pools))].Name
		n := node(name, it.Name, ct, zone, inPool(pool))
		if rng.IntN(12) == 0 {
			n.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		}
		w.nodes = append(w.nodes, n)
		mut := []func(*karpv1.NodeClaim){func(nc *karpv1.NodeClaim) { nc.Labels[karpv1.NodePoolLabelKey] = pool }}
		if rng.IntN(5) == 0 {
			mut = append(mut, drifted(time.Duration(1+rng.IntN(5))*time.Hour))
		}
		w.claims = append(w.claims, claim(name, mut...))
		// Fill it to a random share of its allocatable.
		alloc := it.Allocatable()
		cpuLeft, memLeft := alloc.Cpu().MilliValue(), alloc.Memory().Value()
		for j := range rng.IntN(4) {
			cpu := int64(100 * (1 + rng.IntN(15)))
			mem := int64(1+rng.IntN(8)) << 28
			if cpu > cpuLeft || mem > memLeft {
				break
			}
			cpuLeft, memLeft = cpuLeft-cpu, memLeft-mem
			app := []string{"web", "api", "db"}[rng.IntN(3)]
			p := pod(fmt.Sprintf("%s-%d", name, j), name, fmt.Sprintf("%dm", cpu), fmt.Sprint(mem), appLabel(app))
			switch rng.IntN(10) {
			case 0:
				p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: zone}
			case 1:
				p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			case 2:
				p.Spec.NodeSelector = map[string]string{karpv1.CapacityTypeLabelKey: ct}
			}
			w.pods = append(w.pods, p)
		}
	}
	if rng.IntN(2) == 0 {
		w.pdbs = append(w.pdbs, pdb("db", rng.IntN(3), "db"))
	}
	return w
}

func validateCommands(w world, c *Cluster, m Method, cmds []*Command) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	nodes := map[string]*corev1.Node{}
	for _, n := range w.nodes {
		nodes[n.Name] = n
	}
	pools := map[string]*karpv1.NodePool{}
	for _, np := range w.pools {
		pools[np.Name] = np
	}
	// Pods by the node the cluster has them on now (passes move them).
	on := map[string][]*corev1.Pod{}
	labelsOf := map[string]map[string]string{}
	allocOf := map[string]corev1.ResourceList{}
	for _, n := range c.Nodes {
		on[n.Name] = n.Pods
		labelsOf[n.Name] = n.Labels
		allocOf[n.Name] = n.Allocatable
	}
	perPool := map[string]int{}
	for _, cmd := range cmds {
		gone := map[string]bool{}
		for _, cand := range cmd.Candidates {
			gone[cand.Name()] = true
			perPool[cand.NodePoolName()]++
			if n, ok := nodes[cand.Name()]; ok && n.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" && !cmd.Forceful {
				bad("%s is annotated do-not-disrupt", cand.Name())
			}
			for _, p := range on[cand.Name()] {
				if p.Annotations[karpv1.DoNotDisruptAnnotationKey] == "true" && !cmd.Forceful {
					bad("%s holds pod %s annotated do-not-disrupt", cand.Name(), p.Name)
				}
				if !cmd.Forceful && pdbForbids(w, c, p) {
					bad("%s holds pod %s that a PDB keeps", cand.Name(), p.Name)
				}
			}
		}
		moved := map[string]string{}
		incoming := map[string][]*corev1.Pod{}
		for _, mv := range cmd.Moves {
			moved[mv.Pod.Name] = mv.To
			incoming[mv.To] = append(incoming[mv.To], mv.Pod)
			if gone[mv.To] {
				bad("pod %s moves to %s, which the command removes", mv.Pod.Name, mv.To)
			}
		}
		for _, cand := range cmd.Candidates {
			for _, p := range on[cand.Name()] {
				if isDaemon(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				if _, ok := moved[p.Name]; !ok {
					bad("pod %s of %s does not move", p.Name, cand.Name())
				}
			}
		}
		replacements := map[string]bool{}
		for _, r := range cmd.Replacements {
			replacements[r.Hostname] = true
			alloc := r.InstanceType.Allocatable()
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				want, have := sumRequests(incoming[r.Hostname], res), alloc[res]
				if have.Cmp(want) < 0 {
					bad("replacement %s (%s) holds %s %s, gets %s", r.Hostname, r.InstanceType.Name, res, have.String(), want.String())
				}
			}
			labels := map[string]string{corev1.LabelTopologyZone: r.Offering.Zone, karpv1.CapacityTypeLabelKey: r.Offering.CapacityType,
				corev1.LabelInstanceTypeStable: r.InstanceType.Name}
			for _, p := range incoming[r.Hostname] {
				for k, v := range p.Spec.NodeSelector {
					if labels[k] != "" && labels[k] != v {
						bad("pod %s selects %s=%s, replacement has %s", p.Name, k, v, labels[k])
					}
				}
			}
		}
		for to, ps := range incoming {
			if replacements[to] {
				continue
			}
			alloc, ok := allocOf[to]
			if !ok {
				bad("pods move to %s, which is neither a node nor a replacement", to)
				continue
			}
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				used := sumRequests(on[to], res)
				used.Add(sumRequests(ps, res))
				have := alloc[res]
				if have.Cmp(used) < 0 {
					bad("node %s holds %s %s, would carry %s", to, res, have.String(), used.String())
				}
			}
			for _, p := range ps {
				for k, v := range p.Spec.NodeSelector {
					if labelsOf[to][k] != v {
						bad("pod %s selects %s=%s, node %s has %q", p.Name, k, v, to, labelsOf[to][k])
					}
				}
			}
		}
		if m.Consolidation() != "" {
			var before, after float64
			for _, cand := range cmd.Candidates {
				before += cand.PricePerHour
			}
			for _, r := range cmd.Replacements {
				after += r.Offering.Price
			}
			if after >= before {
				bad("consolidation %v costs $%.4f for $%.4f", commandNames([]*Command{cmd}), after, before)
			}
		}
	}
	// Budgets, by the validator's own arithmetic: the least of the budgets that apply, counts
	// or percentages of the pool's nodes rounded up, less the nodes disrupting.
	for name, n := range perPool {
		np := pools[name]
		if np == nil {
			continue
		}
		if allowed := ownAllowed(np, m.Reason(), c.PoolSizes[name], c.Disrupting[name]); n > allowed && !cmdsForceful(cmds) {
			bad("%d candidates of %s, its budget allows %d", n, name, allowed)
		}
	}
	return problems
}

func cmdsForceful(cmds []*Command) bool {
	for _, c := range cmds {
		if c.Forceful {
			return true
		}
	}
	return false
}

func ownAllowed(np *karpv1.NodePool, r Reason, nodes, disrupting int) int {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []karpv1.Budget{{Nodes: "10%"}}
	}
	allowed := math.MaxInt
	for _, b := range budgets {
		if len(b.Reasons) > 0 {
			applies := false
			for _, br := range b.Reasons {
				applies = applies || string(br) == string(r)
			}
			if !applies {
				continue
			}
		}
		var n int
		if pct, ok := strings.CutSuffix(b.Nodes, "%"); ok {
			v, err := strconv.Atoi(pct)
			if err != nil {
				return 0 // the methods allow nothing under a budget they cannot read
			}
			n = int(math.Ceil(float64(v) * float64(nodes) / 100))
		} else if v, err := strconv.Atoi(b.Nodes); err == nil {
			n = v
		} else {
			return 0
		}
		allowed = min(allowed, n)
	}
	return max(0, allowed-disrupting)
}

// pdbForbids counts, for each PDB selecting the pod, the matching pods in the cluster, and
// reports whether minAvailable leaves no eviction.
func pdbForbids(w world, c *Cluster, p *corev1.Pod) bool {
	for _, b := range w.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || b.Namespace != p.Namespace || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		matching := 0
		for _, n := range c.Nodes {
			for _, q := range n.Pods {
				if q.Namespace == b.Namespace && sel.Matches(labels.Set(q.Labels)) {
					matching++
				}
			}
		}
		if b.Spec.MinAvailable != nil && matching-b.Spec.MinAvailable.IntValue() <= 0 {
			return true
		}
	}
	return false
}

func sumRequests(ps []*corev1.Pod, res corev1.ResourceName) resource.Quantity {
	var total resource.Quantity
	for _, p := range ps {
		if isDaemon(p) {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			if q, ok := ctr.Resources.Requests[res]; ok {
				total.Add(q)
			}
		}
	}
	return total
}
