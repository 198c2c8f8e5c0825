package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// objectRecorder records each event as "<Kind>/<name> <type> <reason> <message>", the kind
// taken from the object's Go type (the test objects carry no TypeMeta).
type objectRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *objectRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	kind := "?"
	switch regarding.(type) {
	case *corev1.Node:
		kind = "Node"
	case *karpv1.NodeClaim:
		kind = "NodeClaim"
	case *karpv1.NodePool:
		kind = "NodePool"
	case *corev1.Pod:
		kind = "Pod"
	}
	name := ""
	if m, err := meta.Accessor(regarding); err == nil {
		name = m.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s/%s %s %s %s", kind, name, eventtype, reason, fmt.Sprintf(note, args...)))
}

// take returns the events recorded since the last take.
func (r *objectRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

// A candidate's disruption events go on its NodeClaim and on its Node, as upstream's; a
// candidate without a NodeClaim still has its Node told.
func TestCandidateEventsGoOnTheNodeClaimAndTheNode(t *testing.T) {
	rec := &objectRecorder{}
	ctl := NewController(nil, nil, nil, rec, clocktesting.NewFakeClock(now), nil, methods.Options{})
	ctl.tell(&methods.Candidate{Node: &scheduling.Node{Name: "a"}, NodeClaim: &karpv1.NodeClaim{}}, corev1.EventTypeNormal, "DisruptionBlocked", "held by %s", "a PDB")
	ctl.tell(&methods.Candidate{Node: &scheduling.Node{Name: "b"}}, corev1.EventTypeNormal, "Unconsolidatable", "no cheaper replacement")
	got := rec.take()
	slices.Sort(got)
	want := []string{"Node/a Normal DisruptionBlocked held by a PDB", "Node/b Normal Unconsolidatable no cheaper replacement", "NodeClaim/ Normal DisruptionBlocked held by a PDB"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A repair that the pool's breaker holds back is told on each node's NodeClaim and Node, and
// once on the NodePool.
func TestRepairBlockedIsToldOnNodeClaimNodeAndOnceOnThePool(t *testing.T) {
	rec := &objectRecorder{}
	ctl := NewController(nil, nil, nil, rec, clocktesting.NewFakeClock(now), nil, methods.Options{})
	msg := "more than 20% of NodePool general's nodes are unhealthy"
	note := func(node string) methods.RepairNote {
		return methods.RepairNote{Node: node, NodePool: "general", NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: node}},
			Event: "NodeRepairBlocked", Message: msg}
	}
	ctl.noteRepair(&methods.Cluster{RepairNotes: []methods.RepairNote{note("a"), note("b")}})
	got := rec.take()
	slices.Sort(got)
	want := []string{"Node/a Warning NodeRepairBlocked " + msg, "Node/b Warning NodeRepairBlocked " + msg,
		"NodeClaim/a Warning NodeRepairBlocked " + msg, "NodeClaim/b Warning NodeRepairBlocked " + msg, "NodePool/general Warning NodeRepairBlocked " + msg}
	if !slices.Equal(got, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A candidate's pod whose eviction-cost annotation is not an int32 gets an InvalidDisruptionCost
// warning naming the annotation and the value, once per UnconsolidatableEvery; a good value,
// or a good disruption-cost over a bad pod-deletion-cost, gets none.
func TestInvalidEvictionCostIsToldOnThePod(t *testing.T) {
	rec := &objectRecorder{}
	clk := clocktesting.NewFakeClock(now)
	ctl := NewController(nil, nil, nil, rec, clk, nil, methods.Options{})
	pod := func(name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID(name), Annotations: annotations}}
	}
	snap := &methods.Cluster{Candidates: []*methods.Candidate{{Node: &scheduling.Node{Name: "a"}, Pods: []*corev1.Pod{
		pod("bad", map[string]string{karpv1.DisruptionCostAnnotationKey: "high"}),
		pod("good", map[string]string{karpv1.DisruptionCostAnnotationKey: "10"}),
		pod("hidden", map[string]string{karpv1.DisruptionCostAnnotationKey: "10", corev1.PodDeletionCost: "x"}),
		pod("range", map[string]string{corev1.PodDeletionCost: "4294967296"}),
	}}}}
	want := []string{
		`Pod/bad Warning InvalidDisruptionCost karpenter.sh/disruption-cost "high" is not an integer (an int32 is wanted): this pod's eviction cost counts it as unset`,
		`Pod/range Warning InvalidDisruptionCost controller.kubernetes.io/pod-deletion-cost "4294967296" is out of the int32 range (an int32 is wanted): this pod's eviction cost counts it as unset`,
	}
	ctx := context.Background()
	ctl.noteInvalidEvictionCosts(ctx, snap)
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	clk.Step(UnconsolidatableEvery / 2)
	ctl.noteUnconsolidatable(&methods.Cluster{})
	ctl.noteInvalidEvictionCosts(ctx, snap)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("told again within %v: %v", UnconsolidatableEvery, got)
	}
	clk.Step(UnconsolidatableEvery)
	ctl.noteUnconsolidatable(&methods.Cluster{})
	ctl.noteInvalidEvictionCosts(ctx, snap)
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("after %v: events\n%s\nwant\n%s", UnconsolidatableEvery, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
