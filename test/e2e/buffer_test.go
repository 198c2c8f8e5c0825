package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// poolClaims are the names of the NodePool's NodeClaims not being deleted.
func poolClaims(t *testing.T, ctx context.Context, pool string) map[string]string {
	t.Helper()
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp == nil {
			out[nc.Name] = nc.Status.NodeName
		}
	}
	return out
}

// waitPoolClaims waits until the NodePool has n NodeClaims, each with a node.
func waitPoolClaims(t *testing.T, ctx context.Context, pool string, n int, within time.Duration) map[string]string {
	t.Helper()
	var got map[string]string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, within, true, func(ctx context.Context) (bool, error) {
		got = poolClaims(t, ctx, pool)
		for _, node := range got {
			if node == "" {
				return false, nil
			}
		}
		return len(got) == n, nil
	}); err != nil {
		t.Fatalf("NodePool %s: want %d NodeClaims with nodes, have %v", pool, n, got)
	}
	return got
}

// bufferProvisioned waits until the buffer resolved to replicas and all its room is kept.
func bufferProvisioned(t *testing.T, ctx context.Context, name string, replicas int32) {
	t.Helper()
	var cb autoscalingv1beta1.CapacityBuffer
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &cb); err != nil {
			return false, nil
		}
		return cb.Status.Replicas != nil && *cb.Status.Replicas == replicas &&
			meta.IsStatusConditionTrue(cb.Status.Conditions, autoscalingv1beta1.ConditionReadyForProvisioning) &&
			meta.IsStatusConditionTrue(cb.Status.Conditions, autoscalingv1beta1.ConditionProvisioning), nil
	}); err != nil {
		t.Fatalf("CapacityBuffer %s never kept the room of %d: %+v", name, replicas, cb.Status)
	}
}

// A CapacityBuffer of 3 chunks of 1.5 CPU keeps three m5.large nodes' room with no pod on
// them, and consolidation leaves that room alone. Three real pods of the same shape then run
// on it without a launch, and the buffer is made again: three more nodes. Deleting the buffer
// gives its empty nodes back to emptiness.
func TestCapacityBufferKeepsRoomAndIsRemade(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		}
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("5s")
	})
	chunk := corev1.PodSpec{
		NodeSelector: map[string]string{karpv1.NodePoolLabelKey: np.Name},
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
	}
	tmpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk-" + np.Name, Namespace: "default"},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "buffer-chunk"}}, Spec: chunk}}
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "headroom-" + np.Name, Namespace: "default"},
		Spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: tmpl.Name}, Replicas: ptr.To[int32](3)}}
	create(t, ctx, tmpl, cb)

	// One chunk fits an m5.large: three nodes, and no pod on them.
	room := waitPoolClaims(t, ctx, np.Name, 3, 2*time.Minute)
	bufferProvisioned(t, ctx, cb.Name, 3)
	// Empty for four times consolidateAfter: consolidation keeps the room.
	time.Sleep(20 * time.Second)
	if got := poolClaims(t, ctx, np.Name); !maps.Equal(got, room) {
		t.Fatalf("the buffer's empty nodes were disrupted (and launched again): %v, had %v", got, room)
	}

	// Real pods of the chunk's shape run at once on the room, without a launch for them.
	roomNodes := map[string]bool{}
	for _, node := range room {
		roomNodes[node] = true
	}
	start := time.Now()
	d := deployment("buffer-users", 3, np.Name, "1500m", nil)
	create(t, ctx, d)
	for _, p := range runningPods(t, ctx, "buffer-users", 3) {
		if !roomNodes[p.Spec.NodeName] {
			t.Errorf("pod %s runs on %s, not on the buffer's room %v", p.Name, p.Spec.NodeName, room)
		}
	}
	t.Logf("3 pods running on the buffer's room %s after their Deployment was created", time.Since(start).Round(100*time.Millisecond))

	// The room is taken: the buffer is made again.
	waitPoolClaims(t, ctx, np.Name, 6, 2*time.Minute)
	bufferProvisioned(t, ctx, cb.Name, 3)

	// Without the buffer its three empty nodes are empty to emptiness again.
	if err := kube.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	waitPoolClaims(t, ctx, np.Name, 3, 2*time.Minute)
	runningPods(t, ctx, "buffer-users", 3)
}
