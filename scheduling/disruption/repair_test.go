package disruption

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

var examplePolicy = cloudprovider.RepairPolicy{ConditionType: "ExampleUnhealthy", ConditionStatus: corev1.ConditionTrue, TolerationDuration: 5 * time.Minute}

// sick gives the node the ExampleUnhealthy condition since `since` ago.
func sick(since time.Duration) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "ExampleUnhealthy", Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.Add(-since))})
	}
}

func repairOpts(mut ...func(*Options)) Options {
	o := Options{NodeRepair: true, RepairPolicies: func(*karpv1.NodePool) []cloudprovider.RepairPolicy {
		return []cloudprovider.RepairPolicy{examplePolicy}
	}}
	for _, m := range mut {
		m(&o)
	}
	return o
}

func repairCommands(t *testing.T, c *Cluster) []*Command {
	t.Helper()
	cmds, err := Repair{}.Commands(context.Background(), c, nil, NewBudgets(c))
	if err != nil {
		t.Fatal(err)
	}
	return cmds
}

// Every rule of repair, with a case that acts and one that must not.
func TestRepair(t *testing.T) {
	healthy := func(name string) *corev1.Node { return node(name, "m5.xlarge", karpv1.CapacityTypeOnDemand, "z-a") }
	for _, tc := range []struct {
		name  string
		w     world
		want  string // the command's candidates and decision, "" for none
		notes string // a substring of a repair note, when none acts
	}{
		{name: "unhealthy past its toleration: replaced first, forcefully",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(6*time.Minute)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				pods: []*corev1.Pod{pod("web", "sick", "1", "1Gi"), pod("fill1", "h1", "3500m", "1Gi"), pod("fill2", "h2", "3500m", "1Gi"),
					pod("fill3", "h3", "3500m", "1Gi"), pod("fill4", "h4", "3500m", "1Gi")}, opts: repairOpts()},
			want: "replace:sick"},
		{name: "within its toleration",
			w:    world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(4*time.Minute)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")}, opts: repairOpts()},
			want: ""},
		{name: "the gate is off",
			w:    world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")}, opts: repairOpts(func(o *Options) { o.NodeRepair = false })},
			want: ""},
		{name: "do-not-disrupt does not hold repair; pods move to room left elsewhere",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour), func(n *corev1.Node) {
				n.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			}), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")}, pods: []*corev1.Pod{pod("web", "sick", "1", "1Gi")}, opts: repairOpts()},
			want: "delete:sick"},
		{name: "do-not-repair does",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour), func(n *corev1.Node) {
				n.Annotations = map[string]string{karpv1.DoNotRepairAnnotationKey: "true"}
			}), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")}, opts: repairOpts()},
			notes: "karpenter.sh/do-not-repair"},
		{name: "a PDB does not hold repair",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				pods: []*corev1.Pod{pod("db", "sick", "1", "1Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}, opts: repairOpts()},
			want: "delete:sick"},
		{name: "1 of 5 unhealthy: under the breaker",
			w:    world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")}, opts: repairOpts()},
			want: "delete:sick"},
		{name: "3 of 4 unhealthy: the breaker holds them all",
			w: world{nodes: []*corev1.Node{node("s1", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), node("s2", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)),
				node("s3", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1")}, opts: repairOpts()},
			notes: "more than 20% of nodes in NodePool default are unhealthy (3 of 4)"},
		{name: "a budget of zero for Unhealthy",
			w: world{pools: []*karpv1.NodePool{nodePool("default", func(np *karpv1.NodePool) {
				np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnhealthy}}}
			})}, nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")}, opts: repairOpts()},
			notes: "budget for Unhealthy"},
		{name: "TerminateFirstRepair: the node goes first",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				pods: []*corev1.Pod{pod("web", "sick", "1", "1Gi"), pod("fill1", "h1", "3500m", "1Gi"), pod("fill2", "h2", "3500m", "1Gi"),
					pod("fill3", "h3", "3500m", "1Gi"), pod("fill4", "h4", "3500m", "1Gi")}, opts: repairOpts(func(o *Options) { o.TerminateFirstRepair = true })},
			want: "delete:sick"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.w.cluster()
			cmds := repairCommands(t, c)
			got := ""
			if len(cmds) > 0 {
				got = string(cmds[0].Decision) + ":" + cmds[0].Candidates[0].Name()
				if !cmds[0].Forceful || cmds[0].Reason != ReasonUnhealthy || cmds[0].Condition != "ExampleUnhealthy" {
					t.Errorf("a repair is forceful, Unhealthy, for its condition: %+v", cmds[0])
				}
			}
			if got != tc.want {
				t.Fatalf("command %q, want %q (notes %+v)", got, tc.want, c.RepairNotes)
			}
			if tc.notes != "" && !hasNote(c, tc.notes) {
				t.Errorf("no note %q: %+v", tc.notes, c.RepairNotes)
			}
		})
	}
}

func hasNote(c *Cluster, s string) bool {
	for _, n := range c.RepairNotes {
		if strings.Contains(n.Message, s) {
			return true
		}
	}
	return false
}

// A node within its toleration makes the pass come back when the toleration ends.
func TestRepairTolerationIsANextChange(t *testing.T) {
	c := world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(4*time.Minute))}, opts: repairOpts()}.cluster()
	if next := c.NextChange(); !next.Equal(now.Add(time.Minute)) {
		t.Fatalf("next change %s, want the toleration's end %s", next, now.Add(time.Minute))
	}
}

// NotReady nodes count against every budget but Unhealthy's.
func TestNotReadyNodesDoNotCountAgainstTheUnhealthyBudget(t *testing.T) {
	notReady := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	}
	c := world{pools: []*karpv1.NodePool{nodePool("default", func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}} })},
		nodes: []*corev1.Node{node("down", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", notReady), node("up", "m5.large", karpv1.CapacityTypeOnDemand, "z-a")}}.cluster()
	b := NewBudgets(c)
	if b.Allowed("default", ReasonDrifted) != 0 || b.Allowed("default", ReasonUnhealthy) != 1 {
		t.Fatalf("Drifted %d (want 0: the NotReady node takes the one), Unhealthy %d (want 1)", b.Allowed("default", ReasonDrifted), b.Allowed("default", ReasonUnhealthy))
	}
}
