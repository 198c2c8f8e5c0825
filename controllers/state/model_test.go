package state

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// history is what the informers tell of one object: its versions in order, and whether it was
// deleted at the end (then the tombstone may come for the last version).
type history struct {
	versions []client.Object
	deleted  bool
}

// randomHistories makes the lives of nodes, NodeClaims, pods and NodePools: created, updated
// (bound, cordoned, tainted, launched, deleting) a few times, some deleted.
func randomHistories(r *rand.Rand) []history {
	var out []history
	pools := []string{"a", "b"}
	for _, name := range pools {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
		h := history{versions: []client.Object{np}}
		if r.Intn(4) == 0 {
			np2 := np.DeepCopy()
			np2.Generation = 2
			np2.Spec.Weight = new(int32)
			h.versions = append(h.versions, np2)
		}
		out = append(out, h)
	}
	nodes := 1 + r.Intn(6)
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		pool := pools[r.Intn(2)]
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}},
			Spec: karpv1.NodeClaimSpec{Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
		ch := history{versions: []client.Object{nc}}
		launched := nc.DeepCopy()
		launched.Status.ProviderID = "fake://" + name
		launched.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("10")}
		ch.versions = append(ch.versions, launched)
		registered := r.Intn(3) != 0
		if registered {
			reg := launched.DeepCopy()
			reg.Status.NodeName = name
			reg.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized"}}
			ch.versions = append(ch.versions, reg)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}},
				Spec: corev1.NodeSpec{ProviderID: "fake://" + name}}
			nh := history{versions: []client.Object{node}}
			ready := node.DeepCopy()
			ready.Status.Allocatable = launched.Status.Capacity
			ready.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			nh.versions = append(nh.versions, ready)
			for range r.Intn(3) {
				beat := nh.versions[len(nh.versions)-1].(*corev1.Node).DeepCopy()
				switch r.Intn(3) {
				case 0:
					beat.Spec.Unschedulable = !beat.Spec.Unschedulable
				case 1:
					beat.Spec.Taints = append(beat.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
				default:
					beat.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(int64(r.Intn(1000)), 0))
				}
				nh.versions = append(nh.versions, beat)
			}
			nh.deleted = r.Intn(5) == 0
			out = append(out, nh)
		}
		ch.deleted = r.Intn(6) == 0
		out = append(out, ch)
	}
	for i := range 4 + r.Intn(12) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-p%d", i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100+100*r.Intn(10)))}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
		h := history{versions: []client.Object{p}}
		cur := p
		for range r.Intn(4) {
			next := cur.DeepCopy()
			switch r.Intn(4) {
			case 0:
				next.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
			case 1:
				next.Spec.NodeName = fmt.Sprintf("n%d", r.Intn(nodes))
				next.Status.Phase = corev1.PodRunning
				next.Status.Conditions = nil
			case 2:
				next.Status.Phase = corev1.PodSucceeded
			default:
				next.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
			}
			h.versions = append(h.versions, next)
			cur = next
		}
		h.deleted = r.Intn(5) == 0
		out = append(out, h)
	}
	return out
}

// digest is what a snapshot decides from, written out so that two snapshots compare.
func digest(s *snapshot.Snapshot) string {
	var b strings.Builder
	var pending []string
	for _, p := range s.Pods {
		pending = append(pending, p.Name)
	}
	sort.Strings(pending)
	fmt.Fprintf(&b, "pending %v\n", pending)
	var deleting []string
	for _, p := range s.Deleting {
		deleting = append(deleting, p.Name)
	}
	sort.Strings(deleting)
	fmt.Fprintf(&b, "deleting %v\n", deleting)
	var nodes []string
	for _, n := range s.StateNodes {
		var pods []string
		for _, p := range n.Pods {
			pods = append(pods, p.Name)
		}
		sort.Strings(pods)
		room := "-"
		if n.Sched != nil {
			var sched []string
			for _, p := range n.Sched.Pods {
				sched = append(sched, p.Name)
			}
			sort.Strings(sched)
			room = fmt.Sprintf("alloc=%s taints=%d pods=%v", n.Sched.Allocatable.Cpu(), len(n.Sched.Taints), sched)
		}
		nodes = append(nodes, fmt.Sprintf("%s pool=%s inflight=%v deleting=%v disrupted=%v ready=%v init=%v bound=%v room=%s",
			n.Name(), n.NodePool, n.InFlight, n.Deleting, n.Disrupted, n.Ready, n.Initialized, pods, room))
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		fmt.Fprintln(&b, n)
	}
	for _, np := range s.NodePools {
		fmt.Fprintf(&b, "pool %s usage cpu=%s nodes=%s\n", np.NodePool.Name, np.Usage.Cpu(), np.Usage.Name("nodes", resource.DecimalSI))
	}
	return b.String()
}

func testTypes(*karpv1.NodePool) ([]*cloudprovider.InstanceType, error) { return nil, nil }

// The incremental model gives the same snapshot as a fresh build from the final objects,
// whatever order the informers' events of different objects interleave in (each object's own
// events in order, as an informer delivers them; deletions sometimes as tombstones).
func TestModelEventsInAnyOrderGiveTheFreshSnapshot(t *testing.T) {
	for seed := range int64(300) {
		r := rand.New(rand.NewSource(seed))
		clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
		hs := randomHistories(r)
		// The final objects, as a list would give them.
		var final []client.Object
		for _, h := range hs {
			if !h.deleted {
				final = append(final, h.versions[len(h.versions)-1])
			}
		}
		// The events, interleaved at random, each object's in order.
		next := make([]int, len(hs))
		live := NewCluster(nil, clk)
		for {
			var open []int
			for i, h := range hs {
				if next[i] < len(h.versions) || next[i] == len(h.versions) && h.deleted {
					open = append(open, i)
				}
			}
			if len(open) == 0 {
				break
			}
			i := open[r.Intn(len(open))]
			h := hs[i]
			if next[i] < len(h.versions) {
				live.Update(h.versions[next[i]])
			} else {
				var gone any = h.versions[len(h.versions)-1]
				if r.Intn(2) == 0 {
					gone = toolscache.DeletedFinalStateUnknown{Key: "x", Obj: gone}
				}
				live.Delete(gone)
			}
			next[i]++
		}
		fresh := NewCluster(nil, clk)
		for _, o := range slices.Backward(final) {
			fresh.Update(o)
		}
		env := snapshot.Env{Now: clk.Now(), InstanceTypes: testTypes}
		got, want := digest(snapshot.Build(live.Objects(), env)), digest(snapshot.Build(fresh.Objects(), env))
		if got != want {
			t.Fatalf("seed %d: the incremental model\n%s\nthe fresh build\n%s", seed, got, want)
		}
		if live.PendingPods() != fresh.PendingPods() {
			t.Fatalf("seed %d: %d pending in the model, %d fresh", seed, live.PendingPods(), fresh.PendingPods())
		}
	}
}

// A heartbeat (the Ready condition's timestamps) does not move the revision: an idle cluster
// whose kubelets report every few minutes does not look changed to a periodic pass; a taint,
// a cordon or a new pod does.
func TestRevisionIgnoresHeartbeats(t *testing.T) {
	c := NewCluster(nil, clocktesting.NewFakeClock(time.Now()))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Unix(1, 0))}}}}
	c.Update(n)
	rev := c.Revision()
	beat := n.DeepCopy()
	beat.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(2, 0))
	beat.ResourceVersion = "2"
	c.Update(beat)
	if c.Revision() != rev {
		t.Fatal("a heartbeat moved the revision")
	}
	tainted := beat.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{karpv1.DisruptedNoScheduleTaint}
	c.Update(tainted)
	if c.Revision() == rev {
		t.Fatal("a taint did not move the revision")
	}
	rev = c.Revision()
	c.Update(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}})
	if c.Revision() == rev {
		t.Fatal("a new pod did not move the revision")
	}
}
