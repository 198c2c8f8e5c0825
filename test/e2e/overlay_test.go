package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
)

// overlayFor is a NodeOverlay that selects one instance type of one NodePool only, so that it
// changes nothing for the other tests' NodePools.
func overlayFor(name, pool, instanceType string, mutate func(*karpv1alpha1.NodeOverlaySpec)) *karpv1alpha1.NodeOverlay {
	o := &karpv1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpv1alpha1.NodeOverlaySpec{
		Requirements: []karpv1alpha1.NodeSelectorRequirement{
			{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{pool}},
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{instanceType}}}}}
	mutate(&o.Spec)
	return o
}

// overlayCondition waits until the overlay's ValidationSucceeded condition has the status,
// and returns it.
func overlayCondition(t *testing.T, ctx context.Context, name string, status metav1.ConditionStatus) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		o := &karpv1alpha1.NodeOverlay{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
			return false, nil
		}
		cond = meta.FindStatusCondition(o.Status.Conditions, karpv1alpha1.ConditionTypeValidationSucceeded)
		return cond != nil && cond.Status == status && cond.ObservedGeneration == o.Generation, nil
	}); err != nil {
		t.Fatalf("NodeOverlay %s never had ValidationSucceeded=%s: last %+v", name, status, cond)
	}
	return cond
}

// A 30% price adjustment changes the type the provisioner launches: of c6a.large ($0.0765/h)
// and m5.large ($0.096/h) on demand, c6a.large is chosen, until an overlay takes 30% off
// m5.large ($0.0672/h); the NodeClaim then says an overlay priced it. A second overlay of the
// same weight on the same offerings conflicts, and is not applied.
func TestNodeOverlayPriceAdjustmentChangesTheTypeChosen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c6a.large", "m5.large"}},
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		}
	})
	create(t, ctx, deployment("before-overlay", 1, np.Name, "1", nil))
	before := nodeOf(t, ctx, runningPods(t, ctx, "before-overlay", 1)[0])
	if it := before.Labels[corev1.LabelInstanceTypeStable]; it != "c6a.large" {
		t.Fatalf("without an overlay the cheaper c6a.large should be chosen, got %s", it)
	}

	create(t, ctx, overlayFor("e2e-savings-"+np.Name, np.Name, "m5.large", func(s *karpv1alpha1.NodeOverlaySpec) {
		s.PriceAdjustment, s.Weight = ptr.To("-30%"), ptr.To[int32](10)
	}))
	overlayCondition(t, ctx, "e2e-savings-"+np.Name, metav1.ConditionTrue)
	// 1.5 CPU does not fit beside the first pod: a second node is launched, priced with the
	// overlay.
	create(t, ctx, deployment("after-overlay", 1, np.Name, "1500m", nil))
	after := nodeOf(t, ctx, runningPods(t, ctx, "after-overlay", 1)[0])
	if it := after.Labels[corev1.LabelInstanceTypeStable]; it != "m5.large" {
		t.Errorf("with m5.large 30%% off ($0.0672/h < $0.0765/h), m5.large should be chosen, got %s", it)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, nc := range claims.Items {
		if nc.Status.NodeName != after.Name {
			continue
		}
		found = true
		if nc.Annotations[karpv1alpha1.PriceOverlayAppliedAnnotationKey] != "true" {
			t.Errorf("the NodeClaim %s lacks %s=true: %v", nc.Name, karpv1alpha1.PriceOverlayAppliedAnnotationKey, nc.Annotations)
		}
	}
	if !found {
		t.Errorf("no NodeClaim of NodePool %s has node %s", np.Name, after.Name)
	}

	// "e2e-a..." sorts before "e2e-savings-...": at the same weight it is the one left out.
	create(t, ctx, overlayFor("e2e-a-"+np.Name, np.Name, "m5.large", func(s *karpv1alpha1.NodeOverlaySpec) {
		s.Price, s.Weight = ptr.To("5"), ptr.To[int32](10)
	}))
	if c := overlayCondition(t, ctx, "e2e-a-"+np.Name, metav1.ConditionFalse); c.Reason != "Conflict" || !strings.Contains(c.Message, "m5.large") {
		t.Errorf("the conflicting overlay's condition: %+v", c)
	}
	overlayCondition(t, ctx, "e2e-savings-"+np.Name, metav1.ConditionTrue)
}

// An overlay's capacity adds an extended resource the catalog's types lack: a pod requesting
// it gets a node of the overlaid type, whose NodeClaim says so. (The simulated kubelet
// advertises the overlay's capacity, as a device plugin would register it; so the pod runs.)
func TestNodeOverlayCapacityMakesATypeFit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	widget := corev1.ResourceName("example.com/widget")
	np := isolated(t, ctx, nil, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
	})
	create(t, ctx, overlayFor("e2e-widget-"+np.Name, np.Name, "m5.xlarge", func(s *karpv1alpha1.NodeOverlaySpec) {
		s.Capacity = corev1.ResourceList{widget: resource.MustParse("2")}
	}))
	overlayCondition(t, ctx, "e2e-widget-"+np.Name, metav1.ConditionTrue)
	create(t, ctx, deployment("widget", 1, np.Name, "500m", func(s *corev1.PodSpec) {
		s.Containers[0].Resources.Requests[widget] = resource.MustParse("1")
		s.Containers[0].Resources.Limits = corev1.ResourceList{widget: resource.MustParse("1")}
	}))
	node := nodeOf(t, ctx, runningPods(t, ctx, "widget", 1)[0])
	if it := node.Labels[corev1.LabelInstanceTypeStable]; it != "m5.xlarge" {
		t.Errorf("only the overlaid m5.xlarge has the widget, got %s", it)
	}
	if q := node.Status.Capacity[widget]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("node %s advertises %s widgets, want the overlay's 2", node.Name, q.String())
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if nc.Annotations[karpv1alpha1.CapacityOverlayAppliedAnnotationKey] != "true" {
			t.Errorf("NodeClaim %s lacks %s=true: %v", nc.Name, karpv1alpha1.CapacityOverlayAppliedAnnotationKey, nc.Annotations)
		}
	}
}
