package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/test"
)

// isolated creates a KWOKNodeClass and a NodePool of their own; pods select the NodePool.
func isolated(t *testing.T, ctx context.Context, classMut func(*kwokv1alpha1.KWOKNodeClass), poolMut func(*karpv1.NodePool)) *karpv1.NodePool {
	t.Helper()
	class := test.KWOKNodeClass(classMut)
	np := test.NodePool(func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef.Name = class.Name
		if poolMut != nil {
			poolMut(np)
		}
	})
	for _, o := range []client.Object{class, np} {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Delete the NodePool's NodeClaims (drained by the controller), then the objects.
		var claims karpv1.NodeClaimList
		_ = kube.List(context.Background(), &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name})
		for i := range claims.Items {
			_ = kube.Delete(context.Background(), &claims.Items[i])
		}
		_ = kube.Delete(context.Background(), np)
		_ = kube.Delete(context.Background(), class)
	})
	return np
}

// patchNodePool reads the NodePool as the API server has it, applies change and merge-patches
// the difference, so that the controller's status writes in between are not overwritten.
func patchNodePool(t *testing.T, ctx context.Context, np *karpv1.NodePool, change func(*karpv1.NodePool)) {
	t.Helper()
	fresh := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(np), fresh); err != nil {
		t.Fatal(err)
	}
	base := fresh.DeepCopy()
	change(fresh)
	if err := kube.Patch(ctx, fresh, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func deployment(name string, replicas int32, np string, cpu string, mutate func(*corev1.PodSpec)) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: np},
		Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
	}
	if mutate != nil {
		mutate(&spec)
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
}

func create(t *testing.T, ctx context.Context, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
	}
}

// runningPods waits until n pods of app run, and returns them.
func runningPods(t *testing.T, ctx context.Context, app string, n int) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
			return false, nil
		}
		out = out[:0]
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				out = append(out, p)
			}
		}
		return len(out) == n, nil
	}); err != nil {
		t.Fatalf("%d pods of %s never all ran: %v\n%s", n, app, err, local.LogTail("karpenter", 15))
	}
	return out
}

func nodeOf(t *testing.T, ctx context.Context, p corev1.Pod) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConstraintsAreHonouredByTheNodesLaunched(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, nil)
	create(t, ctx,
		deployment("arm", 3, np.Name, "500m", func(s *corev1.PodSpec) { s.NodeSelector[karpv1.LabelArch] = "arm64" }),
		deployment("zonal", 6, np.Name, "250m", func(s *corev1.PodSpec) {
			// minDomains: nodes register one by one, and kube-scheduler, which binds the pods,
			// only sees the zones of registered nodes; with 3 required it keeps the skew meanwhile.
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: karpv1.LabelTopologyZone, MinDomains: ptr.To[int32](3),
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zonal"}}}}
		}),
		deployment("alone", 3, np.Name, "250m", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "alone"}}}}}}
		}),
	)
	for _, p := range runningPods(t, ctx, "arm", 3) {
		if arch := nodeOf(t, ctx, p).Labels[karpv1.LabelArch]; arch != "arm64" {
			t.Errorf("pod %s (nodeSelector arm64) runs on %s", p.Name, arch)
		}
	}
	zones := map[string]int{}
	for _, p := range runningPods(t, ctx, "zonal", 6) {
		zones[nodeOf(t, ctx, p).Labels[karpv1.LabelTopologyZone]]++
	}
	if len(zones) != 3 {
		t.Errorf("zone spread with maxSkew 1 over 3 zones: want 2 per zone, got %v", zones)
	}
	for z, n := range zones {
		if n != 2 {
			t.Errorf("zone %s has %d pods: %v", z, n, zones)
		}
	}
	hosts := map[string]bool{}
	for _, p := range runningPods(t, ctx, "alone", 3) {
		if hosts[p.Spec.NodeName] {
			t.Errorf("two 'alone' pods share node %s despite hostname anti-affinity", p.Spec.NodeName)
		}
		hosts[p.Spec.NodeName] = true
	}
}

func TestNodePoolLimitStopsProvisioning(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("2")}
	})
	create(t, ctx, deployment("capped", 3, np.Name, "250m", func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "capped"}}}}}}
	}))
	runningPods(t, ctx, "capped", 2)
	var pending corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "capped"}); err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				pending = p
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("the third pod must stay pending")
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil || len(claims.Items) != 2 {
		t.Fatalf("the nodes limit of 2 allows 2 NodeClaims, got %d (%v)", len(claims.Items), err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := kube.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == pending.Name && e.ReportingController == "karpenter" &&
				strings.Contains(e.Note, fmt.Sprintf("nodepool %s: limit nodes reached", np.Name)) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		var evs eventsv1.EventList
		_ = kube.List(ctx, &evs, client.InNamespace("default"))
		var notes []string
		for _, e := range evs.Items {
			if e.Regarding.Name == pending.Name {
				notes = append(notes, e.ReportingController+": "+e.Note)
			}
		}
		t.Fatalf("the pending pod %s must carry an Event naming the limit: %v; its events: %v", pending.Name, err, notes)
	}
}

func TestInsufficientCapacityLaunchesAnotherOffering(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	np := isolated(t, ctx, func(c *kwokv1alpha1.KWOKNodeClass) {
		// Every on-demand m6g.large offering fails: it is the cheapest type for this pod.
		c.Spec.InsufficientCapacity = &kwokv1alpha1.InsufficientCapacityInjection{Percent: 100,
			Offerings: []kwokv1alpha1.OfferingSelector{{InstanceType: "c6g.medium"}, {InstanceType: "m6g.medium"}, {InstanceType: "c7g.medium"}}}
	}, nil)
	create(t, ctx, deployment("ice", 1, np.Name, "500m", nil))
	p := runningPods(t, ctx, "ice", 1)[0]
	it := nodeOf(t, ctx, p).Labels[karpv1.LabelInstanceType]
	if it == "c6g.medium" || it == "m6g.medium" || it == "c7g.medium" {
		t.Fatalf("the pod runs on %s, whose offerings all fail", it)
	}
	t.Logf("launched on %s after the cheapest offerings failed", it)
}
