package provisioning

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// Every pod of a scale-out is nominated, but Nominated events are written at most
// NominationEventsBurst at once and NominationEventsPerSecond after that.
func TestNominationEventsAreRateLimited(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	recorder := events.NewFakeRecorder(1000)
	p := NewProvisioner(nil, state.NewCluster(nil, clk), nil, recorder, clk, time.Second, 10*time.Second)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-abcde"}}
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprint(i))}}
	}
	for i := range 100 {
		p.nominate(pod(i), nc)
	}
	if got := len(recorder.Events); got != NominationEventsBurst {
		t.Fatalf("100 nominations at once wrote %d events, want the burst of %d", got, NominationEventsBurst)
	}
	if e := <-recorder.Events; e != "Normal Nominated Pod should schedule on NodeClaim general-abcde" {
		t.Errorf("event %q", e)
	}
	clk.Step(time.Second)
	for i := range 100 {
		p.nominate(pod(100+i), nc)
	}
	if got := len(recorder.Events); got != NominationEventsBurst-1+NominationEventsPerSecond {
		t.Fatalf("a second later %d more events, want %d", got-(NominationEventsBurst-1), NominationEventsPerSecond)
	}
}

// Pods displaced from their nominated nodes are solved again when their grace ends: the
// provisioner opens a batch then, once however many batches asked for it meanwhile.
func TestDisplacedPodsOpenABatchWhenTheirGraceEnds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	p := NewProvisioner(nil, state.NewCluster(nil, clk), nil, events.NewFakeRecorder(1), clk, time.Second, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.retryIn(ctx, 3*time.Second)
	p.retryIn(ctx, time.Second)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(2 * time.Second)
	time.Sleep(100 * time.Millisecond)
	select {
	case <-p.batcher.nudge:
		t.Fatal("a batch opened 2s in; the first retry asked for 3s, and the second waits on it")
	default:
	}
	clk.Step(time.Second)
	select {
	case <-p.batcher.nudge:
	case <-time.After(5 * time.Second):
		t.Fatal("no batch opened when the grace ended")
	}
	if p.retrying.Load() {
		t.Error("the retry is done; the next displaced pods may ask for another")
	}
}

// A NodePool whose requirements leave no instance type is warned about, as upstream's
// NoCompatibleInstanceTypes, at most once a minute; one that can launch is not.
func TestNoCompatibleInstanceTypesEvent(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	recorder := events.NewFakeRecorder(10)
	p := NewProvisioner(nil, state.NewCluster(nil, clk), nil, recorder, clk, time.Second, 10*time.Second)
	it := &cloudprovider.InstanceType{Name: "m5.large", Labels: map[string]string{karpv1.LabelInstanceType: "m5.large"},
		Offerings: cloudprovider.Offerings{{Zone: "z-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.1, Available: true}}}
	pool := func(name, want string) *snapshot.NodePool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{want}}}
		return &snapshot.NodePool{NodePool: np, InstanceTypes: []*cloudprovider.InstanceType{it}}
	}
	snap := &snapshot.Snapshot{NodePools: []*snapshot.NodePool{pool("gpu", "p5.48xlarge"), pool("general", "m5.large")}}
	p.noteIncompatiblePools(snap)
	p.noteIncompatiblePools(snap)
	if len(recorder.Events) != 1 {
		t.Fatalf("%d events, want one for the gpu pool", len(recorder.Events))
	}
	if e := <-recorder.Events; e != "Warning NoCompatibleInstanceTypes NodePool requirements filtered out all compatible available instance types" {
		t.Errorf("event %q", e)
	}
	clk.Step(IncompatibleEvery)
	p.noteIncompatiblePools(snap)
	if len(recorder.Events) != 1 {
		t.Fatalf("a minute later: %d events, want one", len(recorder.Events))
	}
}

// The provisioner's solve is told to the scheduler metrics as upstream's: the queue depth of
// its latest solve, at 0 once it ended, and no unfinished work left behind.
func TestSolveIsObserved(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	p := NewProvisioner(nil, state.NewCluster(nil, clk), nil, events.NewFakeRecorder(10), clk, time.Second, 10*time.Second)
	it := &cloudprovider.InstanceType{Name: "m5.large", Labels: map[string]string{karpv1.LabelInstanceType: "m5.large"},
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Offerings: cloudprovider.Offerings{{Zone: "z-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.1, Available: true}}}
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprint(i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}}})
	}
	snap := &snapshot.Snapshot{Pods: pods, NodePools: []*snapshot.NodePool{{NodePool: &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}},
		InstanceTypes: []*cloudprovider.InstanceType{it}}}}
	in, prepared, err := p.prepare(snap)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := p.solve(t.Context(), snap, in, prepared)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NodeClaims) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(res.NodeClaims))
	}
	if n := testutil.CollectAndCount(metrics.SchedulerQueueDepth); n != 1 {
		t.Fatalf("%d queue depth series, want the solve's only", n)
	}
	if got := testutil.ToFloat64(metrics.SchedulerQueueDepth); got != 0 {
		t.Errorf("queue depth %v once the solve ended, want 0", got)
	}
	if n := testutil.CollectAndCount(metrics.SchedulerUnfinishedWork); n != 0 {
		t.Errorf("%d unfinished work series after the solve ended, want 0", n)
	}

	// The batch's pods by effective zone: each batch replaces the last one's series.
	pods[2].Spec.NodeSelector = map[string]string{karpv1.LabelTopologyZone: "z-a"}
	if _, _, err := p.prepare(snap); err != nil {
		t.Fatal(err)
	}
	zone := func(z string) float64 {
		return testutil.ToFloat64(metrics.SchedulerPendingPodsByZone.WithLabelValues("provisioner", z))
	}
	if n := testutil.CollectAndCount(metrics.SchedulerPendingPodsByZone); n != 2 || zone("flexible") != 2 || zone("z-a") != 1 {
		t.Fatalf("%d effective zone series, flexible %v, z-a %v; want 2, 2 and 1", n, zone("flexible"), zone("z-a"))
	}
	snap.Pods = pods[:1]
	if _, _, err := p.prepare(snap); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(metrics.SchedulerPendingPodsByZone); n != 1 || zone("flexible") != 1 {
		t.Fatalf("the next batch: %d series, flexible %v; want 1 and 1", n, zone("flexible"))
	}
}
