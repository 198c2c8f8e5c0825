package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
)

func i32(v int32) *int32 { return &v }

func chunk(cpu, mem string) *corev1.PodSpec {
	return &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}
}

func TestBufferReplicas(t *testing.T) {
	limits := func(cpu string) autoscalingv1beta1.Limits {
		return autoscalingv1beta1.Limits{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	for name, tc := range map[string]struct {
		spec     autoscalingv1beta1.CapacityBufferSpec
		scalable *int32
		want     int32
	}{
		"replicas":                           {spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: i32(3)}, want: 3},
		"nothing set":                        {want: 0},
		"percentage rounds up":               {spec: autoscalingv1beta1.CapacityBufferSpec{Percentage: i32(20)}, scalable: i32(11), want: 3},
		"percentage at least one":            {spec: autoscalingv1beta1.CapacityBufferSpec{Percentage: i32(1)}, scalable: i32(2), want: 1},
		"percentage of zero replicas":        {spec: autoscalingv1beta1.CapacityBufferSpec{Percentage: i32(50)}, scalable: i32(0), want: 0},
		"percentage without scalable":        {spec: autoscalingv1beta1.CapacityBufferSpec{Percentage: i32(50)}, want: 0},
		"the larger of replicas and pct":     {spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: i32(2), Percentage: i32(50)}, scalable: i32(10), want: 5},
		"limits alone fill":                  {spec: autoscalingv1beta1.CapacityBufferSpec{Limits: limits("2500m")}, want: 5},
		"limits cap replicas":                {spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: i32(10), Limits: limits("2")}, want: 4},
		"limits above replicas":              {spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: i32(3), Limits: limits("100")}, want: 3},
		"limits on a resource not asked for": {spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: i32(3), Limits: autoscalingv1beta1.Limits{"nvidia.com/gpu": resource.MustParse("1")}}, want: 3},
	} {
		t.Run(name, func(t *testing.T) {
			if got := BufferReplicas(&tc.spec, chunk("500m", "1Gi"), tc.scalable); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBufferPods(t *testing.T) {
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "headroom", Namespace: "team-a", UID: "u1"}}
	spec := chunk("1", "1Gi")
	spec.NodeName = "somewhere"
	spec.PriorityClassName = "high"
	spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
	}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data"}, {Name: "cfg"}}
	tmpl := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: *spec}
	pods := BufferPods(cb, tmpl, 3)
	if len(pods) != 3 {
		t.Fatalf("got %d pods, want 3", len(pods))
	}
	seen := map[string]bool{}
	for _, p := range pods {
		key, ok := BufferOf(p)
		if !ok || key.String() != "team-a/headroom" || !IsVirtual(p) {
			t.Errorf("%s: buffer %v %v", p.Name, key, ok)
		}
		if seen[string(p.UID)] {
			t.Errorf("%s: UID %s twice", p.Name, p.UID)
		}
		seen[string(p.UID)] = true
		if p.Namespace != "team-a" || p.Labels["app"] != "web" || p.Spec.NodeName != "" || p.Spec.PriorityClassName != "" ||
			p.Spec.Priority == nil || *p.Spec.Priority != autoscalingv1beta1.VirtualPodPriority {
			t.Errorf("%s: %+v", p.Name, p)
		}
		if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Name != "cfg" || len(p.Spec.Containers[0].VolumeMounts) != 1 {
			t.Errorf("%s: the claim's volume stays: %v %v", p.Name, p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts)
		}
		if !IsProvisionable(p) {
			t.Errorf("%s: a virtual pod is pending and unschedulable", p.Name)
		}
	}
	if len(spec.Volumes) != 2 || spec.NodeName != "somewhere" {
		t.Error("the template was changed")
	}
	if BufferPods(cb, tmpl, 0) != nil || IsVirtual(&corev1.Pod{}) {
		t.Error("zero replicas make no pod; a plain pod is not virtual")
	}
}
