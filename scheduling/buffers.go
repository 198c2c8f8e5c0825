package scheduling

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
)

// A CapacityBuffer keeps room as virtual pods: pending pods that exist only in the snapshot,
// one per chunk, which the solver places like any other pending pod (on existing or in-flight
// room first, else on new NodeClaims) and which nothing ever binds, nominates, gates or
// evicts (docs/architecture.md, "CapacityBuffers"). This file is the arithmetic of the
// buffer: how many chunks, and the virtual pods themselves.

// BufferReplicas is how many chunks a buffer keeps room for, as upstream counts them: the
// larger of spec.replicas and spec.percentage of the scalable workload's replicas (rounded
// up, at least 1 when both are above 0), capped by what spec.limits hold of the chunk's
// requests; limits alone give as many chunks as fit. scalableReplicas is nil for a
// podTemplateRef buffer.
func BufferReplicas(spec *autoscalingv1beta1.CapacityBufferSpec, chunk *corev1.PodSpec, scalableReplicas *int32) int32 {
	var candidates []int32
	if spec.Replicas != nil {
		candidates = append(candidates, *spec.Replicas)
	}
	if spec.Percentage != nil && scalableReplicas != nil && *scalableReplicas > 0 {
		n := int32(math.Ceil(float64(*scalableReplicas) * float64(*spec.Percentage) / 100))
		if n < 1 && *spec.Percentage > 0 {
			n = 1
		}
		candidates = append(candidates, n)
	}
	desired := int32(0)
	for _, c := range candidates {
		desired = max(desired, c)
	}
	if len(spec.Limits) == 0 || chunk == nil {
		return desired
	}
	fit, ok := chunksWithin(corev1.ResourceList(spec.Limits), PodRequests(&corev1.Pod{Spec: *chunk}))
	switch {
	case !ok:
		return desired
	case len(candidates) == 0:
		return fit
	default:
		return min(desired, fit)
	}
}

// chunksWithin is how many chunks of requests fit within limits, over the resources both
// name; ok is false when they share none.
func chunksWithin(limits, requests corev1.ResourceList) (int32, bool) {
	n, ok := int64(math.MaxInt32), false
	for name, limit := range limits {
		req, has := requests[name]
		if !has || req.IsZero() {
			continue
		}
		ok = true
		n = min(n, limit.MilliValue()/req.MilliValue())
	}
	return int32(max(n, 0)), ok //nolint:gosec // between 0 and MaxInt32
}

// BufferPods are the virtual pods of a buffer resolved to template with replicas chunks:
// pending pods in the buffer's namespace, with the template's labels (so that affinities and
// spreads see them as the workload's), the lowest priority, and no volume a claim backs
// (a chunk is room, not storage; its pods' zone follows from where the room is).
func BufferPods(cb *autoscalingv1beta1.CapacityBuffer, template *corev1.PodTemplateSpec, replicas int32) []*corev1.Pod {
	if replicas <= 0 {
		return nil
	}
	spec := virtualSpec(&template.Spec)
	out := make([]*corev1.Pod, 0, replicas)
	for i := range replicas {
		p := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("capacity-buffer-%s-%d", cb.Name, i+1),
				Namespace: cb.Namespace,
				UID:       types.UID(fmt.Sprintf("%s-%d", cb.UID, i+1)),
				Labels:    template.Labels,
				Annotations: map[string]string{
					autoscalingv1beta1.VirtualPodAnnotation:      "true",
					autoscalingv1beta1.BufferNameAnnotation:      cb.Name,
					autoscalingv1beta1.BufferNamespaceAnnotation: cb.Namespace,
				},
				CreationTimestamp: cb.CreationTimestamp,
			},
			Spec: *spec.DeepCopy(),
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			}}},
		}
		out = append(out, p)
	}
	return out
}

// virtualSpec is the template's pod spec as a chunk: unbound, lowest priority, and without
// the volumes a claim backs.
func virtualSpec(in *corev1.PodSpec) *corev1.PodSpec {
	spec := in.DeepCopy()
	spec.NodeName = ""
	prio := autoscalingv1beta1.VirtualPodPriority
	spec.Priority = &prio
	spec.PriorityClassName = ""
	dropped := map[string]bool{}
	kept := spec.Volumes[:0]
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			dropped[v.Name] = true
			continue
		}
		kept = append(kept, v)
	}
	spec.Volumes = kept
	if len(dropped) > 0 {
		for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
			for i := range cs {
				mounts := cs[i].VolumeMounts[:0]
				for _, m := range cs[i].VolumeMounts {
					if !dropped[m.Name] {
						mounts = append(mounts, m)
					}
				}
				cs[i].VolumeMounts = mounts
			}
		}
	}
	return spec
}

// BufferPlacement is what one provisioning batch did with a CapacityBuffer's virtual pods:
// how many have room on existing or in-flight capacity, how many went on the NodeClaims it
// launched, and how many found no place, with the first reason.
type BufferPlacement struct {
	Existing, Launched, Unplaced int
	Reason                       string
}

// IsVirtual reports whether a pod is a CapacityBuffer's virtual pod.
func IsVirtual(p *corev1.Pod) bool {
	return p != nil && p.Annotations[autoscalingv1beta1.VirtualPodAnnotation] == "true"
}

// BufferOf names the CapacityBuffer a virtual pod keeps room for; ok is false for a real pod.
func BufferOf(p *corev1.Pod) (types.NamespacedName, bool) {
	if !IsVirtual(p) {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: p.Annotations[autoscalingv1beta1.BufferNamespaceAnnotation], Name: p.Annotations[autoscalingv1beta1.BufferNameAnnotation]}, true
}
