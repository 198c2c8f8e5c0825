package state

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A nomination holds only while the node can attach the pod's volume too: a node whose CSINode
// allows two volumes of the driver holds two of three pods nominated to it, and the third is
// solved again once its grace is over.
func TestNominationsHoldWithinAttachLimits(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	a, aClaim := node("a", clk.Now().Add(-time.Minute))
	a.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("16")
	objs := []client.Object{a, aClaim, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: "ebs.csi.aws.com", NodeID: "a", Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](2)}}}}}}
	var pods []*corev1.Pod
	for i := range 3 {
		name := fmt.Sprintf("db-%d", i)
		p := pendingPod(name)
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}
		objs = append(objs, p,
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data-" + name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name}},
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + name}}}})
		pods = append(pods, p)
	}
	c := newCluster(clk, objs...)
	for _, p := range pods {
		c.Nominations().Nominate(p, "a")
	}
	snap, pending := snapshotPending(t, c)
	if len(pending) != 1 || !pending["db-2"] {
		t.Fatalf("a attaches two volumes: want db-2 solved again, got pending %v (displaced %d)", pending, snap.Displaced)
	}
	for _, n := range snap.Nodes {
		if n.Name == "a" && n.VolumeLimits["ebs.csi.aws.com"] != 2 {
			t.Errorf("the node carries its CSINode's limit: %v", n.VolumeLimits)
		}
	}
}
