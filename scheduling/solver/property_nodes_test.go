package solver

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Solves of random clusters with existing nodes (some tainted, some in flight) running pods
// (some with hostname anti-affinity or host ports), and pending pods with host ports, hostname
// anti-affinity and zone affinity to running apps, checked by a validator of its own:
//
//   - each pending pod is placed once or reported unschedulable;
//   - what lands on an existing node fits in what its pods leave, its labels satisfy the
//     pod's selector, its taints are tolerated;
//   - no two pods bind the same host port on a node, existing or new;
//   - no pod lands beside a running pod whose required hostname anti-affinity refuses it,
//     nor beside a pod of its own app when its own anti-affinity refuses that;
//   - a pod with a required zone affinity lands in a zone where a pod of the app runs or is
//     placed.
func TestSolvePropertiesWithExistingNodes(t *testing.T) {
	onExisting, onNew, pending := 0, 0, 0
	for seed := range 50 {
		rng := rand.New(rand.NewPCG(uint64(seed), 13))
		in := randomCluster(rng)
		res, err := Solve(in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, problem := range validateCluster(in, res) {
			t.Errorf("seed %d: %s", seed, problem)
		}
		for _, ps := range res.Existing {
			onExisting += len(ps)
		}
		for _, c := range res.NodeClaims {
			onNew += len(c.Pods)
		}
		pending += len(res.Unschedulable)
	}
	// The random clusters must exercise every outcome, or the properties say little.
	if onExisting == 0 || onNew == 0 || pending == 0 {
		t.Fatalf("placed %d on existing nodes, %d on new, %d pending: want some of each", onExisting, onNew, pending)
	}
	t.Logf("placed %d on existing nodes, %d on new ones, %d pending", onExisting, onNew, pending)
}

var clusterApps = []string{"web", "api", "db", "cache"}

func randomCluster(rng *rand.Rand) *Input {
	in := &Input{NodePools: pools(nodePool("default", bothCapacityTypes))}
	for _, np := range in.NodePools {
		np.InstanceTypes = testCatalog()
	}
	for i := range 2 + rng.IntN(8) {
		zone := zones[rng.IntN(len(zones))]
		cpu := []string{"2", "4", "8"}[rng.IntN(3)]
		n := node(fmt.Sprintf("n%d", i), zone, cpu, "16Gi")
		if rng.IntN(5) == 0 {
			n.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		}
		n.InFlight = rng.IntN(6) == 0
		left := n.Allocatable.Cpu().MilliValue()
		portTaken := false
		for j := range rng.IntN(4) {
			c := int64(100 * (1 + rng.IntN(10)))
			if c > left {
				break
			}
			left -= c
			app := clusterApps[rng.IntN(len(clusterApps))]
			p := pod(fmt.Sprintf("%s-run-%d-%d", app, i, j), fmt.Sprintf("%dm", c), "256Mi", labelled(app), func(p *corev1.Pod) { p.Spec.NodeName = n.Name })
			switch rng.IntN(5) {
			case 0:
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": clusterApps[rng.IntN(len(clusterApps))]}}}}}}
			case 1:
				if !portTaken { // the kubelet admits one pod per host port
					portTaken = true
					p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}
				}
			}
			n.Pods = append(n.Pods, p)
		}
		in.Nodes = append(in.Nodes, n)
	}
	for w := range 1 + rng.IntN(4) {
		app := clusterApps[rng.IntN(len(clusterApps))]
		cpu := []string{"100m", "300m", "700m", "1500m"}[rng.IntN(4)]
		var mods []func(*corev1.Pod)
		mods = append(mods, labelled(app))
		switch rng.IntN(5) {
		case 0:
			mods = append(mods, hostPort(9100))
		case 1:
			mods = append(mods, func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
			})
		case 2:
			target := clusterApps[rng.IntN(len(clusterApps))]
			mods = append(mods, func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: karpv1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": target}}}}}}
			})
		case 3:
			mods = append(mods, tolerating("dedicated", "db", corev1.TaintEffectNoSchedule))
		}
		in.Pods = append(in.Pods, pods(fmt.Sprintf("%s-new%d", app, w), 1+rng.IntN(12), cpu, "512Mi", mods...)...)
	}
	return in
}

// place is where the validator sees a pod: a node's name or a NodeClaim's hostname, its
// labels, and the pods with it.
type place struct {
	name   string
	labels map[string]string
	taints []corev1.Taint
	pods   []*corev1.Pod
	alloc  corev1.ResourceList
}

func validateCluster(in *Input, res *Result) []string {
	var problems []string
	bad := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }
	decided := map[*corev1.Pod]int{}
	for _, u := range res.Unschedulable {
		decided[u.Pod]++
	}
	var places []*place
	for _, n := range in.Nodes {
		pl := &place{name: n.Name, labels: n.Labels, taints: n.Taints, alloc: n.Allocatable, pods: append([]*corev1.Pod(nil), n.Pods...)}
		for _, p := range res.Existing[n.Name] {
			decided[p]++
			pl.pods = append(pl.pods, p)
		}
		places = append(places, pl)
	}
	for _, c := range res.NodeClaims {
		labels := map[string]string{corev1.LabelHostname: c.Hostname, karpv1.LabelTopologyZone: c.Offering.Zone, karpv1.CapacityTypeLabelKey: c.Offering.CapacityType}
		for k, v := range c.InstanceType.Labels {
			labels[k] = v
		}
		for _, p := range c.Pods {
			decided[p]++
		}
		places = append(places, &place{name: c.Hostname, labels: labels, alloc: c.InstanceType.Allocatable(), pods: c.Pods})
	}
	for _, p := range in.Pods {
		if decided[p] != 1 {
			bad("pending pod %s decided %d times", p.Name, decided[p])
		}
	}
	pending := map[*corev1.Pod]bool{}
	for _, p := range in.Pods {
		pending[p] = true
	}
	// The zones where each app runs or will run, for zone affinity.
	appZones := map[string]map[string]bool{}
	for _, pl := range places {
		for _, p := range pl.pods {
			app := p.Labels["app"]
			if appZones[app] == nil {
				appZones[app] = map[string]bool{}
			}
			appZones[app][pl.labels[karpv1.LabelTopologyZone]] = true
		}
	}
	for _, pl := range places {
		var cpu int64
		ports := map[int32]string{}
		for _, p := range pl.pods {
			cpu += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
			for _, port := range p.Spec.Containers[0].Ports {
				if port.HostPort == 0 {
					continue
				}
				if other, ok := ports[port.HostPort]; ok {
					bad("%s: %s and %s both bind host port %d", pl.name, other, p.Name, port.HostPort)
				}
				ports[port.HostPort] = p.Name
			}
			if !pending[p] {
				continue
			}
			for k, v := range p.Spec.NodeSelector {
				if pl.labels[k] != v {
					bad("%s: %s selects %s=%s", pl.name, p.Name, k, v)
				}
			}
			for _, taint := range pl.taints {
				ok := false
				for _, tol := range p.Spec.Tolerations {
					ok = ok || tolerates(tol, taint)
				}
				if !ok {
					bad("%s: %s does not tolerate %v", pl.name, p.Name, taint)
				}
			}
			if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil {
				for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					target := term.LabelSelector.MatchLabels["app"]
					if !appZones[target][pl.labels[karpv1.LabelTopologyZone]] {
						bad("%s: %s wants to be near %s in %s, where none runs", pl.name, p.Name, target, pl.labels[karpv1.LabelTopologyZone])
					}
				}
			}
		}
		if alloc := pl.alloc.Cpu().MilliValue(); cpu > alloc {
			bad("%s: %dm cpu of pods on %dm", pl.name, cpu, alloc)
		}
		// Required hostname anti-affinity, of pods already there and of the new ones.
		for _, owner := range pl.pods {
			a := owner.Spec.Affinity
			if a == nil || a.PodAntiAffinity == nil {
				continue
			}
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				target := term.LabelSelector.MatchLabels["app"]
				for _, other := range pl.pods {
					if other != owner && other.Labels["app"] == target && (pending[other] || pending[owner]) {
						bad("%s: %s beside %s, whose anti-affinity refuses %s", pl.name, other.Name, owner.Name, target)
					}
				}
			}
		}
	}
	return problems
}
