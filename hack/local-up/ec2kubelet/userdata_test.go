package ec2kubelet

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsprovider "github.com/karpenter-policy/karpenter/providers/aws"
)

// The user data the provider writes for each AMI family reads back as what it was given.
func TestParseUserDataReadsWhatTheProviderWrites(t *testing.T) {
	labels := map[string]string{"karpenter.sh/nodepool": "default", "team": "a"}
	taints := []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}, {Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	for _, family := range []string{awsv1.AMIFamilyAL2023, awsv1.AMIFamilyAL2, awsv1.AMIFamilyBottlerocket} {
		t.Run(family, func(t *testing.T) {
			ud, err := awsprovider.UserData(family, awsprovider.Bootstrap{ClusterName: "local", ClusterEndpoint: "https://127.0.0.1:6443", CABundle: "Q0E=",
				Labels: labels, Taints: taints, Kubelet: awsv1.KubeletConfiguration{"maxPods": apiextensionsv1.JSON{Raw: []byte("42")}}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := ParseUserData(ud)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(b.Taints, func(a, b corev1.Taint) int { return strings.Compare(b.Key, a.Key) }) // Bottlerocket's are by key
			if !reflect.DeepEqual(b.Labels, labels) || !reflect.DeepEqual(b.Taints, taints) || b.Kubelet.MaxPods != 42 {
				t.Errorf("read labels %v, taints %v, maxPods %d", b.Labels, b.Taints, b.Kubelet.MaxPods)
			}
			if b.ClusterEndpoint != "https://127.0.0.1:6443" || b.CABundle != "Q0E=" {
				t.Errorf("read API server %q, CA %q", b.ClusterEndpoint, b.CABundle)
			}
		})
	}
	if _, err := ParseUserData("bm90IHVzZXIgZGF0YQ=="); err == nil {
		t.Error("user data of no known family was read")
	}
}
