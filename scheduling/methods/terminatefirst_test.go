package methods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// reservedCatalog is types() with a reservation cr-1 of m5.large in z-a that has room left
// for room more instances (0: full, as EC2 reports a reservation all of whose slots run).
func reservedCatalog(room int) []*cloudprovider.InstanceType {
	out := types()
	for _, it := range out {
		if it.Name == "m5.large" {
			it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: "z-a", CapacityType: karpv1.CapacityTypeReserved, Price: 1e-8,
				Available: room > 0, ReservationID: "cr-1", ReservationCapacity: room})
		}
	}
	return out
}

// reservedOnlyPool launches only into reserved capacity.
func reservedOnlyPool() *karpv1.NodePool {
	return nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeReserved}}}
	})
}

func inReservation(id string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[karpv1.LabelCapacityReservationID] = id }
}

// Upstream's terminate-first for drift (TerminateFirstDrift, v1.15): a drifted node in a full
// capacity reservation, of a NodePool that launches only into reserved capacity, goes first
// when the slot it frees takes its pods; otherwise it stays, as without the gate.
func TestTerminateFirstDrift(t *testing.T) {
	reservedOnly := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Labels = map[string]string{"team": "b"}
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeReserved}}}
	})
	anyCapacity := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Labels = map[string]string{"team": "b"}
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn,
			Values: []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeOnDemand}}}
	})
	gate := Options{TerminateFirstDrift: true}
	for name, tc := range map[string]struct {
		w    world
		want string // "decision:nodes (terminate-first reason)", or "" with blocked in the note
	}{
		"the gate off: the node stays": {world{pools: []*karpv1.NodePool{reservedOnly}, catalog: reservedCatalog(0),
			nodes: []*corev1.Node{node("a", "m5.large", "reserved", "z-a", inReservation("cr-1"))}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		"the gate on: the node goes first, its slot takes the pods": {world{pools: []*karpv1.NodePool{reservedOnly}, catalog: reservedCatalog(0), opts: gate,
			nodes: []*corev1.Node{node("a", "m5.large", "reserved", "z-a", inReservation("cr-1"))}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}},
			"delete:a (no-reserved-capacity)"},
		"room left in the reservation: replaced first as always": {world{pools: []*karpv1.NodePool{reservedOnly}, catalog: reservedCatalog(1), opts: gate,
			nodes: []*corev1.Node{node("a", "m5.large", "reserved", "z-a", inReservation("cr-1"))}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}},
			"replace:a+m5.large/reserved"},
		"on-demand allowed: replaced first on it": {world{pools: []*karpv1.NodePool{anyCapacity}, catalog: reservedCatalog(0), opts: gate,
			nodes: []*corev1.Node{node("a", "m5.large", "reserved", "z-a", inReservation("cr-1"))}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}},
			"replace:a+c5.large/on-demand"},
		"a node in no reservation: it stays": {world{pools: []*karpv1.NodePool{reservedOnly}, catalog: reservedCatalog(0), opts: gate,
			nodes: []*corev1.Node{node("a", "m5.large", "on-demand", "z-a")}, pods: []*corev1.Pod{pod("web", "a", "1", "2Gi")}}, ""},
		"pods the freed slot cannot take: it stays": {world{pools: []*karpv1.NodePool{reservedOnly}, catalog: reservedCatalog(0), opts: gate,
			nodes: []*corev1.Node{node("a", "m5.xlarge", "reserved", "z-a", inReservation("cr-1"))}, pods: []*corev1.Pod{pod("web", "a", "3", "2Gi")}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := tc.w.cluster()
			cmds := commands(t, Drift{}, c)
			got := strings.Join(commandNames(cmds), " | ")
			if len(cmds) == 1 && cmds[0].TerminateFirst != "" {
				got += " (" + cmds[0].TerminateFirst + ")"
				if len(cmds[0].Replacements) > 0 {
					t.Errorf("a terminate-first command with %d replacements", len(cmds[0].Replacements))
				}
			}
			if got != tc.want {
				t.Fatalf("commands %q, want %q (left alone: %+v)", got, tc.want, c.Unconsolidatable)
			}
		})
	}
}
