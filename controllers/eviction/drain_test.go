package eviction

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func pod(name string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "node", TerminationGracePeriodSeconds: ptr.To[int64](30)}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func daemon(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)})
}
func critical(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }
func terminatingSince(d time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		// The API server sets deletionTimestamp to the request plus the grace period.
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(-d).Add(time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second)}
	}
}
func grace(s int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(s) }
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestDrainableRules(t *testing.T) {
	for name, tc := range map[string]struct {
		pod       *corev1.Pod
		drainable bool
	}{
		"an ordinary pod": {pod("p"), true},
		"a DaemonSet pod that does not tolerate the disrupted taint": {pod("p", daemon), true},
		"a DaemonSet pod that tolerates everything": {pod("p", daemon, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), false},
		"a pod that tolerates the disrupted taint by key": {pod("p", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}), false},
		"a pod tolerating only NoExecute taints still drains": {pod("p", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		}), true},
		"a mirror pod":                        {pod("p", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }), false},
		"a pod owned by its node":             {pod("p", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "node"}} }), false},
		"a succeeded pod":                     {pod("p", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		"a pod terminating within its grace":  {pod("p", terminatingSince(10*time.Second)), true},
		"a pod terminating past its grace":    {pod("p", terminatingSince(31*time.Second)), false},
		"a pod with a finalizer, long past":   {pod("p", terminatingSince(time.Hour), func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} }), false},
		"a pod with no grace, just deleted":   {pod("p", grace(0), terminatingSince(0)), true},
		"a pod with no grace, a second later": {pod("p", grace(0), terminatingSince(time.Second)), false},
	} {
		t.Run(name, func(t *testing.T) {
			d := Plan([]*corev1.Pod{tc.pod}, now, nil)
			if got := d.Waiting == 1; got != tc.drainable {
				t.Errorf("drainable = %v, want %v", got, tc.drainable)
			}
		})
	}
}

func TestDrainEvictsTiersInOrder(t *testing.T) {
	a, b := pod("a"), pod("b")
	ds := pod("ds", daemon)
	crit := pod("crit", critical)
	critDS := pod("crit-ds", critical, daemon)
	all := []*corev1.Pod{critDS, crit, ds, b, a}
	steps := [][]string{{"a", "b"}, {"ds"}, {"crit"}, {"crit-ds"}}
	pods := all
	for i, want := range steps {
		d := Plan(pods, now, nil)
		if got := names(d.Evict); !slices.Equal(got, want) {
			t.Fatalf("step %d evicts %v, want %v", i, got, want)
		}
		if d.Waiting != len(pods) {
			t.Fatalf("step %d: %d waiting, want %d", i, d.Waiting, len(pods))
		}
		// The tier's pods terminate: the next tier waits until they are gone.
		var next []*corev1.Pod
		for _, p := range pods {
			if slices.Contains(want, p.Name) {
				p = p.DeepCopy()
				terminatingSince(time.Second)(p)
				next = append(next, p)
			} else {
				next = append(next, p)
			}
		}
		if d := Plan(next, now, nil); len(d.Evict) != 0 {
			t.Fatalf("step %d: while its pods terminate, the next tier must wait, evicts %v", i, names(d.Evict))
		}
		pods = slices.DeleteFunc(next, func(p *corev1.Pod) bool { return slices.Contains(want, p.Name) })
	}
	if d := Plan(pods, now, nil); d.Waiting != 0 {
		t.Fatalf("drained, yet %d waiting", d.Waiting)
	}
}

func TestDrainDeletesWhatWouldOutlastTheDeadline(t *testing.T) {
	deadline := now.Add(60 * time.Second)
	short := pod("short", grace(30))
	long := pod("long", grace(120))
	longDS := pod("long-ds", grace(90), daemon, critical)
	d := Plan([]*corev1.Pod{short, long, longDS}, now, &deadline)
	if got := names(d.Delete); !slices.Equal(got, []string{"long", "long-ds"}) {
		t.Errorf("pods whose grace outlasts the deadline are deleted now, whatever their tier: %v", got)
	}
	if got := names(d.Evict); !slices.Equal(got, []string{"short"}) {
		t.Errorf("the others are evicted in order: %v", got)
	}
	// DeleteAt is the deadline less the pod's own grace; the API's 30 s when it states none.
	if at := DeleteAt(short, deadline); !at.Equal(now.Add(30 * time.Second)) {
		t.Errorf("DeleteAt(short) = %v", at)
	}
	none := pod("none", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil })
	if at := DeleteAt(none, deadline); !at.Equal(now.Add(30 * time.Second)) {
		t.Errorf("DeleteAt without a grace period uses 30 s: %v", at)
	}
	// The grace granted is what is left, at least 1 s, at most the pod's own.
	for _, tc := range []struct {
		p    *corev1.Pod
		at   time.Time
		want int64
	}{
		{long, now, 60}, {short, now, 30}, {long, deadline.Add(-500 * time.Millisecond), 1}, {long, deadline.Add(time.Hour), 1},
	} {
		if g := DeleteGrace(tc.p, tc.at, deadline); g != tc.want {
			t.Errorf("DeleteGrace(%s, deadline%+v) = %d, want %d", tc.p.Name, tc.at.Sub(deadline), g, tc.want)
		}
	}
	// A pod already terminating with a grace that ends after the deadline is deleted again.
	slow := pod("slow", grace(600), terminatingSince(0))
	if !MustDelete(slow, now, &deadline) {
		t.Error("a pod terminating past the deadline must be deleted with the grace left")
	}
	if MustDelete(slow, now, nil) {
		t.Error("without a deadline nothing is deleted")
	}
	// Past the deadline every drainable pod is deleted.
	late := now.Add(-time.Second)
	if d := Plan([]*corev1.Pod{short, long}, now, &late); len(d.Delete) != 2 || len(d.Evict) != 0 {
		t.Errorf("past the deadline: delete %v, evict %v", names(d.Delete), names(d.Evict))
	}
}
