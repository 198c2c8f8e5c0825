package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func limitRange(ns, name string, item corev1.LimitRangeItem) *corev1.LimitRange {
	item.Type = corev1.LimitTypeContainer
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}
}

func TestAdmittedRequests(t *testing.T) {
	container := func(req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	withDefault := limitRange("logging", "defaults", corev1.LimitRangeItem{Default: rl("cpu", "1", "memory", "1Gi"), DefaultRequest: rl("cpu", "500m")})
	for _, tc := range []struct {
		name      string
		namespace string
		spec      corev1.PodSpec
		adm       Admission
		cpu, mem  string
	}{
		{name: "requests as given", spec: corev1.PodSpec{Containers: []corev1.Container{container(rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "2"))}},
			cpu: "100m", mem: "64Mi"},
		{name: "limits only: requests are the limits", spec: corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("cpu", "1500m", "memory", "2Gi"))}},
			cpu: "1500m", mem: "2Gi"},
		{name: "a limit for one resource, a request for the other", spec: corev1.PodSpec{Containers: []corev1.Container{container(rl("memory", "1Gi"), rl("cpu", "1"))}},
			cpu: "1", mem: "1Gi"},
		{name: "LimitRange defaultRequest and default fill what is unset", namespace: "logging", adm: Admission{LimitRanges: []*corev1.LimitRange{withDefault}},
			spec: corev1.PodSpec{Containers: []corev1.Container{container(nil, nil)}}, cpu: "500m", mem: "1Gi"},
		{name: "LimitRange of another namespace does not apply", namespace: "web", adm: Admission{LimitRanges: []*corev1.LimitRange{withDefault}},
			spec: corev1.PodSpec{Containers: []corev1.Container{container(nil, nil)}}, cpu: "0", mem: "0"},
		{name: "the container's own limit beats the LimitRange", namespace: "logging", adm: Admission{LimitRanges: []*corev1.LimitRange{withDefault}},
			spec: corev1.PodSpec{Containers: []corev1.Container{container(nil, rl("cpu", "3"))}}, cpu: "3", mem: "1Gi"},
		{name: "a LimitRange with max only defaults to max (as the API server stores it)", namespace: "logging",
			adm:  Admission{LimitRanges: []*corev1.LimitRange{limitRange("logging", "max", corev1.LimitRangeItem{Max: rl("cpu", "2")})}},
			spec: corev1.PodSpec{Containers: []corev1.Container{container(nil, nil)}}, cpu: "2", mem: "0"},
		{name: "a LimitRange with min only defaults requests to min", namespace: "logging",
			adm:  Admission{LimitRanges: []*corev1.LimitRange{limitRange("logging", "min", corev1.LimitRangeItem{Min: rl("memory", "128Mi")})}},
			spec: corev1.PodSpec{Containers: []corev1.Container{container(nil, nil)}}, cpu: "0", mem: "128Mi"},
		{name: "init container with limits only, larger than the containers", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{container(nil, rl("cpu", "4"))}, Containers: []corev1.Container{container(rl("cpu", "1"), nil)}},
			cpu: "4", mem: "0"},
		{name: "sidecar with limits only adds to the containers", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{func() corev1.Container {
				c := container(nil, rl("cpu", "250m"))
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				return c
			}()}, Containers: []corev1.Container{container(rl("cpu", "1"), nil)}},
			cpu: "1250m", mem: "0"},
		{name: "RuntimeClass overhead", adm: Admission{RuntimeClasses: []*nodev1.RuntimeClass{{ObjectMeta: metav1.ObjectMeta{Name: "kata"},
			Overhead: &nodev1.Overhead{PodFixed: rl("cpu", "250m", "memory", "160Mi")}}}},
			spec: corev1.PodSpec{RuntimeClassName: ptr.To("kata"), Containers: []corev1.Container{container(rl("cpu", "1", "memory", "1Gi"), nil)}},
			cpu:  "1250m", mem: "1184Mi"},
		{name: "pod-level limits stand for the containers", spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{Limits: rl("cpu", "2")},
			Containers: []corev1.Container{container(rl("cpu", "100m"), nil)}}, cpu: "2", mem: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec.DeepCopy()
			ds := DaemonSetRequests(corev1.PodTemplateSpec{Spec: *spec}, tc.namespace, nil, tc.adm)
			if got := ds.Requests.Cpu(); got.Cmp(resource.MustParse(tc.cpu)) != 0 {
				t.Errorf("cpu %s, want %s", got, tc.cpu)
			}
			if got := ds.Requests.Memory(); got.Cmp(resource.MustParse(tc.mem)) != 0 {
				t.Errorf("memory %s, want %s", got, tc.mem)
			}
			if !equality.Semantic.DeepEqual(spec, &tc.spec) {
				t.Error("the template was modified")
			}
		})
	}
}

// A DaemonSet's newest pod tells what admission added that this process cannot see (a
// mutating webhook); the template's admitted requests still count where they are more.
func TestDaemonSetRequestsFromNewestPod(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "512Mi")}}}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "256Mi")}},
		{Name: "injected", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "400m")}}}}}
	got := DaemonSetRequests(tmpl, "kube-system", pod, Admission{}).Requests
	if got.Cpu().MilliValue() != 500 || got.Memory().Cmp(resource.MustParse("512Mi")) != 0 {
		t.Fatalf("want the pod's 500m cpu and the template's 512Mi, got %s and %s", got.Cpu(), got.Memory())
	}
	if got := DaemonSetRequests(tmpl, "kube-system", nil, Admission{}).Requests; got.Cpu().MilliValue() != 100 {
		t.Fatalf("without a pod the template tells: got %s", got.Cpu())
	}
}
