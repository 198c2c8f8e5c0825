package provisioning

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// bufferPlacements counts, by buffer, where a batch put the virtual pods.
func bufferPlacements(res *solver.Result) map[types.NamespacedName]scheduling.BufferPlacement {
	out := map[types.NamespacedName]scheduling.BufferPlacement{}
	count := func(p *corev1.Pod, f func(*scheduling.BufferPlacement)) {
		if key, ok := scheduling.BufferOf(p); ok {
			b := out[key]
			f(&b)
			out[key] = b
		}
	}
	for _, pods := range res.Existing {
		for _, p := range pods {
			count(p, func(b *scheduling.BufferPlacement) { b.Existing++ })
		}
	}
	for _, c := range res.NodeClaims {
		for _, p := range c.Pods {
			count(p, func(b *scheduling.BufferPlacement) { b.Launched++ })
		}
	}
	for _, u := range res.Unschedulable {
		count(u.Pod, func(b *scheduling.BufferPlacement) {
			b.Unplaced++
			if b.Reason == "" {
				b.Reason = u.Reason
			}
		})
	}
	return out
}

// realPods are the pods that are not virtual; pods itself when none is.
func realPods(pods []*corev1.Pod) []*corev1.Pod {
	for i, p := range pods {
		if scheduling.IsVirtual(p) {
			out := append([]*corev1.Pod(nil), pods[:i]...)
			for _, q := range pods[i+1:] {
				if !scheduling.IsVirtual(q) {
					out = append(out, q)
				}
			}
			return out
		}
	}
	return pods
}
