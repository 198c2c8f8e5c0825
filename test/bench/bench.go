// Package bench holds the workloads the benchmarks share: the mixed workload of the shape of
// upstream Karpenter's scheduling benchmark, so that the figures compare. 400 synthetic
// instance types (type i has i+1 vCPU and 2(i+1) GiB, in three zones, spot and on-demand) and
// pods in five equal groups: plain, zone topology spread, hostname topology spread, zone pod
// affinity, hostname pod anti-affinity.
package bench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// SyntheticTypes are n instance types: type i has i+1 vCPU and 2(i+1) GiB, $0.05 per vCPU
// on-demand, Spot at 40-50% of that by zone.
func SyntheticTypes(n int) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, n)
	for i := range n {
		cpu := i + 1
		name := fmt.Sprintf("synthetic-%d", i)
		it := &cloudprovider.InstanceType{
			Name: name,
			Labels: map[string]string{karpv1.LabelInstanceType: name, karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux",
				karpv1.LabelInstanceFamily: "synthetic", karpv1.LabelInstanceCPU: fmt.Sprint(cpu)},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(2*cpu)<<30, resource.BinarySI), corev1.ResourcePods: resource.MustParse("110")},
		}
		price := 0.05 * float64(cpu)
		for j, z := range []string{"test-zone-a", "test-zone-b", "test-zone-c"} {
			it.Offerings = append(it.Offerings,
				cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: price, Available: true},
				cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: price * (0.4 + 0.05*float64(j)), Available: true})
		}
		out[i] = it
	}
	return out
}

var cpus = []string{"100m", "250m", "500m", "1", "2"}
var mems = []string{"128Mi", "512Mi", "1Gi", "2Gi", "4Gi"}

// MixedPods are n pods of the mixed workload, all in namespace default: pod i is in group
// i mod 5 with cpu and memory cycling through five sizes each.
func MixedPods(n int) []*corev1.Pod { return MixedPodsIn(n, nil) }

// MixedPodsIn is MixedPods spread over namespaces, five consecutive pods (one of each group)
// to a namespace in turn; with none, every pod is in "default".
func MixedPodsIn(n int, namespaces []string) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for i := range n {
		group := i % 5
		app := []string{"plain", "spread-zone", "spread-host", "affinity-zone", "anti-host"}[group]
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, i), Namespace: namespaceOf(i, namespaces), Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpus[(i/5)%5]), corev1.ResourceMemory: resource.MustParse(mems[(i/25)%5])}}}}}}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
		switch group {
		case 1:
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: karpv1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		case 2:
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		case 3:
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: karpv1.LabelTopologyZone, LabelSelector: sel}}}}
		case 4:
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: sel}}}}
		}
		out = append(out, p)
	}
	return out
}

func namespaceOf(i int, namespaces []string) string {
	if len(namespaces) == 0 {
		return "default"
	}
	return namespaces[(i/5)%len(namespaces)]
}
