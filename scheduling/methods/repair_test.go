package methods

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

// bounded gives the example policy a drain bound (its TerminationGracePeriod).
func bounded(d time.Duration) func(*Options) {
	return func(o *Options) {
		o.RepairPolicies = func(*karpv1.NodePool) []cloudprovider.RepairPolicy {
			p := examplePolicy
			p.TerminationGracePeriod = &d
			return []cloudprovider.RepairPolicy{p}
		}
	}
}

// withPeriod gives a NodeClaim a terminationGracePeriod.
func withPeriod(d time.Duration) func(*karpv1.NodeClaim) {
	return func(nc *karpv1.NodeClaim) { nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: d} }
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
		bound string // the command's drain bound, "" for none (the NodeClaim's period applies)
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
		{name: "a PDB does not hold repair when the policy bounds the drain",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				pods: []*corev1.Pod{pod("db", "sick", "1", "1Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}, opts: repairOpts(bounded(0))},
			want: "delete:sick", bound: "0s"},
		{name: "nor when the NodeClaim's period does",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				claims: []*karpv1.NodeClaim{claim("sick", withPeriod(time.Hour))},
				pods:   []*corev1.Pod{pod("db", "sick", "1", "1Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}, opts: repairOpts()},
			want: "delete:sick"},
		{name: "a PDB with nothing bounding the drain holds it",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				claims: []*karpv1.NodeClaim{claim("sick")},
				pods:   []*corev1.Pod{pod("db", "sick", "1", "1Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}, opts: repairOpts()},
			notes: "repair requires a termination grace period to bypass blocking pods (PodDisruptionBudget default/db"},
		{name: "and so does a pod's do-not-disrupt",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				pods: []*corev1.Pod{pod("web", "sick", "1", "1Gi", func(p *corev1.Pod) {
					p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
				})}, opts: repairOpts()},
			notes: "repair requires a termination grace period to bypass blocking pods (pod default/web has karpenter.sh/do-not-disrupt)"},
		{name: "the bound is the lesser of the policy's and the NodeClaim's",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				claims: []*karpv1.NodeClaim{claim("sick", withPeriod(30*time.Second))}, opts: repairOpts(bounded(45 * time.Second))},
			want: "delete:sick", bound: "30s"},
		{name: "the policy's bound applies to a NodeClaim with no period",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				claims: []*karpv1.NodeClaim{claim("sick")}, pods: []*corev1.Pod{pod("web", "sick", "1", "1Gi", func(p *corev1.Pod) {
					p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
				})}, opts: repairOpts(bounded(45 * time.Second))},
			want: "delete:sick", bound: "45s"},
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
		// TerminateFirstRepair, as upstream v1.15's: replaced first where a replacement can
		// launch; a reserved node whose freed slot is the only room for its pods goes first.
		{name: "TerminateFirstRepair, a replacement that can launch: replaced first",
			w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				pods: []*corev1.Pod{pod("web", "sick", "1", "1Gi"), pod("fill1", "h1", "3500m", "1Gi"), pod("fill2", "h2", "3500m", "1Gi"),
					pod("fill3", "h3", "3500m", "1Gi"), pod("fill4", "h4", "3500m", "1Gi")}, opts: repairOpts(func(o *Options) { o.TerminateFirstRepair = true })},
			want: "replace:sick"},
		{name: "TerminateFirstRepair, a full reservation: the node goes first",
			w: world{pools: []*karpv1.NodePool{reservedOnlyPool()}, catalog: reservedCatalog(0),
				nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeReserved, "z-a", sick(time.Hour), inReservation("cr-1")), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				pods: []*corev1.Pod{pod("web", "sick", "1", "1Gi"), pod("fill1", "h1", "3500m", "1Gi"), pod("fill2", "h2", "3500m", "1Gi"),
					pod("fill3", "h3", "3500m", "1Gi"), pod("fill4", "h4", "3500m", "1Gi")}, opts: repairOpts(func(o *Options) { o.TerminateFirstRepair = true })},
			want: "delete:sick"},
		{name: "a full reservation without TerminateFirstRepair: blocked",
			w: world{pools: []*karpv1.NodePool{reservedOnlyPool()}, catalog: reservedCatalog(0),
				nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeReserved, "z-a", sick(time.Hour), inReservation("cr-1")), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")},
				pods: []*corev1.Pod{pod("web", "sick", "1", "1Gi"), pod("fill1", "h1", "3500m", "1Gi"), pod("fill2", "h2", "3500m", "1Gi"),
					pod("fill3", "h3", "3500m", "1Gi"), pod("fill4", "h4", "3500m", "1Gi")}, opts: repairOpts()},
			notes: "would not schedule"},
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
			if len(cmds) > 0 {
				bound := ""
				if cmds[0].DrainBound != nil {
					bound = cmds[0].DrainBound.String()
				}
				if bound != tc.bound {
					t.Errorf("drain bound %q, want %q", bound, tc.bound)
				}
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

// A Reboot policy reboots in place (a reboot command: no replacement, not forceful, within the
// budget) where the provider can, twice a day at most; otherwise the node is replaced. A
// condition a reboot did not clear is tolerated again from the reboot's end.
func TestRepairReboots(t *testing.T) {
	reboot := cloudprovider.RepairPolicy{ConditionType: "ExampleUnhealthy", ConditionStatus: corev1.ConditionTrue, TolerationDuration: 5 * time.Minute,
		Action: cloudprovider.RepairReboot}
	rebootOpts := func(rebooted int) Options {
		return repairOpts(func(o *Options) {
			o.RepairPolicies = func(*karpv1.NodePool) []cloudprovider.RepairPolicy { return []cloudprovider.RepairPolicy{reboot} }
			o.CanReboot = true
			o.Reboots = func(*karpv1.NodeClaim) int { return rebooted }
		})
	}
	rebootedAgo := func(ago time.Duration) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeRebooting, Status: metav1.ConditionFalse,
				Reason: karpv1.RebootReasonSucceeded, LastTransitionTime: metav1.NewTime(now.Add(-ago))})
		}
	}
	healthy := func(name string) *corev1.Node { return node(name, "m5.xlarge", karpv1.CapacityTypeOnDemand, "z-a") }
	nodes := func(since time.Duration) []*corev1.Node {
		return []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(since)), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")}
	}
	for _, tc := range []struct {
		name string
		w    world
		want string
	}{
		{name: "a Reboot policy reboots", w: world{nodes: nodes(time.Hour), claims: []*karpv1.NodeClaim{claim("sick")}, opts: rebootOpts(0)}, want: "reboot:sick"},
		{name: "once rebooted, it reboots again", w: world{nodes: nodes(time.Hour), claims: []*karpv1.NodeClaim{claim("sick", rebootedAgo(time.Hour))}, opts: rebootOpts(1)},
			want: "reboot:sick"},
		{name: "twice rebooted within a day, it is replaced", w: world{nodes: nodes(time.Hour), claims: []*karpv1.NodeClaim{claim("sick", rebootedAgo(time.Hour))}, opts: rebootOpts(2)},
			want: "delete:sick"},
		{name: "a provider that cannot reboot replaces", w: world{nodes: nodes(time.Hour), claims: []*karpv1.NodeClaim{claim("sick")},
			opts: func() Options { o := rebootOpts(0); o.CanReboot = false; return o }()}, want: "delete:sick"},
		{name: "within its toleration since the last reboot ended", w: world{nodes: nodes(time.Hour), claims: []*karpv1.NodeClaim{claim("sick", rebootedAgo(4*time.Minute))}, opts: rebootOpts(1)},
			want: ""},
		{name: "a node rebooting now is left alone", w: world{nodes: nodes(time.Hour), claims: []*karpv1.NodeClaim{claim("sick", func(nc *karpv1.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeRebooting, Status: metav1.ConditionTrue, Reason: karpv1.RebootReasonRequested})
		})}, opts: rebootOpts(1)}, want: ""},
		{name: "do-not-repair holds a reboot too", w: world{nodes: []*corev1.Node{node("sick", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", sick(time.Hour), func(n *corev1.Node) {
			n.Annotations = map[string]string{karpv1.DoNotRepairAnnotationKey: "true"}
		}), healthy("h1"), healthy("h2"), healthy("h3"), healthy("h4")}, claims: []*karpv1.NodeClaim{claim("sick")}, opts: rebootOpts(0)}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.w.cluster()
			cmds := repairCommands(t, c)
			got := ""
			if len(cmds) > 0 {
				got = string(cmds[0].Decision) + ":" + cmds[0].Candidates[0].Name()
				if cmds[0].Decision == DecisionReboot && (cmds[0].Forceful || len(cmds[0].Replacements) > 0 || cmds[0].Condition != "ExampleUnhealthy") {
					t.Errorf("a reboot replaces nothing and is not forceful: %+v", cmds[0])
				}
			}
			if got != tc.want {
				t.Fatalf("command %q, want %q (notes %+v)", got, tc.want, c.RepairNotes)
			}
		})
	}
}

// A node rebooting counts against every budget, Unhealthy's too, NotReady or not, and is no
// candidate of any method.
func TestRebootingNodesCountAgainstBudgets(t *testing.T) {
	rebooting := func(nc *karpv1.NodeClaim) {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeRebooting, Status: metav1.ConditionTrue, Reason: karpv1.RebootReasonIssued})
	}
	for _, ready := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionUnknown} {
		c := world{pools: []*karpv1.NodePool{nodePool("default", func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}} })},
			nodes: []*corev1.Node{node("boot", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", func(n *corev1.Node) {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
			}), node("up", "m5.large", karpv1.CapacityTypeOnDemand, "z-a")},
			claims: []*karpv1.NodeClaim{claim("boot", rebooting), claim("up")}}.cluster()
		b := NewBudgets(c)
		if b.Allowed("default", ReasonUnhealthy) != 0 || b.Allowed("default", ReasonDrifted) != 0 {
			t.Errorf("Ready %s: Unhealthy %d, Drifted %d allowed; want 0 (the rebooting node takes the one)", ready, b.Allowed("default", ReasonUnhealthy), b.Allowed("default", ReasonDrifted))
		}
		for _, cand := range c.Candidates {
			if cand.Name() == "boot" {
				t.Errorf("Ready %s: the rebooting node is a candidate", ready)
			}
		}
	}
}

// An unhealthy NotReady node whose repair command is in flight (handed over, its taint not in
// the model yet) gets no second command: it counts against the Unhealthy budget now, and
// repair leaves it to its command. (Upstream's repair spec found dozens of commands, each
// with a replacement, for one node within a second.)
func TestRepairInFlightIsNotRepeated(t *testing.T) {
	down := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: "ExampleUnhealthy", Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	}
	w := world{pools: []*karpv1.NodePool{nodePool("default", func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}} })},
		// An initialized NodeClaim, as the node had before it went down.
		claims: []*karpv1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "down", Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
			Status: karpv1.NodeClaimStatus{NodeName: "down", Conditions: []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized"}}}}},
		nodes: []*corev1.Node{node("down", "m5.large", karpv1.CapacityTypeOnDemand, "z-a", down), node("up1", "m5.xlarge", karpv1.CapacityTypeOnDemand, "z-a"),
			node("up2", "m5.xlarge", karpv1.CapacityTypeOnDemand, "z-a"), node("up3", "m5.xlarge", karpv1.CapacityTypeOnDemand, "z-a"),
			node("up4", "m5.xlarge", karpv1.CapacityTypeOnDemand, "z-a")},
		opts: repairOpts()}
	if c := w.cluster(); len(commandNames(repairCommands(t, c))) != 1 {
		t.Fatalf("before anything is in flight: no command (unhealthy %d, notes %+v)", len(c.Unhealthy), c.RepairNotes)
	}
	c := w.cluster()
	c.InFlight(map[string]bool{"down": true})
	if got := commandNames(repairCommands(t, c)); len(got) != 0 {
		t.Fatalf("with down's command in flight and a budget of 1: %v, want none", got)
	}
	if allowed := NewBudgets(c).Allowed("default", ReasonUnhealthy); allowed != 0 {
		t.Errorf("the Unhealthy budget allows %d more with one in flight, want 0", allowed)
	}
}
