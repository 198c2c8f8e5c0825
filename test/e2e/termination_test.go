package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Deleting a NodeClaim drains its pods within their PodDisruptionBudget, the pods run again
// elsewhere, and the Node and NodeClaim are gone.
func TestDeletingANodeClaimDrainsWithinThePDB(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	labels := map[string]string{"app": "drain-me"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "drain-me", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: "general"},
					// One pod per node, so the drain has to move them one at a time.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
				},
			},
		},
	}
	pdb := &k8spolicyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "drain-me", Namespace: "default"},
		Spec:       k8spolicyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	for _, o := range []client.Object{pdb, deploy} {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
	}
	running := func() (map[string]string, int) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return nil, 0
		}
		byNode, ready := map[string]string{}, 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				ready++
				byNode[p.Spec.NodeName] = p.Name
			}
		}
		return byNode, ready
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, n := running()
		return n == 4, nil
	}); err != nil {
		t.Fatalf("the 4 pods never ran: %v", err)
	}
	byNode, _ := running()
	var victim karpv1.NodeClaim
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if _, ok := byNode[nc.Status.NodeName]; ok {
			victim = nc
			break
		}
	}
	if victim.Name == "" {
		t.Fatal("no NodeClaim hosts a drain-me pod")
	}
	start := time.Now()
	if err := kube.Delete(ctx, &victim); err != nil {
		t.Fatal(err)
	}
	minRunning := 4
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, n := running()
		if n < minRunning {
			minRunning = n
		}
		err := kube.Get(ctx, client.ObjectKey{Name: victim.Name}, &karpv1.NodeClaim{})
		nodeErr := kube.Get(ctx, client.ObjectKey{Name: victim.Status.NodeName}, &corev1.Node{})
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(nodeErr) && n == 4, nil
	}); err != nil {
		t.Fatalf("the NodeClaim and its Node must be gone and the 4 pods running again: %v\n%s", err, local.LogTail("karpenter", 20))
	}
	if minRunning < 3 {
		t.Errorf("the PDB allows 1 unavailable pod, but only %d of 4 were running at one point", minRunning)
	}
	after, _ := running()
	if _, still := after[victim.Status.NodeName]; still {
		t.Errorf("a pod still runs on the deleted node %s", victim.Status.NodeName)
	}
	t.Logf("NodeClaim %s drained and gone in %.1fs; at least %d of 4 pods running throughout", victim.Name, time.Since(start).Seconds(), minRunning)
}
