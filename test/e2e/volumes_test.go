package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/providers/kwok"
)

const e2eDriver = "e2e.csi.example.com"

// volume is a CSI PersistentVolume reserved for one claim, in a zone when zone is set.
func volume(name, claim, class, zone string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName:       class,
		ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: claim},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: e2eDriver, VolumeHandle: name}},
	}}
	if zone != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}
	}
	return pv
}

func claim(name, class, volumeName string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(class), VolumeName: volumeName,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

func podWithClaim(name, pool, claimName string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0), NodeSelector: map[string]string{karpv1.NodePoolLabelKey: pool},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}}}
}

// provisionFor plays a CSI external provisioner for a StorageClass until the test ends: a
// claim of the class that kube-scheduler gave a node (the selected-node annotation) gets a
// volume in that node's zone. The volumes it made are deleted when the test ends.
func provisionFor(t *testing.T, class string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var made []*corev1.PersistentVolume
	t.Cleanup(func() {
		cancel()
		<-done
		for _, pv := range made {
			_ = kube.Delete(context.Background(), pv)
		}
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var claims corev1.PersistentVolumeClaimList
			if err := kube.List(ctx, &claims, client.InNamespace("default")); err == nil {
				for _, c := range claims.Items {
					node := c.Annotations["volume.kubernetes.io/selected-node"]
					if ptr.Deref(c.Spec.StorageClassName, "") != class || c.Spec.VolumeName != "" || node == "" {
						continue
					}
					n := &corev1.Node{}
					if err := kube.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
						continue
					}
					pv := volume("pvc-"+string(c.UID), c.Name, class, n.Labels[karpv1.LabelTopologyZone])
					if err := kube.Create(ctx, pv); err == nil {
						made = append(made, pv)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

// A pod whose claim is bound to a volume in one zone runs in that zone, with the NodePool
// allowing every zone; a claim of a WaitForFirstConsumer StorageClass with one allowed zone
// gets its node there; a pod whose claim does not exist stays pending, says why, and nothing
// is launched for it.
func TestVolumeTopology(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, nil)
	create(t, ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-one-zone"}, Provisioner: e2eDriver,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: karpv1.LabelTopologyZone, Values: []string{"us-east-1b"}}}}}})
	provisionFor(t, "e2e-one-zone")
	want := map[string]string{}
	for i, zone := range []string{"us-east-1c", "us-east-1b", "us-east-1c"} {
		name := fmt.Sprintf("pinned-%d", i)
		create(t, ctx, volume("e2e-"+name, "data-"+name, "", zone), claim("data-"+name, "", "e2e-"+name), podWithClaim(name, np.Name, "data-"+name))
		want[name] = zone
	}
	create(t, ctx, claim("data-wffc", "e2e-one-zone", ""), podWithClaim("wffc", np.Name, "data-wffc"))
	want["wffc"] = "us-east-1b"
	create(t, ctx, podWithClaim("no-claim", np.Name, "e2e-missing"))
	for name, zone := range want {
		p := runningPods(t, ctx, name, 1)[0]
		if got := nodeOf(t, ctx, p).Labels[karpv1.LabelTopologyZone]; got != zone {
			t.Errorf("%s's volume is in %s; it runs in %s", name, zone, got)
		}
	}
	// The pod without its claim stays pending, with an event naming the claim.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		var events eventsv1.EventList
		if err := kube.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "no-claim" && strings.Contains(e.Note, "persistentvolumeclaim default/e2e-missing not found") {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("no event names the missing claim: %v", err)
	}
	// It counts among the pods the provisioner ignores while it stays pending.
	ignored := regexp.MustCompile(`(?m)^karpenter_scheduler_ignored_pods_count ([0-9.e+]+)$`)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := httpGetBody(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		if err != nil {
			return false, nil
		}
		m := ignored.FindStringSubmatch(body)
		if m == nil {
			return false, nil
		}
		n, err := strconv.ParseFloat(m[1], 64)
		return err == nil && n >= 1, nil
	}); err != nil {
		t.Errorf("karpenter_scheduler_ignored_pods_count never counted the pod without its claim: %v", err)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) > len(want) {
		t.Errorf("%d NodeClaims for %d pods that can run: one was launched for the pod without its claim", len(claims.Items), len(want))
	}
}

// A StatefulSet of 12 pods with one claim each, on nodes whose CSINode lets them attach 4
// volumes of the driver: kube-scheduler binds at most 4 to a node, and the solver plans by the
// same limit once it knows it, so the pods all run, on at least 3 nodes.
func TestVolumeAttachLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	np := isolated(t, ctx, func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.CSIDrivers = []kwokv1alpha1.CSIDriver{{Name: e2eDriver, AllocatableCount: 4}}
	}, nil)
	labels := map[string]string{"app": "attach"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "attach", Namespace: "default"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](12), Selector: &metav1.LabelSelector{MatchLabels: labels}, PodManagementPolicy: appsv1.ParallelPodManagement,
		PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{*claim("data", "", "")},
		Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podWithClaim("attach", np.Name, "data").Spec},
	}}
	sts.Spec.Template.Spec.Volumes = nil // the claim template provides "data"
	sts.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	var objs []client.Object
	for i := range 12 {
		objs = append(objs, volume(fmt.Sprintf("e2e-attach-%d", i), fmt.Sprintf("data-attach-%d", i), "", ""))
	}
	create(t, ctx, append(objs, sts)...)
	perNode := map[string]int{}
	for _, p := range runningPods(t, ctx, "attach", 12) {
		perNode[p.Spec.NodeName]++
	}
	if len(perNode) < 3 {
		t.Errorf("12 volumes, 4 per node: want at least 3 nodes, got %v", perNode)
	}
	for n, c := range perNode {
		if c > 4 {
			t.Errorf("node %s runs %d pods with a volume each, over its limit of 4", n, c)
		}
	}
}

// A node whose drained pod's volume is still attached (its VolumeAttachment remains: the CSI
// driver has not detached it) is not deleted, and its instance is not terminated, until the
// attachment goes.
func TestTerminationWaitsForVolumeDetachment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	np := isolated(t, ctx, nil, nil)
	create(t, ctx, volume("e2e-detach", "data-detach", "", ""), claim("data-detach", "", "e2e-detach"), podWithClaim("detach", np.Name, "data-detach"))
	p := runningPods(t, ctx, "detach", 1)[0]
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "e2e-detach"}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: e2eDriver, NodeName: p.Spec.NodeName, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("e2e-detach")}}}
	create(t, ctx, va)
	// The manager's cache sees the attachment a moment later; the drain of a pod with no grace
	// period can be quicker than that.
	time.Sleep(2 * time.Second)
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil || len(claims.Items) != 1 {
		t.Fatalf("want the pod's one NodeClaim: %v %d", err, len(claims.Items))
	}
	nc := &claims.Items[0]
	if err := kube.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	// The pod is drained; the node waits for the attachment.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), cur); err != nil {
			return false, nil
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == karpv1.ConditionTypeVolumesDetached && c.Reason == "AwaitingVolumeDetachment" && strings.Contains(c.Message, "e2e-detach") {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the NodeClaim never said it awaits the volume's detachment: %v\n%s", err, linesAbout(local.LogTail("karpenter", 2000), p.Spec.NodeName))
	}
	time.Sleep(10 * time.Second)
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
		t.Fatalf("the node went with its volume attached: %v", err)
	}
	if _, ok := node.Annotations[kwok.InstanceTerminatedAnnotation]; ok {
		t.Fatal("the instance was terminated with the volume attached")
	}
	if err := kube.Delete(ctx, va); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &corev1.Node{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	}); err != nil {
		t.Fatalf("the node did not go once the volume detached: %v", err)
	}
}

// linesAbout are the log's lines that mention s.
func linesAbout(log, s string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
