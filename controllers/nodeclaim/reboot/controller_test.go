package reboot

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	cloudfake "github.com/karpenter-policy/karpenter/cloudprovider/fake"
	"github.com/karpenter-policy/karpenter/controllers/eviction"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/metrics/metricstest"
)

var start = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	c     client.Client
	cloud *cloudfake.Provider
	clock *clocktesting.FakeClock
	queue *eviction.Queue
	ctl   *Controller
}

// rebooting is a NodeClaim whose reboot was requested at start, drained within drain ("":
// the default), and its Ready, initialized node with boot ID "boot-1".
func newEnv(t *testing.T, drain string, objs ...client.Object) *env {
	t.Helper()
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", UID: "uid-claim", Finalizers: []string{karpv1.TerminationFinalizer}},
		Status: karpv1.NodeClaimStatus{ProviderID: "fake://claim", NodeName: "node", Conditions: []metav1.Condition{
			{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(start.Add(-time.Hour))},
			{Type: karpv1.ConditionTypeRebooting, Status: metav1.ConditionTrue, Reason: karpv1.RebootReasonRequested, LastTransitionTime: metav1.NewTime(start)}}}}
	if drain != "" {
		nc.Annotations = map[string]string{karpv1.RebootTerminationGracePeriodAnnotationKey: drain}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: map[string]string{karpv1.NodeInitializedLabelKey: "true"}},
		Spec:   corev1.NodeSpec{ProviderID: "fake://claim"},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1"}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	b := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(append([]client.Object{nc, node}, objs...)...).
		WithStatusSubresource(&karpv1.NodeClaim{}, &corev1.Node{})
	for _, i := range index.Indexes {
		b = b.WithIndex(i.Object, i.Field, i.Extract)
	}
	e := &env{t: t, c: b.Build(), cloud: cloudfake.New(), clock: clocktesting.NewFakeClock(start)}
	rec := events.NewFakeRecorder(100)
	e.queue = eviction.NewQueue(e.c, rec, e.clock)
	e.ctl = NewController(e.c, e.cloud, e.queue, rec, e.clock)
	return e
}

func (e *env) reconcile() time.Duration {
	e.t.Helper()
	nc := e.claim()
	if nc == nil {
		e.t.Fatal("the NodeClaim is gone")
	}
	res, err := e.ctl.Reconcile(context.Background(), nc)
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return res.RequeueAfter
}

func (e *env) claim() *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: "claim"}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		e.t.Fatal(err)
	}
	return nc
}

func (e *env) node() *corev1.Node {
	n := &corev1.Node{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: "node"}, n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) setNode(mut func(*corev1.Node)) {
	n := e.node()
	mut(n)
	if err := e.c.Status().Update(context.Background(), n); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) rebooting() *metav1.Condition {
	return meta.FindStatusCondition(e.claim().Status.Conditions, karpv1.ConditionTypeRebooting)
}

func fenced(n *corev1.Node) bool { return hasTaint(n) }

// A reboot's happy path: fenced, drained for at least MinDrain, the boot ID recorded and the
// reboot issued once; the node is uninitialized until it comes back with a new boot and
// Ready, then the fence goes and the reboot ends RebootSucceeded.
func TestRebootInPlace(t *testing.T) {
	e := newEnv(t, "")
	if wait := e.reconcile(); wait <= 0 || !fenced(e.node()) || len(e.cloud.Reboots) != 0 {
		t.Fatalf("within MinDrain: wait %s, fenced %v, reboots %v; want a wait, the fence, no reboot", wait, fenced(e.node()), e.cloud.Reboots)
	}
	e.clock.Step(MinDrain)
	e.reconcile()
	if len(e.cloud.Reboots) != 1 || e.rebooting().Reason != karpv1.RebootReasonIssued {
		t.Fatalf("reboots %v, phase %s; want one reboot issued", e.cloud.Reboots, e.rebooting().Reason)
	}
	if e.claim().Annotations[karpv1.RebootPreBootIDAnnotationKey] != "boot-1" {
		t.Errorf("pre-boot ID %q", e.claim().Annotations[karpv1.RebootPreBootIDAnnotationKey])
	}
	if init := meta.FindStatusCondition(e.claim().Status.Conditions, karpv1.ConditionTypeInitialized); init.Status != metav1.ConditionUnknown ||
		e.node().Labels[karpv1.NodeInitializedLabelKey] != "" {
		t.Errorf("Initialized %s, label %q: the node of the old boot is no longer initialized", init.Status, e.node().Labels[karpv1.NodeInitializedLabelKey])
	}
	// The old boot still answering: nothing changes, nothing is issued again.
	e.reconcile()
	if len(e.cloud.Reboots) != 1 || !fenced(e.node()) || e.rebooting().Status != metav1.ConditionTrue {
		t.Fatalf("reboots %v, fenced %v", e.cloud.Reboots, fenced(e.node()))
	}
	// A new boot, not Ready yet: the fence goes, the reboot is not over.
	e.setNode(func(n *corev1.Node) {
		n.Status.NodeInfo.BootID = "boot-2"
		n.Status.Conditions[0].Status = corev1.ConditionFalse
	})
	e.reconcile()
	if fenced(e.node()) || e.rebooting().Status != metav1.ConditionTrue {
		t.Fatalf("fenced %v, Rebooting %s: want the fence gone, the reboot on", fenced(e.node()), e.rebooting().Status)
	}
	e.setNode(func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionTrue })
	count, sum := metricstest.Observations(t, metrics.NodeRebootDuration, map[string]string{"result": "succeeded"})
	rcount, rsum := metricstest.Observations(t, metrics.NodeRebootRecoveryDuration, nil)
	e.clock.Step(30 * time.Second)
	e.reconcile()
	if c := e.rebooting(); c.Status != metav1.ConditionFalse || c.Reason != karpv1.RebootReasonSucceeded {
		t.Fatalf("Rebooting %s/%s, want False/RebootSucceeded", c.Status, c.Reason)
	}
	// Requested MinDrain before the issue, back 30 s after it.
	if c, s := metricstest.Observations(t, metrics.NodeRebootDuration, map[string]string{"result": "succeeded"}); c != count+1 || s-sum != (MinDrain+30*time.Second).Seconds() {
		t.Errorf("reboot duration: %d more observed, of %vs; want 1 of %vs", c-count, s-sum, (MinDrain + 30*time.Second).Seconds())
	}
	if c, s := metricstest.Observations(t, metrics.NodeRebootRecoveryDuration, nil); c != rcount+1 || s-rsum != 30 {
		t.Errorf("recovery duration: %d more observed, of %vs; want 1 of 30s", c-rcount, s-rsum)
	}
	if _, ok := e.claim().Annotations[karpv1.RebootPreBootIDAnnotationKey]; ok {
		t.Error("the pre-boot ID stays after the reboot")
	}
	if len(e.cloud.Reboots) != 1 {
		t.Errorf("reboots %v, want one", e.cloud.Reboots)
	}
}

// A manager that restarts after recording the boot ID and finds a new boot does not reboot
// again; one that finds the old boot asks again with the same operation ID.
func TestRebootAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name        string
		boot        string
		wantReboots int
	}{
		{name: "rebooted already", boot: "boot-2", wantReboots: 0},
		{name: "not yet", boot: "boot-1", wantReboots: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "")
			nc := e.claim()
			nc.Annotations = map[string]string{karpv1.RebootPreBootIDAnnotationKey: "boot-1"}
			if err := e.c.Update(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			e.setNode(func(n *corev1.Node) { n.Status.NodeInfo.BootID = tc.boot })
			e.reconcile()
			if len(e.cloud.Reboots) != tc.wantReboots || e.rebooting().Reason != karpv1.RebootReasonIssued {
				t.Fatalf("reboots %v, phase %s; want %d reboots, Issued", e.cloud.Reboots, e.rebooting().Reason, tc.wantReboots)
			}
			if tc.wantReboots == 1 && e.cloud.Reboots[0] != OperationID(e.claim()) {
				t.Errorf("operation ID %s, want %s", e.cloud.Reboots[0], OperationID(e.claim()))
			}
		})
	}
}

// The drain evicts the node's pods; pods still there when its bound runs out stay through the
// reboot (taken off the eviction queue); a bound of 0 reboots at once.
func TestRebootDrain(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web",
		Annotations: map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}},
		Spec: corev1.PodSpec{NodeName: "node"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	e := newEnv(t, "1m", pod)
	e.reconcile()
	if e.queue.Len() != 1 || len(e.cloud.Reboots) != 0 {
		t.Fatalf("queued %d, reboots %v: want the pod queued, no reboot", e.queue.Len(), e.cloud.Reboots)
	}
	e.clock.Step(30 * time.Second)
	e.reconcile()
	if len(e.cloud.Reboots) != 0 {
		t.Fatal("rebooted within the drain's bound with a pod left")
	}
	e.clock.Step(31 * time.Second)
	e.reconcile()
	if len(e.cloud.Reboots) != 1 || e.queue.Len() != 0 {
		t.Fatalf("reboots %v, queued %d: want the reboot, the pod forgotten", e.cloud.Reboots, e.queue.Len())
	}

	e = newEnv(t, "0s", pod.DeepCopy())
	e.reconcile()
	if len(e.cloud.Reboots) != 1 || e.queue.Len() != 0 {
		t.Fatalf("forceful: reboots %v, queued %d; want a reboot at once, nothing evicted", e.cloud.Reboots, e.queue.Len())
	}
}

// A reboot the provider refuses, or a node that does not come back in time, fails the reboot:
// the fence goes and the NodeClaim is deleted so that the node is replaced. A provider error
// that may pass is retried.
func TestRebootFails(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		e := newEnv(t, "0s")
		e.cloud.RebootErr = &cloudprovider.RebootRefusedError{Err: errors.New("no such instance")}
		e.reconcile()
		assertFailed(t, e)
	})
	t.Run("transient", func(t *testing.T) {
		e := newEnv(t, "0s")
		e.cloud.RebootErr = errors.New("throttled")
		if _, err := e.ctl.Reconcile(context.Background(), e.claim()); err == nil {
			t.Fatal("a transient error is not retried")
		}
		if c := e.rebooting(); c.Status != metav1.ConditionTrue || c.Reason != karpv1.RebootReasonRequested {
			t.Fatalf("Rebooting %s/%s after a transient error", c.Status, c.Reason)
		}
		e.clock.Step(IssueTimeout + MinDrain + time.Second)
		e.reconcile()
		assertFailed(t, e)
	})
	t.Run("not back in time", func(t *testing.T) {
		e := newEnv(t, "0s")
		e.reconcile()
		e.clock.Step(RecoveryTimeout - time.Second)
		e.reconcile()
		if c := e.rebooting(); c.Status != metav1.ConditionTrue {
			t.Fatalf("failed before the recovery timeout: %s", c.Reason)
		}
		count, sum := metricstest.Observations(t, metrics.NodeRebootDuration, map[string]string{"result": "recovery_timeout"})
		e.clock.Step(2 * time.Second)
		e.reconcile()
		assertFailed(t, e)
		// Issued at the request (nothing to drain), over RecoveryTimeout and a second later.
		if c, s := metricstest.Observations(t, metrics.NodeRebootDuration, map[string]string{"result": "recovery_timeout"}); c != count+1 || s-sum != (RecoveryTimeout+time.Second).Seconds() {
			t.Errorf("reboot duration: %d more recovery_timeout observed, of %vs; want 1 of %vs", c-count, s-sum, (RecoveryTimeout + time.Second).Seconds())
		}
	})
}

func assertFailed(t *testing.T, e *env) {
	t.Helper()
	nc := e.claim()
	c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting)
	if c.Status != metav1.ConditionFalse || c.Reason != karpv1.RebootReasonFailed {
		t.Fatalf("Rebooting %s/%s, want False/RebootFailed", c.Status, c.Reason)
	}
	if nc.DeletionTimestamp == nil {
		t.Error("the NodeClaim of a failed reboot is not deleted")
	}
	if fenced(e.node()) {
		t.Error("the fence stays after a failed reboot")
	}
}
