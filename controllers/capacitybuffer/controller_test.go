package capacitybuffer

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/scheduling"
)

func template(cpu string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

func buffer(name string, spec autoscalingv1beta1.CapacityBufferSpec) *autoscalingv1beta1.CapacityBuffer {
	return &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID("uid-" + name)}, Spec: spec}
}

// Each buffer resolves to its chunk count and virtual pods, or says why not in
// ReadyForProvisioning; the provisioner's placements become its Provisioning condition.
func TestReconcile(t *testing.T) {
	objs := []client.Object{
		&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: "team", Generation: 4}, Template: template("500m")},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](10), Template: template("1")}},
		buffer("by-template", autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "chunk"}, Replicas: ptr.To[int32](3)}),
		buffer("by-limits", autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "chunk"},
			Limits: autoscalingv1beta1.Limits{corev1.ResourceCPU: resource.MustParse("2")}}),
		buffer("by-percentage", autoscalingv1beta1.CapacityBufferSpec{ScalableRef: &autoscalingv1beta1.ScalableRef{Kind: "Deployment", Name: "web"}, Percentage: ptr.To[int32](25)}),
		buffer("missing", autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "nope"}, Replicas: ptr.To[int32](1)}),
		buffer("daemonset", autoscalingv1beta1.CapacityBufferSpec{ScalableRef: &autoscalingv1beta1.ScalableRef{Kind: "DaemonSet", Name: "web"}}),
	}
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(objs...).WithStatusSubresource(&autoscalingv1beta1.CapacityBuffer{}).Build()
	store := NewStore()
	triggered := 0
	c := NewController(kube, store, func() { triggered++ })
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		replicas int32
		reason   string
	}{
		{"by-template", 3, ReasonResolved},
		{"by-limits", 4, ReasonResolved},
		{"by-percentage", 3, ReasonResolved},
		{"missing", 0, ReasonPodTemplateNotFound},
		{"daemonset", 0, ReasonResolutionFailed},
	} {
		key := types.NamespacedName{Namespace: "team", Name: tc.name}
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cb := &autoscalingv1beta1.CapacityBuffer{}
		if err := kube.Get(ctx, key, cb); err != nil {
			t.Fatal(err)
		}
		ready := meta.FindStatusCondition(cb.Status.Conditions, autoscalingv1beta1.ConditionReadyForProvisioning)
		if ready == nil || ready.Reason != tc.reason {
			t.Errorf("%s: ReadyForProvisioning %+v, want reason %s", tc.name, ready, tc.reason)
		}
		if tc.reason == ReasonResolved && (cb.Status.Replicas == nil || *cb.Status.Replicas != tc.replicas) {
			t.Errorf("%s: replicas %v, want %d", tc.name, cb.Status.Replicas, tc.replicas)
		}
		n := 0
		for _, p := range store.Pods() {
			if b, _ := scheduling.BufferOf(p); b == key {
				n++
			}
		}
		if n != int(tc.replicas) {
			t.Errorf("%s: %d virtual pods in the store, want %d", tc.name, n, tc.replicas)
		}
	}
	if cb := (&autoscalingv1beta1.CapacityBuffer{}); kube.Get(ctx, types.NamespacedName{Namespace: "team", Name: "by-template"}, cb) == nil &&
		(cb.Status.PodTemplateRef == nil || cb.Status.PodTemplateRef.Name != "chunk" || ptr.Deref(cb.Status.PodTemplateGeneration, 0) != 4) {
		t.Errorf("the PodTemplate resolved is not in status: %+v", cb.Status)
	}
	if triggered != 3 {
		t.Errorf("the provisioner was triggered %d times, want once per buffer with pods (3)", triggered)
	}

	// The provisioner placed by-template's pods: 1 on existing room, 2 on new NodeClaims.
	key := types.NamespacedName{Namespace: "team", Name: "by-template"}
	store.Placed(map[types.NamespacedName]scheduling.BufferPlacement{key: {Existing: 1, Launched: 2}})
	if len(store.changed) != 1 {
		t.Fatalf("a changed placement is queued for reconcile: %d", len(store.changed))
	}
	<-store.changed
	provisioned := func() *metav1.Condition {
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		cb := &autoscalingv1beta1.CapacityBuffer{}
		_ = kube.Get(ctx, key, cb)
		return meta.FindStatusCondition(cb.Status.Conditions, autoscalingv1beta1.ConditionProvisioning)
	}
	if p := provisioned(); p == nil || p.Status != metav1.ConditionFalse || p.Reason != ReasonRequiresNewCapacity {
		t.Errorf("launched for: %+v", p)
	}
	store.Placed(map[types.NamespacedName]scheduling.BufferPlacement{key: {Existing: 3}})
	if p := provisioned(); p == nil || p.Status != metav1.ConditionTrue || p.Reason != ReasonFitsExistingCapacity {
		t.Errorf("all on existing room: %+v", p)
	}
	// The same placement again changes nothing, and queues nothing.
	<-store.changed
	store.Placed(map[types.NamespacedName]scheduling.BufferPlacement{key: {Existing: 3}})
	if len(store.changed) != 0 {
		t.Error("an unchanged placement was queued")
	}

	// A deleted buffer leaves the store, and the provisioner is told.
	if err := kube.Delete(ctx, buffer("by-template", autoscalingv1beta1.CapacityBufferSpec{})); err != nil {
		t.Fatal(err)
	}
	before := triggered
	if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if triggered != before+1 || len(store.Pods()) != 7 {
		t.Errorf("after delete: triggered %d→%d, %d pods left (want 4+3)", before, triggered, len(store.Pods()))
	}
}
