package methods

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Pods waiting for a place (pending, or on deleting nodes) keep the room the provisioner
// would give them; DaemonSet pods go with their node and take room on no other; the searches
// stop at their timeouts with what they found.

func pending(p *corev1.Pod) {
	p.Spec.NodeName = ""
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
}

func TestWaitingPodsKeepTheirRoom(t *testing.T) {
	// b has room for one 3-cpu pod: either a's pod (consolidating a) or the pending one.
	base := world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "3", "2Gi"), pod("w2", "b", "500m", "1Gi")}}
	if got := strings.Join(commandNames(commands(t, &SingleNode{}, base.cluster())), " | "); !strings.HasPrefix(got, "delete:") && !strings.HasPrefix(got, "replace:") {
		t.Fatalf("without a pending pod: %q, want a command", got)
	}
	w := base
	w.pods = append(append([]*corev1.Pod(nil), base.pods...), pod("late", "", "3", "2Gi", pending))
	for _, cmd := range commands(t, &SingleNode{}, w.cluster()) {
		if cmd.Decision == DecisionDelete {
			t.Fatalf("%v deletes a node while a pending pod needs the room its pods would take", commandNames([]*Command{cmd}))
		}
	}
}

// A pending pod the provisioner would put on an empty node keeps it from emptiness only when
// it was nominated there (the provisioner's decision, not the pass's guess).
func TestEmptinessAndWaitingPods(t *testing.T) {
	w := world{nodes: nodesOf(2, "m5.large", "on-demand"), nominated: "a"}
	got := strings.Join(commandNames(commands(t, Emptiness{}, w.cluster())), " | ")
	if got != "delete:b" {
		t.Fatalf("commands %q, want only b (pods are nominated to a)", got)
	}
}

func TestDaemonSetPodsDoNotMove(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{
		pod("agent-a", "a", "500m", "256Mi", daemonSetPod), pod("agent-b", "b", "500m", "256Mi", daemonSetPod),
		pod("w1", "a", "1", "2Gi"), pod("w2", "b", "1", "2Gi")}}
	c := w.cluster()
	for _, cand := range c.Candidates {
		for _, p := range cand.Pods {
			if isDaemon(p) {
				t.Fatalf("DaemonSet pod %s is a pod to reschedule", p.Name)
			}
		}
	}
	for _, m := range []Method{&SingleNode{}, &MultiNode{}} {
		for _, cmd := range commands(t, m, c) {
			for _, mv := range cmd.Moves {
				if isDaemon(mv.Pod) {
					t.Errorf("%s moves DaemonSet pod %s", m.Reason(), mv.Pod.Name)
				}
			}
		}
	}
}

// The room a DaemonSet pod takes on a node counts: a node whose agents leave too little room
// does not take another node's pods.
func TestDaemonSetPodsTakeRoom(t *testing.T) {
	w := world{pools: pool(onDemandOnly), nodes: nodesOf(2, "m5.xlarge", "on-demand"), pods: []*corev1.Pod{
		pod("agent-b", "b", "2500m", "256Mi", daemonSetPod), pod("w1", "a", "1500m", "2Gi"), pod("w2", "b", "500m", "1Gi")}}
	for _, cmd := range commands(t, &SingleNode{}, w.cluster()) {
		for _, mv := range cmd.Moves {
			if mv.Pod.Name == "w1" && mv.To == "b" {
				t.Fatalf("w1 (1500m) moved to b, where the agent and w2 leave 1 cpu")
			}
		}
	}
}

// clockAt returns a clock that advances by step each time it is read.
func clockAt(start time.Time, step time.Duration) func() time.Time {
	t := start
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

func TestSearchTimeouts(t *testing.T) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 12 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node(name, "m5.xlarge", "on-demand", "z-a"))
		pods = append(pods, pod("w"+name, name, "1", "2Gi"))
	}
	w := world{pools: pool(onDemandOnly), nodes: nodes, pods: pods}
	t.Run("single-node stops at its timeout", func(t *testing.T) {
		w := w
		w.opts.SingleNodeTimeout = 30 * time.Second
		s := &SingleNode{Clock: clockAt(now, time.Minute)}
		c := w.cluster()
		cmds := commands(t, s, c)
		if len(cmds) != 0 || !s.TimedOut {
			t.Fatalf("commands %v, timed out %v: with a minute per candidate, the search stops before any", commandNames(cmds), s.TimedOut)
		}
		found := false
		for _, u := range c.Unconsolidatable {
			found = found || strings.Contains(u.Reason, "ran out of time")
		}
		if !found {
			t.Fatalf("no candidate says it was not simulated: %+v", c.Unconsolidatable)
		}
	})
	t.Run("single-node with time enough", func(t *testing.T) {
		s := &SingleNode{Clock: clockAt(now, time.Millisecond)}
		cmds := commands(t, s, w.cluster())
		if len(cmds) != 1 || s.TimedOut {
			t.Fatalf("commands %v, timed out %v", commandNames(cmds), s.TimedOut)
		}
	})
	t.Run("multi-node returns the best found by its timeout", func(t *testing.T) {
		w := w
		w.opts.MultiNodeTimeout = 3 * time.Minute
		m := &MultiNode{Clock: clockAt(now, time.Minute)}
		cmds := commands(t, m, w.cluster())
		if !m.TimedOut {
			t.Fatal("a search of a minute per step with a 3-minute timeout must time out")
		}
		for _, cmd := range cmds {
			if len(cmd.Candidates) < 2 {
				t.Fatalf("multi-node returned %v", commandNames(cmds))
			}
		}
	})
	t.Run("multi-node with time enough takes the most", func(t *testing.T) {
		m := &MultiNode{Clock: clockAt(now, time.Millisecond)}
		cmds := commands(t, m, w.cluster())
		if m.TimedOut || len(cmds) != 1 || len(cmds[0].Candidates) < 4 {
			t.Fatalf("commands %v, timed out %v: want most of the 12 half-empty nodes in one command", commandNames(cmds), m.TimedOut)
		}
	})
}

// Multi-node weighs at most MaxMultiNodeCandidates candidates.
func TestMultiNodeCandidateCap(t *testing.T) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range MaxMultiNodeCandidates + 20 {
		name := fmt.Sprintf("n%03d", i)
		nodes = append(nodes, node(name, "m5.2xlarge", "on-demand", "z-a"))
		pods = append(pods, pod("w"+name, name, "100m", "128Mi"))
	}
	cmds := commands(t, &MultiNode{}, world{pools: pool(onDemandOnly), nodes: nodes, pods: pods}.cluster())
	if len(cmds) != 1 {
		t.Fatalf("%d commands", len(cmds))
	}
	if n := len(cmds[0].Candidates); n > MaxMultiNodeCandidates {
		t.Fatalf("%d candidates in one command, at most %d", n, MaxMultiNodeCandidates)
	}
}

// Nodes of a NodePool whose template is static (a static pool keeps its size) are never
// consolidated.
func TestStaticPoolsAreNotConsolidated(t *testing.T) {
	static := nodePool("default", func(np *karpv1.NodePool) {
		r := int64(2)
		np.Spec.Replicas = &r
	})
	w := world{pools: []*karpv1.NodePool{static}, nodes: nodesOf(2, "m5.xlarge", "on-demand"),
		pods: []*corev1.Pod{pod("w1", "a", "500m", "1Gi"), pod("w2", "b", "500m", "1Gi")}}
	for _, m := range []Method{Emptiness{}, &SingleNode{}, &MultiNode{}} {
		if cmds := commands(t, m, w.cluster()); len(cmds) > 0 {
			t.Errorf("%s on a static pool: %v", m.Reason(), commandNames(cmds))
		}
	}
}

// A node whose NodeClaim is being deleted, or whose pods are terminating, is handled by
// termination, not consolidation.
func TestTerminatingPodsAreNotRescheduled(t *testing.T) {
	ts := metav1.NewTime(now.Add(-time.Minute))
	w := world{nodes: nodesOf(1, "m5.large", "on-demand"), pods: []*corev1.Pod{pod("gone", "a", "1", "1Gi", func(p *corev1.Pod) { p.DeletionTimestamp = &ts })}}
	c := w.cluster()
	if len(c.Candidates) != 1 || len(c.Candidates[0].Pods) != 0 {
		t.Fatalf("candidates %+v, want a with no pod to reschedule", c.Candidates)
	}
	cmds, _, err := Pass(context.Background(), c, Methods())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(commandNames(cmds), " | "); got != "delete:a" {
		t.Fatalf("commands %q, want a deleted as empty", got)
	}
}
