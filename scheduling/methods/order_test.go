package methods

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Which method a pass runs when several could act, and what each does with a node several
// could take: repair first (with the gate), then emptiness, drift, multi-node and single-node
// consolidation, each method returning its commands alone.
func TestPassOrderWithEveryMethod(t *testing.T) {
	healthy := func(name string) *corev1.Node { return node(name, "m5.xlarge", karpv1.CapacityTypeOnDemand, "z-a") }
	for name, tc := range map[string]struct {
		w      world
		reason Reason
		want   string
	}{
		"repair before emptiness": {w: world{opts: repairOpts(), nodes: []*corev1.Node{
			node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("empty"), healthy("h1"), healthy("h2"), healthy("h3")},
			pods: []*corev1.Pod{pod("w1", "h1", "3", "2Gi"), pod("w2", "h2", "3", "2Gi"), pod("w3", "h3", "3", "2Gi")}}, reason: ReasonUnhealthy, want: "delete:sick"},
		"emptiness when repair is off": {w: world{nodes: []*corev1.Node{
			node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("empty"), healthy("h1"), healthy("h2"), healthy("h3")},
			pods: []*corev1.Pod{pod("w1", "h1", "3", "2Gi"), pod("w2", "h2", "3", "2Gi"), pod("w3", "h3", "3", "2Gi")}}, reason: ReasonEmpty, want: "delete:empty,sick"},
		"an empty drifted node goes as empty": {w: world{nodes: nodesOf(1, "m5.large", "on-demand"), claims: claimsFor("a", drifted(time.Hour))},
			reason: ReasonEmpty, want: "delete:a"},
		"drift before consolidation of the same node": {w: world{nodes: nodesOf(2, "m5.xlarge", "on-demand"), claims: []*karpv1.NodeClaim{claim("a", drifted(time.Hour)), claim("b")},
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}, reason: ReasonDrifted, want: "delete:a"},
	} {
		t.Run(name, func(t *testing.T) {
			methods := Methods()
			cmds, m, err := Pass(context.Background(), tc.w.cluster(), methods)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(commandNames(cmds), " | "); got != tc.want {
				t.Fatalf("commands %q, want %q", got, tc.want)
			}
			if m == nil || m.Reason() != tc.reason {
				t.Fatalf("method %v, want %s", m, tc.reason)
			}
			for _, cmd := range cmds {
				if cmd.Reason != tc.reason {
					t.Fatalf("a %s command from the %s method", cmd.Reason, tc.reason)
				}
			}
		})
	}
}

// The Evaluated and Solved hooks hear of every method run and every simulation's solve.
func TestPassHooks(t *testing.T) {
	var evaluated []Reason
	solves := 0
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")},
		opts: Options{Evaluated: func(m Method, _ time.Duration) { evaluated = append(evaluated, m.Reason()) }, Solved: func(time.Duration) { solves++ }}}
	cmds, _, err := Pass(context.Background(), w.cluster(), Methods())
	if err != nil || len(cmds) == 0 {
		t.Fatalf("commands %v (%v)", commandNames(cmds), err)
	}
	if len(evaluated) == 0 || evaluated[len(evaluated)-1] != ReasonUnderutilized {
		t.Fatalf("evaluated %v, want the methods up to consolidation", evaluated)
	}
	if solves == 0 {
		t.Fatal("no solve heard of")
	}
}
