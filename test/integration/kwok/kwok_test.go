// Package kwok_test runs the kwok cloud provider against a real API server.
package kwok_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/providers/kwok"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/env"
)

var testEnv *env.Environment

func TestMain(m *testing.M) { os.Exit(env.Run(m, &testEnv)) }

func nodeClaim(nodeClass string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	return test.NodeClaim(func(nc *karpv1.NodeClaim) {
		nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "general"}
		nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: nodeClass}
		nc.Spec.Requirements = reqs
		nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	})
}

func in(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func TestCreateGetListDelete(t *testing.T) {
	ctx := context.Background()
	class := test.KWOKNodeClass()
	if err := testEnv.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	p := kwok.New(testEnv.Client, clock.RealClock{}, 1)
	claim := nodeClaim(class.Name, in(karpv1.LabelInstanceType, "m6g.large", "m5.large", "c6g.xlarge"), in(karpv1.CapacityTypeLabelKey, "on-demand"))
	launched, err := p.Create(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if launched.Labels[karpv1.LabelInstanceType] != "m6g.large" || launched.Labels[karpv1.CapacityTypeLabelKey] != "on-demand" {
		t.Fatalf("want the cheapest allowed offering (m6g.large on-demand), got %v", launched.Labels)
	}
	node := &corev1.Node{}
	if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: claim.Name}, node); err != nil {
		t.Fatal(err)
	}
	if node.Spec.ProviderID != "kwok://"+claim.Name || launched.Status.ProviderID != node.Spec.ProviderID {
		t.Errorf("provider ID: node %q, claim %q", node.Spec.ProviderID, launched.Status.ProviderID)
	}
	if node.Annotations[kwok.NodeAnnotation] != "fake" || node.Labels[karpv1.NodePoolLabelKey] != "general" || node.Labels[karpv1.LabelTopologyZone] == "" {
		t.Errorf("node labels or annotations missing: %v %v", node.Labels, node.Annotations)
	}
	if node.Status.Allocatable.Cpu().MilliValue() != 1930 {
		t.Errorf("allocatable cpu = %s", node.Status.Allocatable.Cpu())
	}
	if len(node.Spec.Taints) == 0 || node.Spec.Taints[0].Key != karpv1.UnregisteredTaintKey {
		t.Errorf("a new node carries the unregistered taint until it registers: %v", node.Spec.Taints)
	}
	got, err := p.Get(ctx, launched.Status.ProviderID)
	if err != nil || got.Status.NodeName != claim.Name {
		t.Fatalf("get: %v %+v", err, got)
	}
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v, %d", err, len(list))
	}
	if drift, err := p.IsDrifted(ctx, launched); err != nil || drift != "" {
		t.Errorf("not drifted yet: %q %v", drift, err)
	}
	class.Spec.Zones = []string{"us-east-1b"}
	if err := testEnv.Client.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	if drift, _ := p.IsDrifted(ctx, launched); drift != "NodeClassDrift" {
		t.Errorf("changing the node class's zones drifts its nodes, got %q", drift)
	}
	if err := p.Delete(ctx, launched); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, launched); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("deleting twice must say the node claim is gone, got %v", err)
	}
	if _, err := p.Get(ctx, launched.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("get after delete: %v", err)
	}
}

func TestInsufficientCapacityMovesToTheNextOffering(t *testing.T) {
	ctx := context.Background()
	class := test.KWOKNodeClass(func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.InsufficientCapacity = &kwokv1alpha1.InsufficientCapacityInjection{Percent: 100,
			Offerings: []kwokv1alpha1.OfferingSelector{{InstanceType: "m6g.large", CapacityType: "on-demand"}}}
	})
	if err := testEnv.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clk := &fakeClock{now: now}
	p := kwok.New(testEnv.Client, clk, 1)
	claim := nodeClaim(class.Name, in(karpv1.LabelInstanceType, "m6g.large", "m5.large"), in(karpv1.CapacityTypeLabelKey, "on-demand"))
	launched, err := p.Create(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if got := launched.Labels[karpv1.LabelInstanceType]; got != "m5.large" {
		t.Fatalf("every m6g.large on-demand offering fails: want m5.large, got %s", got)
	}
	np := test.NodePool(func(np *karpv1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = class.Name })
	types, err := p.GetInstanceTypes(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Name != "m6g.large" {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == "on-demand" && o.Available {
				t.Errorf("m6g.large on-demand in %s must be unavailable for 3 minutes", o.Zone)
			}
		}
	}
	// Only the m6g.large on-demand offerings fail: with no other type allowed, capacity runs out.
	only := nodeClaim(class.Name, in(karpv1.LabelInstanceType, "m6g.large"), in(karpv1.CapacityTypeLabelKey, "on-demand"))
	if _, err := p.Create(ctx, only); !cloudprovider.IsInsufficientCapacityError(err) {
		t.Fatalf("want an insufficient capacity error, got %v", err)
	}
	clk.now = now.Add(kwok.UnavailableFor + time.Second)
	types, _ = p.GetInstanceTypes(ctx, np)
	for _, it := range types {
		if it.Name == "m6g.large" {
			for _, o := range it.Offerings {
				if !o.Available {
					t.Errorf("after 3 minutes the offering is available again: %+v", o)
				}
			}
		}
	}
}

func TestUnknownNodeClass(t *testing.T) {
	p := kwok.New(testEnv.Client, clock.RealClock{}, 1)
	if _, err := p.Create(context.Background(), nodeClaim("missing")); !cloudprovider.IsNodeClassNotReadyError(err) {
		t.Fatalf("want NodeClassNotReady, got %v", err)
	}
}

type fakeClock struct {
	clock.RealClock
	now time.Time
}

func (f *fakeClock) Now() time.Time { return f.now }

// Spot interruptions: a node annotated to be interrupted gets a notice at once, at the class's
// rate every Spot node does, on-demand nodes never do, and the instance is reclaimed (the
// Node deleted) when the notice runs out.
func TestSpotInterruptionInjection(t *testing.T) {
	ctx := context.Background()
	class := test.KWOKNodeClass(func(nc *kwokv1alpha1.KWOKNodeClass) {
		nc.Spec.Interruption = &kwokv1alpha1.InterruptionInjection{SpotPercentPerHour: 0, Notice: &metav1.Duration{Duration: 30 * time.Second}}
	})
	if err := testEnv.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	clk := &fakeClock{now: now}
	p := kwok.New(testEnv.Client, clk, 1)
	recorder := events.NewFakeRecorder(10)
	launch := func(ct string) *corev1.Node {
		claim, err := p.Create(ctx, nodeClaim(class.Name, in(karpv1.LabelInstanceType, "m5.large"), in(karpv1.CapacityTypeLabelKey, ct)))
		if err != nil {
			t.Fatal(err)
		}
		n := &corev1.Node{}
		if err := testEnv.Client.Get(ctx, client.ObjectKey{Name: claim.Name}, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	get := func(n *corev1.Node) (*corev1.Node, bool) {
		out := &corev1.Node{}
		err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(n), out)
		return out, err == nil
	}
	spot, onDemand := launch("spot"), launch("on-demand")
	i := p.Interrupter(recorder)
	if err := i.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := get(spot); n.Annotations[kwok.InterruptionDeadlineAnnotation] != "" {
		t.Fatal("a rate of 0 interrupts nothing")
	}
	// Interrupt it now.
	base := spot.DeepCopy()
	spot.Annotations[kwok.InterruptAnnotation] = "true"
	if err := testEnv.Client.Patch(ctx, spot, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := i.Step(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := get(spot)
	if want := now.Add(30 * time.Second).UTC().Format(time.RFC3339); n.Annotations[kwok.InterruptionDeadlineAnnotation] != want {
		t.Fatalf("deadline %q, want %q", n.Annotations[kwok.InterruptionDeadlineAnnotation], want)
	}
	if ev := <-recorder.Events; !strings.Contains(ev, "SpotInterruption") {
		t.Errorf("event %q", ev)
	}
	clk.now = now.Add(31 * time.Second)
	if err := i.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if _, exists := get(spot); exists {
		t.Error("the instance must be reclaimed when the notice runs out")
	}
	// At 100% an hour, a step of an hour interrupts every Spot node and no on-demand one.
	class.Spec.Interruption.SpotPercentPerHour = 100
	if err := testEnv.Client.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	spot2 := launch("spot")
	if err := i.WithTick(time.Hour).Step(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := get(spot2); n.Annotations[kwok.InterruptionDeadlineAnnotation] == "" {
		t.Error("100% an hour over an hour interrupts the Spot node")
	}
	if n, _ := get(onDemand); n.Annotations[kwok.InterruptionDeadlineAnnotation] != "" {
		t.Error("on-demand nodes are never interrupted")
	}
}
