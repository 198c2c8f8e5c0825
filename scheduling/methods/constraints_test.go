package methods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Upstream's "Topology Consideration" and volume cases of consolidation: a command may only
// move pods where their constraints still hold, spreads, anti-affinity, zonal volumes and
// node selectors included; replacements take the constraints of the pods they receive.

func zoneSpread(app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels["app"] = app
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
}

// withVolume gives the pod a claim bound to a PersistentVolume in zone.
func withVolume(w *world, p *corev1.Pod, zone string) {
	name := "data-" + p.Name
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	w.pvcs = append(w.pvcs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + p.Name}})
	w.pvs = append(w.pvs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + p.Name}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}})
}

// zoneOf is where a command puts a pod: the zone of the node or replacement it moves to.
func zoneOf(c *Cluster, cmd *Command, podName string) string {
	for _, m := range cmd.Moves {
		if m.Pod.Name != podName {
			continue
		}
		for _, r := range cmd.Replacements {
			if r.Hostname == m.To {
				return r.Offering.Zone
			}
		}
		for _, n := range c.Nodes {
			if n.Name == m.To {
				return n.Labels[corev1.LabelTopologyZone]
			}
		}
	}
	return ""
}

func TestConsolidationKeepsZonalSpread(t *testing.T) {
	// Three web pods spread over zones a and b (two nodes in a, one in b), each node half
	// empty. Deleting b would put its pod in a: skew 3-0. Only a move within zones is valid.
	w := world{pools: pool(onDemandOnly), nodes: []*corev1.Node{
		node("a1", "m5.xlarge", "on-demand", "z-a"), node("b1", "m5.xlarge", "on-demand", "z-b")},
		pods: []*corev1.Pod{pod("w1", "a1", "1", "2Gi", zoneSpread("web")), pod("w2", "b1", "1", "2Gi", zoneSpread("web"))}}
	c := w.cluster()
	home := map[string]string{"w1": "z-a", "w2": "z-b"}
	seen := 0
	for _, m := range []Method{&SingleNode{}, &MultiNode{}} {
		for _, cmd := range commands(t, m, c) {
			seen++
			zones := map[string]int{}
			for _, p := range []string{"w1", "w2"} {
				z := zoneOf(c, cmd, p)
				if z == "" { // not moved: where it is
					z = home[p]
				}
				zones[z]++
			}
			if zones["z-a"] != 1 || zones["z-b"] != 1 {
				t.Errorf("%s: %v puts the web pods %v, want one per zone", m.Reason(), commandNames([]*Command{cmd}), zones)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no command: each half-empty node can be replaced by a cheaper one in its zone")
	}
}

func TestConsolidationKeepsHostnameAntiAffinity(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(3, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{
		pod("w1", "a", "500m", "1Gi", appLabel("web"), hostnameAnti("web")),
		pod("w2", "b", "500m", "1Gi", appLabel("web"), hostnameAnti("web")),
		pod("w3", "c", "500m", "1Gi", appLabel("web"), hostnameAnti("web"))}}
	c := w.cluster()
	seen := 0
	for _, m := range []Method{&SingleNode{}, &MultiNode{}} {
		for _, cmd := range commands(t, m, c) {
			seen++
			if cmd.Decision == DecisionDelete {
				t.Errorf("%s: %v deletes a node whose pod refuses every other web pod's node", m.Reason(), commandNames([]*Command{cmd}))
			}
			per := map[string]int{}
			for _, mv := range cmd.Moves {
				per[mv.To]++
			}
			for to, n := range per {
				if n > 1 {
					t.Errorf("%s: %d web pods moved to %s", m.Reason(), n, to)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no command: each node can be replaced by a cheaper one")
	}
}

func TestConsolidationKeepsZonalVolumes(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: []*corev1.Node{node("a", "m5.2xlarge", "on-demand", "z-a"), node("b", "m5.2xlarge", "on-demand", "z-b")}}
	db := pod("db", "a", "1", "2Gi")
	withVolume(&w, db, "z-a")
	w.pods = []*corev1.Pod{db, pod("web", "b", "1", "2Gi")}
	c := w.cluster()
	var all []*Command
	all = append(all, commands(t, &SingleNode{}, c)...)
	all = append(all, commands(t, &MultiNode{}, c)...)
	if len(all) == 0 {
		t.Fatal("want some consolidation of two large half-empty nodes")
	}
	for _, cmd := range all {
		if z := zoneOf(c, cmd, "db"); z != "" && z != "z-a" {
			t.Errorf("%v moves the db to %s, its volume is in z-a", commandNames([]*Command{cmd}), z)
		}
	}
}

func TestConsolidationKeepsNodeSelectors(t *testing.T) {
	// The pod selects a label only node a has (set outside Karpenter): it cannot move.
	w := world{nodes: []*corev1.Node{
		node("a", "m5.xlarge", "on-demand", "z-a", func(n *corev1.Node) { n.Labels["example.com/gpu-driver"] = "535" }),
		node("b", "m5.xlarge", "on-demand", "z-a")},
		pods: []*corev1.Pod{pod("cuda", "a", "500m", "1Gi", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"example.com/gpu-driver": "535"} }),
			pod("web", "b", "500m", "1Gi")}}
	c := w.cluster()
	onB := false
	for _, m := range []Method{&SingleNode{}, &MultiNode{}} {
		for _, cmd := range commands(t, m, c) {
			for _, cand := range cmd.Candidates {
				if cand.Name() == "a" {
					t.Errorf("%s: %v disrupts the only node the cuda pod can run on", m.Reason(), commandNames([]*Command{cmd}))
				}
				onB = onB || cand.Name() == "b"
			}
		}
	}
	if !onB {
		t.Fatal("no command on b, whose pod fits beside the cuda pod")
	}
}

func TestReplacementsTakeThePodsConstraints(t *testing.T) {
	for name, tc := range map[string]struct {
		pod       func(*corev1.Pod)
		checkZone string
		checkCT   string
		checkArch string
	}{
		"a zone selector":          {pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: "z-b"} }, checkZone: "z-b"},
		"an on-demand selector":    {pod: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.CapacityTypeLabelKey: "on-demand"} }, checkCT: "on-demand"},
		"a required zone affinity": {pod: zoneAffinity("z-b"), checkZone: "z-b"},
	} {
		t.Run(name, func(t *testing.T) {
			w := world{nodes: []*corev1.Node{node("a", "m5.4xlarge", "on-demand", "z-b")}, pods: []*corev1.Pod{pod("w", "a", "1", "2Gi", tc.pod)}}
			cmds := commands(t, &SingleNode{}, w.cluster())
			if len(cmds) != 1 || len(cmds[0].Replacements) != 1 {
				t.Fatalf("commands %v, want one replacement of a", commandNames(cmds))
			}
			r := cmds[0].Replacements[0]
			if tc.checkZone != "" && r.Offering.Zone != tc.checkZone {
				t.Errorf("replacement in %s, want %s", r.Offering.Zone, tc.checkZone)
			}
			if tc.checkCT != "" && r.Offering.CapacityType != tc.checkCT {
				t.Errorf("replacement %s, want %s", r.Offering.CapacityType, tc.checkCT)
			}
		})
	}
}

// A replacement never costs more than what it replaces, and a delete never leaves a pod
// without room: the price of the cluster after a command is lower than before.
func TestCommandsSaveMoney(t *testing.T) {
	worlds := map[string]world{
		"mixed sizes": {nodes: []*corev1.Node{node("a", "m5.4xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a"), node("c", "m5.large", "spot", "z-b")},
			pods: []*corev1.Pod{pod("w1", "a", "2", "4Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "500m", "1Gi")}},
		"Spot and on-demand": {nodes: []*corev1.Node{node("a", "m5.2xlarge", "spot", "z-a"), node("b", "m5.2xlarge", "on-demand", "z-b")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}},
		"on-demand only": {pools: pool(onDemandOnly), nodes: nodesOf(5, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "2", "2Gi"), pod("w4", "d", "300m", "2Gi"), pod("w5", "e", "100m", "2Gi")}},
	}
	for name, w := range worlds {
		t.Run(name, func(t *testing.T) {
			c := w.cluster()
			for _, m := range []Method{&SingleNode{}, &MultiNode{}, Emptiness{}} {
				for _, cmd := range commands(t, m, c) {
					var removed, added float64
					for _, cand := range cmd.Candidates {
						removed += cand.PricePerHour
					}
					for _, r := range cmd.Replacements {
						added += r.Offering.Price
					}
					if added >= removed {
						t.Errorf("%s: %v adds $%.3f for $%.3f removed", m.Reason(), commandNames([]*Command{cmd}), added, removed)
					}
				}
			}
		})
	}
}

// consolidateAfter counts from the node's last pod event: a node that just got or lost a pod
// waits; an untouched one goes.
func TestConsolidateAfterCountsFromTheLastPodEvent(t *testing.T) {
	event := func(ago time.Duration) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) { nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-ago)) }
	}
	w := world{pools: pool(consolidateAfter("10m"), onDemandOnly), nodes: nodesOf(3, "m5.xlarge", "on-demand"),
		claims: []*karpv1.NodeClaim{claim("a", event(time.Minute)), claim("b", event(time.Hour)), claim("c", event(time.Hour))},
		pods:   []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}
	for _, m := range []Method{&SingleNode{}, &MultiNode{}} {
		for _, cmd := range commands(t, m, w.cluster()) {
			for _, cand := range cmd.Candidates {
				if cand.Name() == "a" {
					t.Errorf("%s disrupts a, whose pod came a minute ago (consolidateAfter 10m)", m.Reason())
				}
			}
		}
	}
	if next := w.cluster().NextChange(); !next.Equal(now.Add(9 * time.Minute)) {
		t.Errorf("next change in %s, want 9m (a's consolidateAfter)", next.Sub(now))
	}
}
