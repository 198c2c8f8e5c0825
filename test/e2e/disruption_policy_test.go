package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/disruption"
	"github.com/karpenter-policy/karpenter/test/env"
)

// window sets the office hours of the sample disruption policy.
func window(t *testing.T, p *policyv1.CapacityPolicy, from, to int) {
	t.Helper()
	raw, err := json.Marshal(map[string]int{"fromHour": from, "toHour": to})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Parameters = &runtime.RawExtension{Raw: raw}
}

// The sample disruption CapacityPolicy (no voluntary disruption of nodes hosting tier=prod
// pods during office hours) holds two underutilized nodes while its window is open, with an
// Unconsolidatable event naming the denial, and lets consolidation remove one once the window
// is closed. The sample's Rego is applied as it is; its parameters, the window, are set around
// the time the test runs (and then away from it), since the suite may run at any hour.
func TestSampleDisruptionPolicyHoldsNodesInItsWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	data, err := os.ReadFile(filepath.Join(env.RepoRoot(), "config", "samples", "examples", "capacitypolicy-disruption.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pol := &policyv1.CapacityPolicy{}
	if err := yaml.UnmarshalStrict(data, pol); err != nil {
		t.Fatalf("the sample: %v", err)
	}
	hour := time.Now().UTC().Hour()
	window(t, pol, hour, (hour+2)%24)
	create(t, ctx, pol)

	ns := namespace(t, ctx, "prod", map[string]string{"tier": "prod"})
	np := isolated(t, ctx, nil, nil)
	// Two pods on two nodes that one would do: the first node is cordoned while the second
	// pod schedules, then uncordoned.
	first := runningIn(t, ctx, ns, namespacedDeployment(ns, "office-a", 1, np.Name, "100m", "128Mi"))
	cordon(t, ctx, first, true)
	second := runningIn(t, ctx, ns, namespacedDeployment(ns, "office-b", 1, np.Name, "100m", "128Mi"))
	cordon(t, ctx, first, false)
	if first == second {
		t.Fatalf("both pods run on %s, cordoned", first)
	}
	nodes := []string{first, second}
	// Without the policy, consolidation would put both pods on one node within
	// consolidateAfter (30 s), a pass or two and the validation delay. The hold lasts until
	// consolidation has met the policy (its Unconsolidatable event says so), then a pass and
	// the validation delay more: a command the gate let through would be tainting a node by
	// then. At most the 2m15s the hold took before it watched for the event.
	start := time.Now()
	deadline := start.Add(2*time.Minute + disruption.ValidationDelay)
	var denied string
	for time.Now().Before(deadline) {
		if n := nodesLeft(ctx, nodes); n != 2 {
			t.Fatalf("%d of the nodes %v are left during the policy's window", n, nodes)
		}
		if denied == "" {
			if d, err := nodeClaimEvent(ctx, nodes, "Unconsolidatable", "denied by policy", "between"); err == nil {
				denied = d
				deadline = time.Now().Add(disruption.PollPeriod + disruption.ValidationDelay)
			}
		}
		time.Sleep(2 * time.Second)
	}
	if denied == "" {
		t.Errorf("no Unconsolidatable event names the policy's denial within %s", time.Since(start))
	} else {
		t.Logf("held for %s: %s", time.Since(start).Round(time.Second), denied)
	}

	// Close the window: one of the nodes goes.
	fresh := &policyv1.CapacityPolicy{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(pol), fresh); err != nil {
		t.Fatal(err)
	}
	window(t, fresh, (hour+2)%24, (hour+3)%24)
	if err := kube.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		return nodesLeft(ctx, nodes) < 2, nil
	}); err != nil {
		t.Fatalf("neither node went once the window closed: %v\n%s", err, local.LogTail("karpenter", 30))
	}
}

// runningIn creates the Deployment of one pod and returns the node it runs on.
func runningIn(t *testing.T, ctx context.Context, ns string, d *appsv1.Deployment) string {
	t.Helper()
	create(t, ctx, d)
	var node string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range podsIn(ctx, ns, d.Name) {
			if p.Status.Phase == corev1.PodRunning {
				node = p.Spec.NodeName
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the pod of %s never ran: %v", d.Name, err)
	}
	return node
}

// cordon marks the node unschedulable, or schedulable again.
func cordon(t *testing.T, ctx context.Context, name string, unschedulable bool) {
	t.Helper()
	n := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	base := n.DeepCopy()
	n.Spec.Unschedulable = unschedulable
	if err := kube.Patch(ctx, n, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// nodesLeft counts the named nodes that exist and are not being deleted.
func nodesLeft(ctx context.Context, names []string) int {
	n := 0
	for _, name := range names {
		node := &corev1.Node{}
		if kube.Get(ctx, client.ObjectKey{Name: name}, node) == nil && node.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// nodeClaimEvent finds an Event with the reason about one of the nodes' NodeClaims (named as
// their nodes on kwok) whose note holds every part.
func nodeClaimEvent(ctx context.Context, nodes []string, reason string, parts ...string) (string, error) {
	var evs eventsv1.EventList
	if err := kube.List(ctx, &evs); err != nil {
		return "", err
	}
	for _, e := range evs.Items {
		if e.Reason != reason || e.Regarding.Kind != "NodeClaim" {
			continue
		}
		for _, n := range nodes {
			all := e.Regarding.Name == n
			for _, p := range parts {
				all = all && strings.Contains(e.Note, p)
			}
			if all {
				return e.Regarding.Name + ": " + e.Note, nil
			}
		}
	}
	return "", fmt.Errorf("none of %d events", len(evs.Items))
}
