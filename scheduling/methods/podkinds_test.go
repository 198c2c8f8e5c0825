package methods

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Which pods of a node must be rescheduled if it goes (upstream's "reschedulable" pods), and
// what that means for emptiness and consolidation: DaemonSet and mirror (static) pods stay
// with their node; finished and terminating pods need no place; everything else does, owned
// or not.

func owned(kind string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: "owner", Controller: ptr.To(true)}}
	}
}

func TestReschedulablePods(t *testing.T) {
	ts := metav1.NewTime(now.Add(-time.Minute))
	for name, tc := range map[string]struct {
		pod           *corev1.Pod
		reschedulable bool
	}{
		"a ReplicaSet's pod":    {pod: pod("p", "a", "1", "1Gi", owned("ReplicaSet")), reschedulable: true},
		"a StatefulSet's pod":   {pod: pod("p", "a", "1", "1Gi", owned("StatefulSet")), reschedulable: true},
		"a Job's running pod":   {pod: pod("p", "a", "1", "1Gi", owned("Job")), reschedulable: true},
		"a pod with no owner":   {pod: pod("p", "a", "1", "1Gi"), reschedulable: true},
		"a DaemonSet's pod":     {pod: pod("p", "a", "1", "1Gi", daemonSetPod)},
		"a mirror (static) pod": {pod: pod("p", "a", "1", "1Gi", owned("Node"))},
		"a succeeded pod":       {pod: pod("p", "a", "1", "1Gi", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })},
		"a failed pod":          {pod: pod("p", "a", "1", "1Gi", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
		"a terminating pod":     {pod: pod("p", "a", "1", "1Gi", func(p *corev1.Pod) { p.DeletionTimestamp = &ts })},
		"a pod with an emptyDir": {pod: pod("p", "a", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}), reschedulable: true},
		// As upstream: the drain leaves it, so nothing need hold room for it.
		"a pod tolerating the disrupted taint": {pod: pod("p", "a", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
		})},
		"a pod tolerating every taint": {pod: pod("p", "a", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		})},
	} {
		t.Run(name, func(t *testing.T) {
			c := world{nodes: nodesOf(1, "m5.large", "on-demand"), pods: []*corev1.Pod{tc.pod}}.cluster()
			if len(c.Candidates) != 1 {
				t.Fatalf("%d candidates", len(c.Candidates))
			}
			if got := len(c.Candidates[0].Pods) == 1; got != tc.reschedulable {
				t.Fatalf("reschedulable %v, want %v", got, tc.reschedulable)
			}
			// A node whose only pods need no place is empty.
			got := strings.Join(commandNames(commands(t, Emptiness{}, c)), " | ")
			if empty := got == "delete:a"; empty == tc.reschedulable {
				t.Fatalf("emptiness: %q with a pod that is reschedulable: %v", got, tc.reschedulable)
			}
		})
	}
}

// Pod deletion cost and priority weigh a node's disruption cost: of two nodes consolidation
// could delete, the one whose pods are cheaper to evict goes first (savings being equal).
func TestEvictionCostOrdersCandidates(t *testing.T) {
	expensive := func(p *corev1.Pod) {
		p.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "1000"}
	}
	important := func(p *corev1.Pod) { p.Spec.Priority = ptr.To(int32(1000000)) }
	for name, tc := range map[string]struct {
		onA, onB func(*corev1.Pod)
		want     string
	}{
		"equal pods: by name":           {onA: func(*corev1.Pod) {}, onB: func(*corev1.Pod) {}, want: "a"},
		"a's pod costs more to delete":  {onA: expensive, onB: func(*corev1.Pod) {}, want: "b"},
		"a's pod has a higher priority": {onA: important, onB: func(*corev1.Pod) {}, want: "b"},
		"b's pod costs more to delete":  {onA: func(*corev1.Pod) {}, onB: expensive, want: "a"},
	} {
		t.Run(name, func(t *testing.T) {
			w := world{pools: pool(onDemandOnly), nodes: append(nodesOf(2, "m5.xlarge", "on-demand"), node("c", "m5.xlarge", "on-demand", "z-a")),
				pods: []*corev1.Pod{pod("wa", "a", "500m", "1Gi", tc.onA), pod("wb", "b", "500m", "1Gi", tc.onB),
					pod("wc", "c", "2", "4Gi", podAnnotated(karpv1.DoNotDisruptAnnotationKey, "true"))}}
			cmds := commands(t, &SingleNode{}, w.cluster())
			if len(cmds) != 1 || cmds[0].Candidates[0].Name() != tc.want {
				t.Fatalf("commands %v, want %s first", commandNames(cmds), tc.want)
			}
		})
	}
}
