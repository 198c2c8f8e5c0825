package termination

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func attachment(name, pv string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: "ebs.csi.aws.com", NodeName: "node", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)}}}
}

func volumesDetached(t *testing.T, w *world) *metav1.Condition {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := w.client.Get(context.Background(), client.ObjectKey{Name: "claim"}, nc); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeVolumesDetached)
}

// After the drain, the instance is not terminated while a drained pod's volume is still
// attached to the node; the attachment of a pod that stays (a DaemonSet pod tolerating the
// disrupted taint) does not hold it; once the attachment goes, termination goes on.
func TestTerminationAwaitsVolumeDetachment(t *testing.T) {
	agent := pod("agent", daemon, func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		p.Spec.Volumes = []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "agent-state"}}}}
	})
	agentClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent-state"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-agent"}}
	w := newWorld(t, interceptor.Funcs{}, deletingNode(true), claim(), agent, agentClaim, attachment("va-db", "pv-db"), attachment("va-agent", "pv-agent"))
	recorder := events.NewFakeRecorder(10)
	w.ctl.recorder = recorder
	w.cloud.Add(providerID)
	if res := w.reconcile(t); res.IsZero() {
		t.Fatal("the node waits for va-db")
	}
	if c := volumesDetached(t, w); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != "AwaitingVolumeDetachment" || c.Message != "Awaiting deletion of bound volumeattachments (va-db)" {
		t.Fatalf("VolumesDetached: %+v", c)
	}
	if _, err := w.cloud.Get(context.Background(), providerID); err != nil {
		t.Fatal("the instance is not terminated while a volume is attached")
	}
	if e := <-recorder.Events; e != "Normal AwaitingVolumeDetachment Awaiting deletion of bound volumeattachments (va-db)" {
		t.Errorf("event %q", e)
	}
	w.reconcile(t)
	if len(recorder.Events) != 0 {
		t.Error("the event is written once for the same attachments")
	}
	if err := w.client.Delete(context.Background(), attachment("va-db", "pv-db")); err != nil {
		t.Fatal(err)
	}
	w.reconcile(t)
	if c := volumesDetached(t, w); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("VolumesDetached once va-db went: %+v", c)
	}
	if _, err := w.cloud.Get(context.Background(), providerID); err == nil {
		t.Fatal("the instance is terminated once the volume detached")
	}
}

// With terminationGracePeriod elapsed, the wait ends: the instance goes with the volume still
// attached, and VolumesDetached says so.
func TestVolumeDetachmentWaitEndsAtTheDeadline(t *testing.T) {
	nc := claim(func(nc *karpv1.NodeClaim) {
		nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 30 * time.Second}
	})
	w := newWorld(t, interceptor.Funcs{}, deletingNode(true), nc, attachment("va-db", "pv-db"))
	w.cloud.Add(providerID)
	w.reconcile(t)
	if c := volumesDetached(t, w); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "TerminationGracePeriodElapsed" {
		t.Fatalf("VolumesDetached past the deadline: %+v", c)
	}
	if _, err := w.cloud.Get(context.Background(), providerID); err == nil {
		t.Fatal("past the deadline the instance is terminated")
	}
}

// A do-not-disrupt duration holds a pod's eviction until it runs out, counted from the pod's
// start; the queue comes back when it does, and then evicts.
func TestDoNotDisruptDurationHoldsTheEviction(t *testing.T) {
	ctx := context.Background()
	p := pod("batch", func(p *corev1.Pod) {
		p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "10m"}
		p.Status.StartTime = &metav1.Time{Time: now.Add(-5 * time.Minute)}
	})
	w := newWorld(t, interceptor.Funcs{}, p)
	q := w.ctl.queue
	q.Add(nil, p)
	res, err := q.Reconcile(ctx, p)
	if err != nil || res.IsZero() {
		t.Fatalf("held for 5 more minutes: %v %v", res, err)
	}
	if err := w.client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); err != nil {
		t.Fatal("not evicted while its duration runs")
	}
	w.clock.SetTime(now.Add(5*time.Minute + time.Second))
	if res, err := q.Reconcile(ctx, p); err != nil || !res.IsZero() {
		t.Fatalf("evicted once the duration ran out: %v %v", res, err)
	}
	if err := w.client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); err == nil {
		t.Fatal("the pod is evicted once its duration ran out")
	}
}

// The volume of a pod evicted and still terminating (here past its grace period, as a pod of
// grace 0 is at once) is going away: its attachment holds the node like any other.
func TestTerminatingPodsVolumesAreAwaited(t *testing.T) {
	db := pod("db", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		p.Finalizers = []string{"example.com/hold"}
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
	})
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-db"}}
	w := newWorld(t, interceptor.Funcs{}, deletingNode(true), claim(), db, pvc, attachment("va-db", "pv-db"))
	w.cloud.Add(providerID)
	if res := w.reconcile(t); res.IsZero() {
		t.Fatal("the node waits for the terminating pod's volume to detach")
	}
	if c := volumesDetached(t, w); c == nil || c.Reason != "AwaitingVolumeDetachment" {
		t.Fatalf("VolumesDetached: %+v", c)
	}
}
