package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/controllers/disruption"
)

// rollState is what a sample of a rolling pool saw: nodes disrupting (tainted or being
// deleted), and tainted nodes that no command accounts for (no NodeClaim carrying the command
// annotation, and not being deleted).
type rollState struct {
	disrupting, orphaned int
	orphans              []string
}

func sampleRoll(ctx context.Context, pool string) (rollState, error) {
	var s rollState
	var nodes corev1.NodeList
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return s, err
	}
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return s, err
	}
	command := map[string]bool{}
	deleting := map[string]bool{}
	for _, nc := range claims.Items {
		command[nc.Status.NodeName] = nc.Annotations[disruption.CommandAnnotation] != ""
		deleting[nc.Status.NodeName] = nc.DeletionTimestamp != nil
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if tainted(n) || n.DeletionTimestamp != nil {
			s.disrupting++
		}
		if tainted(n) && n.DeletionTimestamp == nil && !deleting[n.Name] && !command[n.Name] {
			s.orphaned++
			s.orphans = append(s.orphans, n.Name)
		}
	}
	return s, nil
}

// A template change drifts six nodes; a Drifted budget of 3 rolls them three at a time, never
// four (each command launches its replacement, which the node class makes take 20 s, before its
// node drains). With three commands in flight the manager is killed; the one that starts next
// adopts them from the objects: the watcher never sees a tainted node that no command accounts
// for, the roll finishes, and no NodeClaim is left over.
func TestDriftRollsThreeAtATimeThroughARestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	np := isolated(t, ctx, func(c *kwokv1alpha1.KWOKNodeClass) { c.Spec.LaunchDelay = metav1Duration(20 * time.Second) }, func(np *karpv1.NodePool) {
		np.Spec.Disruption.Budgets = []karpv1.Budget{
			{Nodes: "3", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}},
			{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonEmpty}},
		}
	})
	create(t, ctx, deployment("rolled6", 6, np.Name, "1", apart("rolled6")))
	before := map[string]bool{}
	for _, p := range runningPods(t, ctx, "rolled6", 6) {
		before[p.Spec.NodeName] = true
	}
	if len(before) != 6 {
		t.Fatalf("the pods run on %d nodes, want 6", len(before))
	}

	// The watcher samples every 250 ms: the most nodes disrupting at once, and any tainted
	// node no command accounts for.
	var mu sync.Mutex
	most, killed := 0, false
	var violations []string
	watch, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for watch.Err() == nil {
			if s, err := sampleRoll(watch, np.Name); err == nil {
				mu.Lock()
				most = max(most, s.disrupting)
				if s.disrupting > 3 {
					violations = append(violations, fmt.Sprintf("%s: %d nodes disrupting", time.Now().Format(time.TimeOnly), s.disrupting))
				}
				if s.orphaned > 0 && killed {
					violations = append(violations, fmt.Sprintf("%s: tainted without a command: %v", time.Now().Format(time.TimeOnly), s.orphans))
				}
				mu.Unlock()
			}
			select {
			case <-watch.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	defer func() { stopWatch(); <-done }()

	patchNodePool(t, ctx, np, func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"revision": "2"} })

	// Three commands in flight: three candidates marked, their replacements launching.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		if kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}) != nil {
			return false, nil
		}
		marked, launching := 0, 0
		for _, nc := range claims.Items {
			if nc.Annotations[disruption.CommandAnnotation] != "" && nc.DeletionTimestamp == nil {
				marked++
			}
			if nc.Labels[disruption.CommandLabel] != "" && nc.Status.NodeName == "" {
				launching++
			}
		}
		return marked == 3 && launching == 3, nil
	}); err != nil {
		t.Fatalf("three commands were never in flight at once: %v\n%s", err, local.LogTail("karpenter", 30))
	}
	if err := local.Kill("karpenter"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	killed = true
	mu.Unlock()
	if err := local.Restart("karpenter"); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()

	// Done: six nodes of the new template running the six pods, none of the old, nothing
	// tainted, and exactly six NodeClaims.
	var state string
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 6*time.Minute, true, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		var claims karpv1.NodeClaimList
		if kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}) != nil ||
			kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}) != nil {
			return false, nil
		}
		old, rolled, anyTainted := 0, 0, false
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if before[n.Name] {
				old++
			} else if n.Labels["revision"] == "2" && n.DeletionTimestamp == nil {
				rolled++
			}
			anyTainted = anyTainted || tainted(n)
		}
		running := runningOf(ctx, "rolled6")
		state = fmt.Sprintf("%d old nodes left, %d new, %d NodeClaims, tainted %v, %d pods running", old, rolled, len(claims.Items), anyTainted, len(running))
		return old == 0 && rolled == 6 && len(claims.Items) == 6 && !anyTainted && len(running) == 6, nil
	}); err != nil {
		t.Fatalf("the roll did not finish after the restart: %s: %v\n%s", state, err, local.LogTail("karpenter", 40))
	}
	t.Logf("rolled six nodes, %s after the restart: %s", time.Since(restarted).Round(time.Second), state)
	if log := local.LogTail("karpenter", 2000); !strings.Contains(log, "adopting a disruption command in flight") {
		t.Errorf("the restarted manager did not adopt the commands in flight:\n%s", local.LogTail("karpenter", 40))
	}
	stopWatch()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if most != 3 {
		t.Errorf("at most %d nodes were disrupting at once; the budget allows 3 and six drifted", most)
	}
	if len(violations) > 0 {
		t.Errorf("%d violations, the first: %v", len(violations), violations[:min(5, len(violations))])
	}
}
