package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
)

func kubelet(fields map[string]string) awsv1.KubeletConfiguration {
	kc := awsv1.KubeletConfiguration{}
	for k, raw := range fields {
		kc[k] = awsv1.JSONValue(raw)
	}
	return kc
}

func TestKubelet(t *testing.T) {
	p := field.NewPath("spec", "kubelet")
	for name, tc := range map[string]struct {
		kc   awsv1.KubeletConfiguration
		want map[string]string
	}{
		"none": {kc: nil, want: map[string]string{}},
		"the settings Karpenter reads, and one it does not": {kc: kubelet(map[string]string{
			"maxPods": "110", "podsPerCore": "10", "kubeReserved": `{"cpu":"200m","memory":"100Mi"}`,
			"systemReserved": `{"cpu":"200m"}`, "evictionHard": `{"memory.available":"5%","nodefs.available":"10Gi"}`,
			"serializeImagePulls": "false",
		}), want: map[string]string{}},
		"a field the kubelet lacks": {kc: kubelet(map[string]string{"notAKubeletField": "true"}),
			want: map[string]string{"spec.kubelet": `unknown field "notAKubeletField"`}},
		"a field the kubelet lacks and a bad eviction signal, both reported": {kc: kubelet(map[string]string{"maxPodz": "110", "evictionHard": `{"memory.free":"5%"}`}),
			want: map[string]string{"spec.kubelet": `unknown field "maxPodz"`, "spec.kubelet.evictionHard[memory.free]": "Unsupported value"}},
		"a value of the wrong type": {kc: kubelet(map[string]string{"podsPerCore": `"ten"`}),
			want: map[string]string{"spec.kubelet": "podsPerCore"}},
		"a resource the kubelet cannot reserve": {kc: kubelet(map[string]string{"systemReserved": `{"gpu":"1"}`}),
			want: map[string]string{"spec.kubelet.systemReserved[gpu]": "Unsupported value"}},
		"a negative reservation": {kc: kubelet(map[string]string{"kubeReserved": `{"cpu":"-1"}`}),
			want: map[string]string{"spec.kubelet.kubeReserved[cpu]": "non-negative"}},
		"an unknown eviction signal and a percentage over 100": {kc: kubelet(map[string]string{"evictionHard": `{"memory.free":"5%","nodefs.available":"120%"}`}),
			want: map[string]string{"spec.kubelet.evictionHard[memory.free]": "Unsupported value", "spec.kubelet.evictionHard[nodefs.available]": "percentage"}},
		"soft eviction without its grace period, and a grace period without its threshold": {
			kc: kubelet(map[string]string{"evictionSoft": `{"memory.available":"5%"}`, "evictionSoftGracePeriod": `{"nodefs.available":"1m"}`}),
			want: map[string]string{"spec.kubelet.evictionSoft[memory.available]": "no matching evictionSoftGracePeriod",
				"spec.kubelet.evictionSoftGracePeriod[nodefs.available]": "no matching evictionSoft"}},
		"image GC thresholds reversed": {kc: kubelet(map[string]string{"imageGCHighThresholdPercent": "50", "imageGCLowThresholdPercent": "80"}),
			want: map[string]string{"spec.kubelet.imageGCHighThresholdPercent": "greater than imageGCLowThresholdPercent (80)"}},
		"a field Karpenter writes": {kc: kubelet(map[string]string{"registerWithTaints": `[]`}),
			want: map[string]string{"spec.kubelet.registerWithTaints": "Karpenter registers the node"}},
	} {
		t.Run(name, func(t *testing.T) { expect(t, validateKubelet(p, tc.kc), tc.want) })
	}
}
