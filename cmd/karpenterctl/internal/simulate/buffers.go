package simulate

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// bufferPods are the CapacityBuffers' virtual pods, resolved as the manager's capacitybuffer
// controller resolves them (docs/architecture.md, "CapacityBuffers"), but against the input's
// files: a podTemplateRef names a PodTemplate and a scalableRef a Deployment, StatefulSet or
// ReplicaSet of the workloads, in the buffer's namespace. A buffer the manager keeps no room
// for (another provisioningStrategy, another kind, neither reference) has none, as there
// (`karpenterctl validate` warns about it); a reference to an object that is not among the
// files is an error naming the buffer and the field, since the simulation would otherwise
// leave the room out without a word.
func (in *Input) bufferPods() ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, cb := range in.CapacityBuffers {
		if s := cb.Spec.ProvisioningStrategy; s != nil && *s != autoscalingv1beta1.ActiveProvisioningStrategy {
			continue
		}
		var tmpl *corev1.PodTemplateSpec
		var scalable *int32
		switch ref := cb.Spec.ScalableRef; {
		case cb.Spec.PodTemplateRef != nil:
			for _, pt := range in.PodTemplates {
				if pt.Namespace == cb.Namespace && pt.Name == cb.Spec.PodTemplateRef.Name {
					tmpl = &pt.Template
				}
			}
			if tmpl == nil {
				return nil, fmt.Errorf("CapacityBuffer %s/%s: spec.podTemplateRef: PodTemplate %s/%s is not among the workload files",
					cb.Namespace, cb.Name, cb.Namespace, cb.Spec.PodTemplateRef.Name)
			}
		case ref != nil && (ref.APIGroup == "" || ref.APIGroup == appsv1.GroupName):
			known := true
			for _, w := range in.Workloads {
				switch o := w.(type) {
				case *appsv1.Deployment:
					if ref.Kind == autoscalingv1beta1.KindDeployment && o.Namespace == cb.Namespace && o.Name == ref.Name {
						tmpl, scalable = &o.Spec.Template, o.Spec.Replicas
					}
				case *appsv1.StatefulSet:
					if ref.Kind == autoscalingv1beta1.KindStatefulSet && o.Namespace == cb.Namespace && o.Name == ref.Name {
						tmpl, scalable = &o.Spec.Template, o.Spec.Replicas
					}
				case *appsv1.ReplicaSet:
					if ref.Kind == autoscalingv1beta1.KindReplicaSet && o.Namespace == cb.Namespace && o.Name == ref.Name {
						tmpl, scalable = &o.Spec.Template, o.Spec.Replicas
					}
				}
			}
			switch ref.Kind {
			case autoscalingv1beta1.KindDeployment, autoscalingv1beta1.KindStatefulSet, autoscalingv1beta1.KindReplicaSet:
			default:
				known = false
			}
			if !known {
				continue
			}
			if tmpl == nil {
				return nil, fmt.Errorf("CapacityBuffer %s/%s: spec.scalableRef: %s %s/%s is not among the workload files",
					cb.Namespace, cb.Name, ref.Kind, cb.Namespace, ref.Name)
			}
			if scalable == nil {
				one := int32(1)
				scalable = &one
			}
		default:
			continue
		}
		replicas := scheduling.BufferReplicas(&cb.Spec, &tmpl.Spec, scalable)
		out = append(out, scheduling.BufferPods(cb, tmpl, replicas)...)
	}
	return out, nil
}
