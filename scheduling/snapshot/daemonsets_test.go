package snapshot

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func daemonSet(ns, name string, limits corev1.ResourceList) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "c", Resources: corev1.ResourceRequirements{Limits: limits}}}}}}}
}

// The snapshot's DaemonSet pods request what the API server would admit: limits as requests,
// the namespace's LimitRange defaults, and what the DaemonSet's newest pod shows beyond that.
func TestSnapshotDaemonSetsAsAdmitted(t *testing.T) {
	limitsOnly := daemonSet("kube-system", "limits", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	defaulted := daemonSet("logging", "defaulted", nil)
	injected := daemonSet("kube-system", "injected", nil)
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 1, 12, 0, s, 0, time.UTC)) }
	pod := func(name string, created metav1.Time, cpu string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, CreationTimestamp: created,
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "injected", UID: injected.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	objs := &Objects{
		DaemonSets: []*appsv1.DaemonSet{limitsOnly, defaulted, injected},
		LimitRanges: []*corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Namespace: "logging", Name: "defaults"},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
				Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("750m")}}}}}},
		Pods: []*corev1.Pod{pod("old", at(0), "900m"), pod("new", at(5), "300m")},
	}
	snap := Build(objs, Env{})
	want := []int64{1000, 750, 300}
	for i, ds := range snap.DaemonSets {
		if got := ds.Requests.Cpu().MilliValue(); got != want[i] {
			t.Errorf("DaemonSet %s: %dm cpu, want %dm", objs.DaemonSets[i].Name, got, want[i])
		}
	}
	if objs.DaemonSets[0].Spec.Template.Spec.Containers[0].Resources.Requests != nil {
		t.Error("the DaemonSet was modified")
	}
}

// A preemption from a node Karpenter launched lately, which cannot hold the pod beside its
// DaemonSet pods, says the node was too small; from an older node, or one with room, not.
func TestPreemptedMisfits(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}}}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))}, Status: karpv1.NodeClaimStatus{NodeName: "n"}}
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "a", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	web := func(cpu string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	snap := Build(&Objects{Nodes: []*corev1.Node{n}, NodeClaims: []*karpv1.NodeClaim{nc}, Pods: []*corev1.Pod{agent}}, Env{Now: now})
	if !snap.Preempted(web("1"), "n") {
		t.Error("1 cpu does not fit beside the 1.5 cpu agent on a 2 cpu node launched a minute ago")
	}
	if snap.Preempted(web("400m"), "n") {
		t.Error("400m fits beside the agent")
	}
	if snap.Preempted(web("1"), "gone") {
		t.Error("a node that is gone tells nothing")
	}
	old := Build(&Objects{Nodes: []*corev1.Node{n}, NodeClaims: []*karpv1.NodeClaim{nc}, Pods: []*corev1.Pod{agent}}, Env{Now: now.Add(RecentLaunch + time.Minute)})
	if old.Preempted(web("1"), "n") {
		t.Error("a node launched long ago is not the provisioner's doing")
	}
}
