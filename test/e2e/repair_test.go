package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
)

// setCondition gives a node the ExampleUnhealthy condition (status True) or takes it away.
func setCondition(t *testing.T, ctx context.Context, name string, on bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return false, nil
		}
		var conds []corev1.NodeCondition
		for _, c := range n.Status.Conditions {
			if c.Type != "ExampleUnhealthy" {
				conds = append(conds, c)
			}
		}
		if on {
			conds = append(conds, corev1.NodeCondition{Type: "ExampleUnhealthy", Status: corev1.ConditionTrue, Reason: "E2E",
				LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()})
		}
		n.Status.Conditions = conds
		return kube.Status().Update(ctx, n) == nil, nil
	}); err != nil {
		t.Fatalf("setting the condition on %s: %v", name, err)
	}
}

func poolNodes(t *testing.T, ctx context.Context, pool string) sets.Set[string] {
	t.Helper()
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		t.Fatal(err)
	}
	out := sets.New[string]()
	for _, n := range nodes.Items {
		if n.DeletionTimestamp == nil {
			out.Insert(n.Name)
		}
	}
	return out
}

func eventWith(ctx context.Context, reason, substring string) bool {
	var events eventsv1.EventList
	if err := kube.List(ctx, &events); err != nil {
		return false
	}
	for _, e := range events.Items {
		if e.Reason == reason && strings.Contains(e.Note, substring) {
			return true
		}
	}
	return false
}

// Node repair (the NodeRepair gate, on in this suite): a node whose KWOKNodeClass
// repairPolicies condition has held past its toleration is replaced, a healthy node joining
// before it goes, and its pod runs elsewhere; with 3 of 4 nodes unhealthy none is touched and
// NodeRepairBlocked is recorded; karpenter.sh/do-not-repair holds a node.
func TestNodeRepair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	np := isolated(t, ctx, func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.RepairPolicies = []kwokv1alpha1.RepairPolicy{{ConditionType: "ExampleUnhealthy", ConditionStatus: "True", Toleration: metav1.Duration{Duration: 5 * time.Second}}}
	}, func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	})
	create(t, ctx, deployment("repair", 4, np.Name, "500m", func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "repair"}}}}}}
	}))
	runningPods(t, ctx, "repair", 4)
	nodes := poolNodes(t, ctx, np.Name)
	if nodes.Len() != 4 {
		t.Fatalf("want 4 nodes, got %v", sets.List(nodes))
	}
	names := sets.List(nodes)

	// One unhealthy node of four: replaced.
	sick := names[0]
	setCondition(t, ctx, sick, true)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		now := poolNodes(t, ctx, np.Name)
		return !now.Has(sick) && now.Len() == 4, nil
	}); err != nil {
		t.Fatalf("the unhealthy node %s was not replaced: %v\n%s", sick, err, local.LogTail("karpenter", 30))
	}
	// The pod of the sick node runs elsewhere: until its replacement runs, the evicted pod
	// may still read Running while it is being deleted, so wait for four running off the sick
	// node and none running on it.
	var onSick []string
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "repair"}); err != nil {
			return false, nil
		}
		running := 0
		onSick = onSick[:0]
		for _, p := range pods.Items {
			switch {
			case p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil:
			case p.Spec.NodeName == sick:
				onSick = append(onSick, p.Name)
			default:
				running++
			}
		}
		return running == 4 && len(onSick) == 0, nil
	}); err != nil {
		t.Errorf("four pods never ran off the repaired node %s; still on it: %v", sick, onSick)
	}

	// Three of four unhealthy: the breaker holds them all.
	names = sets.List(poolNodes(t, ctx, np.Name))
	for _, n := range names[:3] {
		setCondition(t, ctx, n, true)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		return eventWith(ctx, "NodeRepairBlocked", "(3 of 4)"), nil
	}); err != nil {
		t.Fatalf("no NodeRepairBlocked event: %v\n%s", err, local.LogTail("karpenter", 30))
	}
	time.Sleep(20 * time.Second)
	if now := poolNodes(t, ctx, np.Name); !now.Equal(sets.New(names...)) {
		t.Fatalf("with 3 of 4 unhealthy no node is touched: before %v, now %v", names, sets.List(now))
	}

	// do-not-repair holds a node; the others, healthy again, are left alone.
	held := names[0]
	n := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: held}, n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[karpv1.DoNotRepairAnnotationKey] = "true"
	if err := kube.Patch(ctx, n, patch); err != nil {
		t.Fatal(err)
	}
	for _, name := range names[1:3] {
		setCondition(t, ctx, name, false)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		return eventWith(ctx, "DisruptionBlocked", karpv1.DoNotRepairAnnotationKey), nil
	}); err != nil {
		t.Fatalf("no DisruptionBlocked event for do-not-repair: %v\n%s", err, local.LogTail("karpenter", 30))
	}
	time.Sleep(20 * time.Second)
	if now := poolNodes(t, ctx, np.Name); !now.Has(held) {
		t.Fatalf("the do-not-repair node %s was repaired", held)
	}
}
