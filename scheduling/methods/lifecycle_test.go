package methods

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// What happens to candidates across passes and over time: commands applied one after
// another until nothing is left to do (karpenterctl simulate --disrupt), expiration, holds
// after a rolled-back command, commands in flight, and the next moment time alone changes a
// decision.

// converge runs passes, applying each command, until a pass finds nothing, and returns the
// commands in order and the final cluster. It fails the test after 20 passes.
func converge(t *testing.T, c *Cluster) ([]string, *Cluster) {
	t.Helper()
	var done []string
	for range 20 {
		cmds, _, err := Pass(context.Background(), c, Methods())
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) == 0 {
			return done, c
		}
		for _, cmd := range cmds {
			done = append(done, commandNames([]*Command{cmd})...)
			c = c.Apply(cmd)
		}
	}
	t.Fatalf("no fixed point after 20 passes: %v", done)
	return nil, nil
}

// podsOn counts the pods on the cluster's nodes (DaemonSet pods aside), by node.
func podsOn(c *Cluster) map[string]int {
	out := map[string]int{}
	for _, n := range c.Nodes {
		for _, p := range n.Pods {
			if !isDaemon(p) {
				out[n.Name]++
			}
		}
	}
	return out
}

func isDaemon(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

func TestPassesConvergeWithoutLosingPods(t *testing.T) {
	for name, tc := range map[string]struct {
		w         world
		wantNodes int
	}{
		"three empty nodes go": {w: world{nodes: nodesOf(3, "m5.large", "on-demand")}, wantNodes: 0},
		"half-empty nodes fold into fewer": {w: world{pools: pool(onDemandOnly), nodes: nodesOf(4, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi"), pod("w4", "d", "500m", "1Gi")}}, wantNodes: 1},
		"a budget of one a pass still gets there": {w: world{pools: pool(onDemandOnly, withBudgets(budget("1"))), nodes: nodesOf(4, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi"), pod("w4", "d", "500m", "1Gi")}}, wantNodes: 1},
		"do-not-disrupt keeps its node": {w: world{pools: pool(onDemandOnly), nodes: nodesOf(3, "m5.xlarge", "on-demand"),
			pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true")), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}, wantNodes: 1},
		"drifted nodes are all replaced": {w: world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.large", "on-demand"), claims: claimsFor("a,b", drifted(time.Hour)),
			pods: []*corev1.Pod{pod("w1", "a", "1500m", "6Gi"), pod("w2", "b", "1500m", "6Gi")}}, wantNodes: 2},
	} {
		t.Run(name, func(t *testing.T) {
			before := tc.w.cluster()
			total := 0
			for _, n := range podsOn(before) {
				total += n
			}
			done, after := converge(t, before)
			got := 0
			for _, n := range podsOn(after) {
				got += n
			}
			if got != total {
				t.Fatalf("%d pods before, %d after %v", total, got, done)
			}
			managed := 0
			for _, n := range after.Nodes {
				if !n.InFlight {
					managed++
				}
			}
			if managed != tc.wantNodes {
				t.Fatalf("%d nodes after %v, want %d", managed, done, tc.wantNodes)
			}
			// Drifted nodes are gone: every node left is one the passes kept or launched.
			for _, cand := range after.Candidates {
				if !cand.DriftedSince.IsZero() {
					t.Errorf("%s still drifted after %v", cand.Name(), done)
				}
			}
		})
	}
}

// Apply leaves the cluster it is called on as it was.
func TestApplyDoesNotChangeTheClusterBefore(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(3, "m5.xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi"), pod("w3", "c", "1", "2Gi")}}
	c := w.cluster()
	before := podsOn(c)
	cands := len(c.Candidates)
	cmds, _, err := Pass(context.Background(), c, Methods())
	if err != nil || len(cmds) == 0 {
		t.Fatalf("a pass: %v, %d commands", err, len(cmds))
	}
	next := c.Apply(cmds[0])
	if len(c.Candidates) != cands {
		t.Errorf("%d candidates before Apply, %d after", cands, len(c.Candidates))
	}
	for n, k := range podsOn(c) {
		if before[n] != k {
			t.Errorf("node %s had %d pods, has %d after Apply", n, before[n], k)
		}
	}
	for _, p := range w.pods {
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s lost its node", p.Name)
		}
	}
	if len(next.Candidates) >= cands && cmds[0].Decision == DecisionDelete {
		t.Errorf("a delete left %d candidates of %d", len(next.Candidates), cands)
	}
}

func TestExpirations(t *testing.T) {
	expiring := func(after string) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) { nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration(after) }
	}
	for name, tc := range map[string]struct {
		w    world
		want string
	}{
		"a NodeClaim past its expireAfter": {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", expiring("24h")),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi")}}, want: "replace:a+c5.large/spot"},
		"an empty expired NodeClaim": {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", expiring("24h"))}, want: "delete:a"},
		"not expired yet":            {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", expiring("72h"))}, want: ""},
		"never expires":              {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", expiring("Never"))}, want: ""},
		"do-not-disrupt does not hold expiration": {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", expiring("24h")),
			pods: []*corev1.Pod{pod("w", "a", "1", "2Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true"))}}, want: "replace:a+c5.large/spot"},
		"a PDB does not hold expiration": {w: world{nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", expiring("24h")),
			pods: []*corev1.Pod{pod("db", "a", "1", "2Gi")}, pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 1, "db")}}, want: "replace:a+c5.large/spot"},
		"a budget of 0 does not hold expiration": {w: world{pools: pool(withBudgets(budget("0"))), nodes: nodesOf(1, "m5.xlarge", "on-demand"), claims: claimsFor("a", expiring("24h"))},
			want: "delete:a"},
		"each expired NodeClaim its own command": {w: world{nodes: nodesOf(2, "m5.xlarge", "on-demand"), claims: claimsFor("a,b", expiring("1h"))}, want: "delete:a | delete:b"},
	} {
		t.Run(name, func(t *testing.T) {
			cmds, err := tc.w.cluster().Expirations(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(commandNames(cmds), " | "); got != tc.want {
				t.Fatalf("expirations %q, want %q", got, tc.want)
			}
			for _, cmd := range cmds {
				if cmd.Reason != ReasonExpired {
					t.Errorf("reason %s, want Expired", cmd.Reason)
				}
			}
		})
	}
}

func TestHoldAfterARolledBackCommand(t *testing.T) {
	w := world{nodes: nodesOf(2, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}
	c := w.cluster()
	c.Hold(map[string]Held{"a": {Until: now.Add(10 * time.Minute), Why: "its replacement never initialized"}, "b": {Until: now.Add(-time.Minute), Why: "long ago"}})
	if !noted(c, "a", "its replacement never initialized; tried again after") {
		t.Fatalf("the hold on a is not noted: %+v", c.Unconsolidatable)
	}
	if noted(c, "b", "long ago") {
		t.Fatal("a hold that ended still noted")
	}
	got := strings.Join(commandNames(commands(t, &SingleNode{}, c)), " | ")
	if strings.Contains(got, "a") && !strings.Contains(got, "b") {
		t.Fatalf("commands %q act on the held node a", got)
	}
	if next := c.NextChange(); !next.Equal(now.Add(10 * time.Minute)) {
		t.Errorf("next change %s, want the hold's end", next)
	}
}

// noted reports whether the node is unconsolidatable for a reason containing s.
func noted(c *Cluster, node, s string) bool {
	for _, u := range c.Unconsolidatable {
		if u.Node == node && strings.Contains(u.Reason, s) {
			return true
		}
	}
	return false
}

func TestInFlightCommandsAreNotCandidates(t *testing.T) {
	w := world{pools: pool(withBudgets(budget("2"))), nodes: nodesOf(3, "m5.large", "on-demand")}
	c := w.cluster()
	c.InFlight(map[string]bool{"a": true})
	for _, cand := range c.Candidates {
		if cand.Name() == "a" {
			t.Fatal("a command's node is still a candidate")
		}
	}
	if c.Disrupting["default"] != 1 {
		t.Fatalf("disrupting %d, want the in-flight node counted", c.Disrupting["default"])
	}
	// The budget of 2 has one left.
	if got := strings.Join(commandNames(commands(t, Emptiness{}, c)), " | "); got != "delete:b" {
		t.Fatalf("commands %q, want delete:b (one left of the budget of 2)", got)
	}
}

func TestNextChange(t *testing.T) {
	lastEvent := func(ago time.Duration) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) { nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-ago)) }
	}
	for name, tc := range map[string]struct {
		w    world
		want time.Duration // from now; 0: nothing due
	}{
		"nothing due": {w: world{nodes: nodesOf(1, "m5.large", "on-demand")}},
		"consolidateAfter running out": {w: world{pools: pool(consolidateAfter("10m")), nodes: nodesOf(1, "m5.large", "on-demand"),
			claims: claimsFor("a", lastEvent(4*time.Minute))}, want: 6 * time.Minute},
		"the earliest of two": {w: world{pools: pool(consolidateAfter("10m")), nodes: nodesOf(2, "m5.large", "on-demand"),
			claims: []*karpv1.NodeClaim{claim("a", lastEvent(4*time.Minute)), claim("b", lastEvent(8*time.Minute))}}, want: 2 * time.Minute},
		"a do-not-disrupt duration ending": {w: world{nodes: nodesOf(1, "m5.large", "on-demand"),
			pods: []*corev1.Pod{pod("warm", "a", "1", "1Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "90m"))}}, want: 30 * time.Minute},
		"a budget window opening": {w: world{pools: pool(withBudgets(karpv1.Budget{Nodes: "0", Schedule: ptr.To("0 14 * * *"), Duration: &metav1.Duration{Duration: time.Hour}})),
			nodes: nodesOf(1, "m5.large", "on-demand")}, want: 2 * time.Hour},
		"a budget window closing": {w: world{pools: pool(withBudgets(karpv1.Budget{Nodes: "0", Schedule: ptr.To("0 11 * * *"), Duration: &metav1.Duration{Duration: 90 * time.Minute}})),
			nodes: nodesOf(1, "m5.large", "on-demand")}, want: 30 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			got := tc.w.cluster().NextChange()
			if tc.want == 0 {
				if !got.IsZero() {
					t.Fatalf("next change %s, want none", got)
				}
				return
			}
			if want := now.Add(tc.want); !got.Equal(want) {
				t.Fatalf("next change in %s, want in %s", got.Sub(now), tc.want)
			}
		})
	}
}

func TestPodDisruptionBudgetVariants(t *testing.T) {
	maxUnavailable := func(name string, v intstr.IntOrString, app string) *k8spolicyv1.PodDisruptionBudget {
		return &k8spolicyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: k8spolicyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &v, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
	minPercent := func(name, pct, app string) *k8spolicyv1.PodDisruptionBudget {
		v := intstr.FromString(pct)
		return &k8spolicyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: k8spolicyv1.PodDisruptionBudgetSpec{
			MinAvailable: &v, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	}
	withStatus := func(p *k8spolicyv1.PodDisruptionBudget, allowed int32) *k8spolicyv1.PodDisruptionBudget {
		p.Generation, p.Status.ObservedGeneration, p.Status.DisruptionsAllowed = 1, 1, allowed
		return p
	}
	twoWeb := []*corev1.Pod{pod("w1", "a", "1", "2Gi", appLabel("web")), pod("w2", "b", "1", "2Gi", appLabel("web"))}
	for name, tc := range map[string]struct {
		pdbs    []*k8spolicyv1.PodDisruptionBudget
		blocked bool
	}{
		"maxUnavailable 0 blocks":        {pdbs: []*k8spolicyv1.PodDisruptionBudget{maxUnavailable("web", intstr.FromInt32(0), "web")}, blocked: true},
		"maxUnavailable 1 allows":        {pdbs: []*k8spolicyv1.PodDisruptionBudget{maxUnavailable("web", intstr.FromInt32(1), "web")}},
		"maxUnavailable 50% of 2 allows": {pdbs: []*k8spolicyv1.PodDisruptionBudget{maxUnavailable("web", intstr.FromString("50%"), "web")}},
		"maxUnavailable 0% blocks":       {pdbs: []*k8spolicyv1.PodDisruptionBudget{maxUnavailable("web", intstr.FromString("0%"), "web")}, blocked: true},
		"minAvailable 100% blocks":       {pdbs: []*k8spolicyv1.PodDisruptionBudget{minPercent("web", "100%", "web")}, blocked: true},
		"minAvailable 50% of 2 allows":   {pdbs: []*k8spolicyv1.PodDisruptionBudget{minPercent("web", "50%", "web")}},
		"minAvailable 2 of 2 blocks":     {pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("web", 2, "web")}, blocked: true},
		"a PDB of another app":           {pdbs: []*k8spolicyv1.PodDisruptionBudget{pdb("db", 5, "db")}},
		"the status says none allowed":   {pdbs: []*k8spolicyv1.PodDisruptionBudget{withStatus(maxUnavailable("web", intstr.FromInt32(5), "web"), 0)}, blocked: true},
		"the status says one allowed":    {pdbs: []*k8spolicyv1.PodDisruptionBudget{withStatus(pdb("web", 2, "web"), 1)}},
		"two PDBs, one of them blocking": {pdbs: []*k8spolicyv1.PodDisruptionBudget{maxUnavailable("web-a", intstr.FromInt32(1), "web"), pdb("web-b", 2, "web")}, blocked: true},
		"a PDB in another namespace":     {pdbs: []*k8spolicyv1.PodDisruptionBudget{func() *k8spolicyv1.PodDisruptionBudget { p := pdb("web", 2, "web"); p.Namespace = "other"; return p }()}},
	} {
		t.Run(name, func(t *testing.T) {
			c := world{nodes: nodesOf(2, "m5.xlarge", "on-demand"), pods: twoWeb, pdbs: tc.pdbs}.cluster()
			blocked := 0
			for _, cand := range c.Candidates {
				if cand.Blocked != "" {
					blocked++
					if !strings.Contains(cand.Blocked, "PodDisruptionBudget") {
						t.Errorf("blocked for %q, want the PDB named", cand.Blocked)
					}
				}
			}
			if (blocked == 2) != tc.blocked || (blocked != 0 && blocked != 2) {
				t.Fatalf("%d of 2 nodes blocked, want blocked=%v", blocked, tc.blocked)
			}
			cmds := commands(t, &SingleNode{}, c)
			if tc.blocked && len(cmds) > 0 {
				t.Fatalf("commands %v on nodes a PDB blocks", commandNames(cmds))
			}
		})
	}
}

// The Reason and Consolidation of each method, as metrics and events name them.
func TestMethodNames(t *testing.T) {
	for _, tc := range []struct {
		m             Method
		reason        Reason
		consolidation string
	}{
		{Emptiness{}, ReasonEmpty, "empty"},
		{Drift{}, ReasonDrifted, ""},
		{&MultiNode{}, ReasonUnderutilized, "multi"},
		{&SingleNode{}, ReasonUnderutilized, "single"},
		{Repair{}, ReasonUnhealthy, ""},
	} {
		if tc.m.Reason() != tc.reason || tc.m.Consolidation() != tc.consolidation {
			t.Errorf("%T: %s/%q, want %s/%q", tc.m, tc.m.Reason(), tc.m.Consolidation(), tc.reason, tc.consolidation)
		}
	}
}

func TestWithFeatureGates(t *testing.T) {
	o := Options{MinSavingsFraction: 0.2}.WithFeatureGates(map[string]bool{"SpotToSpotConsolidation": true, "NodeRepair": true, "Unknown": true})
	if !o.SpotToSpotConsolidation || !o.NodeRepair || o.TerminateFirstDrift || o.TerminateFirstRepair || o.MinSavingsFraction != 0.2 {
		t.Fatalf("options %+v", o)
	}
	o = o.WithFeatureGates(nil)
	if o.SpotToSpotConsolidation || o.NodeRepair {
		t.Fatal("a gate not named must be off")
	}
}

// Expiration by each NodeClaim's own expireAfter across pools: only the expired go, each with
// the capacity its pods need.
func TestExpirationsAcrossPools(t *testing.T) {
	expiring := func(after string) func(*karpv1.NodeClaim) {
		return func(nc *karpv1.NodeClaim) { nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration(after) }
	}
	w := world{pools: []*karpv1.NodePool{nodePool("default"), nodePool("batch")},
		nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a", inPool("batch")), node("c", "m5.xlarge", "on-demand", "z-a")},
		claims: []*karpv1.NodeClaim{claim("a", expiring("24h")), claim("b", expiring("24h"), func(nc *karpv1.NodeClaim) { nc.Labels[karpv1.NodePoolLabelKey] = "batch" }),
			claim("c", expiring("72h"))},
		pods: []*corev1.Pod{pod("wa", "a", "3", "6Gi"), pod("wb", "b", "500m", "1Gi"), pod("wc", "c", "3", "6Gi")}}
	cmds, err := w.cluster().Expirations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(commandNames(cmds), " | ")
	if !strings.Contains(got, "replace:a+") || !strings.Contains(got, ":b") || strings.Contains(got, ":c") || strings.Contains(got, ",c") {
		t.Fatalf("expirations %q, want a (replaced: its pod fits nowhere else) and b, not c", got)
	}
}
