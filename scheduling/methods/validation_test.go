package methods

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func TestValidate(t *testing.T) {
	// a's pod fits on b: single-node consolidation deletes a.
	base := func() world {
		return world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a")},
			pods: []*corev1.Pod{pod("web", "a", "1", "2Gi"), pod("api", "b", "2", "4Gi")}}
	}
	cmds := commands(t, &SingleNode{}, base().cluster())
	if len(cmds) != 1 || commandNames(cmds)[0] != "delete:a" {
		t.Fatalf("setup: %v", commandNames(cmds))
	}
	for name, tc := range map[string]struct {
		change    func(w *world)
		nominated string
		want      string // substring; "" valid
	}{
		"nothing changed":           {change: func(*world) {}},
		"the candidate is gone":     {change: func(w *world) { w.nodes = w.nodes[1:] }, want: "no longer a candidate"},
		"a pod came":                {change: func(w *world) { w.pods = append(w.pods, pod("new", "a", "100m", "64Mi")) }, want: "its pods changed"},
		"a pod was nominated to it": {change: func(*world) {}, nominated: "a", want: "pods were nominated"},
		"a do-not-disrupt pod appeared": {change: func(w *world) {
			w.pods[0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		}, want: "has karpenter.sh/do-not-disrupt"},
		"a blocking PDB appeared": {change: func(w *world) { w.pdbs = []*k8spolicyv1.PodDisruptionBudget{pdb("web", 1, "web")} }, want: "PodDisruptionBudget default/web"},
		"the budget no longer allows it": {change: func(w *world) {
			w.pools = []*karpv1.NodePool{nodePool("default", func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}} })}
		}, want: "budget allows 0"},
		"the room it counted on is gone": {change: func(w *world) { w.pods = append(w.pods, pod("filler", "b", "1500m", "3Gi")) }, want: "simulating again needs replace"},
	} {
		t.Run(name, func(t *testing.T) {
			w := base()
			tc.change(&w)
			got := Validate(context.Background(), cmds[0], w.cluster(), &SingleNode{}, func(n string) bool { return n == tc.nominated })
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("Validate says %q, want %q", got, tc.want)
			}
		})
	}
}

// A command validated against a fresh cluster where the candidate was held (its command
// rolled back) or where another command is now in flight on it fails, with why.
func TestValidateAfterHoldAndInFlight(t *testing.T) {
	w := world{nodes: []*corev1.Node{node("a", "m5.xlarge", "on-demand", "z-a"), node("b", "m5.xlarge", "on-demand", "z-a")},
		pods: []*corev1.Pod{pod("web", "a", "1", "2Gi"), pod("api", "b", "2", "4Gi")}}
	cmds := commands(t, &SingleNode{}, w.cluster())
	if len(cmds) != 1 {
		t.Fatalf("setup: %v", commandNames(cmds))
	}
	held := w.cluster()
	held.Hold(map[string]Held{"a": {Until: now.Add(time.Hour), Why: "its replacement never initialized"}})
	if why := Validate(context.Background(), cmds[0], held, &SingleNode{}, nil); !strings.Contains(why, "never initialized") {
		t.Fatalf("validate on a held candidate: %q", why)
	}
	busy := w.cluster()
	busy.InFlight(map[string]bool{"a": true})
	if why := Validate(context.Background(), cmds[0], busy, &SingleNode{}, nil); !strings.Contains(why, "no longer a candidate") {
		t.Fatalf("validate on a candidate in flight: %q", why)
	}
	if why := Validate(context.Background(), cmds[0], w.cluster(), &SingleNode{}, func(string) bool { return false }); why != "" {
		t.Fatalf("validate on the same cluster: %q", why)
	}
}
