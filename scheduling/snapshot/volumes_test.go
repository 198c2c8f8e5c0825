package snapshot

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const zoneKey = "topology.kubernetes.io/zone"

func claimPod(name string, phase corev1.PodPhase, node string, vols ...corev1.Volume) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name}, Spec: corev1.PodSpec{NodeName: node, Volumes: vols,
		Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: phase}}
	if node == "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	}
	return p
}

func claimVolume(claim string) corev1.Volume {
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func pvc(name, volume string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: class}}
}

func zonalPV(name, zone string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
		Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"ignored"}}}}}}}}}
}

func class(name string, mode storagev1.VolumeBindingMode, zones ...string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, VolumeBindingMode: &mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: zoneKey, Values: zones}}}}
	}
	return sc
}

// What pods' claims require of their node, for every rule: a case that constrains, one that
// does not, and the missing objects that leave a pod pending with a reason.
func TestVolumeRequirements(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	def := class("standard", wffc, "zone-c")
	def.Annotations = map[string]string{DefaultStorageClassAnnotation: "true"}
	ephemeral := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("zonal")}}}}}
	objs := &Objects{
		PersistentVolumes: []*corev1.PersistentVolume{zonalPV("pv-a", "zone-a"), {ObjectMeta: metav1.ObjectMeta{Name: "pv-anywhere"}}},
		PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{
			pvc("bound", "pv-a", nil), pvc("bound-anywhere", "pv-anywhere", nil), pvc("wffc", "", ptr.To("zonal")),
			pvc("unconstrained", "", ptr.To("everywhere")), pvc("default", "", nil), pvc("static", "", ptr.To("")),
			pvc("no-class", "", ptr.To("missing")), pvc("lost", "pv-gone", nil)},
		StorageClasses: []*storagev1.StorageClass{class("zonal", wffc, "zone-b"), class("everywhere", storagev1.VolumeBindingImmediate), def},
		Pods: []*corev1.Pod{
			claimPod("bound", corev1.PodPending, "", claimVolume("bound")),
			claimPod("bound-anywhere", corev1.PodPending, "", claimVolume("bound-anywhere")),
			claimPod("wffc", corev1.PodPending, "", claimVolume("wffc")),
			claimPod("unconstrained", corev1.PodPending, "", claimVolume("unconstrained")),
			claimPod("default", corev1.PodPending, "", claimVolume("default")),
			claimPod("static", corev1.PodPending, "", claimVolume("static")),
			claimPod("ephemeral", corev1.PodPending, "", ephemeral),
			claimPod("no-claim", corev1.PodPending, "", claimVolume("missing")),
			claimPod("no-class", corev1.PodPending, "", claimVolume("no-class")),
			claimPod("no-pv", corev1.PodPending, "", claimVolume("lost")),
			claimPod("running", corev1.PodRunning, "n1", claimVolume("bound")),
		},
	}
	snap := Build(objs, Env{})
	want := map[string]string{"db/bound": "zone-a", "db/wffc": "zone-b", "db/default": "zone-c", "db/ephemeral": "zone-b", "db/running": "zone-a"}
	for key, zone := range want {
		reqs := snap.VolumeRequirements[key]
		if len(reqs) != 1 || reqs[0].Key != zoneKey || len(reqs[0].Values) != 1 || reqs[0].Values[0] != zone {
			t.Errorf("%s: want %s In [%s] (the first term only), got %v", key, zoneKey, zone, reqs)
		}
	}
	for _, key := range []string{"db/bound-anywhere", "db/unconstrained", "db/static"} {
		if reqs, ok := snap.VolumeRequirements[key]; ok {
			t.Errorf("%s: its volume goes anywhere, got %v", key, reqs)
		}
	}
	unresolved := map[string]string{}
	for _, u := range snap.Unresolved {
		unresolved[u.Pod.Name] = u.Reason
	}
	for name, reason := range map[string]string{"no-claim": "persistentvolumeclaim db/missing not found",
		"no-class": "storageclass missing of claim db/no-class not found", "no-pv": "persistentvolume pv-gone of claim db/lost not found"} {
		if !strings.Contains(unresolved[name], reason) {
			t.Errorf("%s: want %q, got %q", name, reason, unresolved[name])
		}
	}
	if len(snap.Unresolved) != 3 {
		t.Errorf("three pods wait for a missing object, got %v", unresolved)
	}
	for _, p := range snap.Pods {
		if _, ok := unresolved[p.Name]; ok {
			t.Errorf("%s waits for a missing object and is not solved", p.Name)
		}
	}
	if len(snap.Pods) != 7 {
		t.Errorf("seven pending pods are solved, got %d", len(snap.Pods))
	}
}
