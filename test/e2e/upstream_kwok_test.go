package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
)

// A KWOKNodeClass with catalog "upstream" serves upstream's kwok instance types: a NodePool
// written for upstream's kwok provider (its family label, Linux) launches one of them, in one
// of its zones, and the node carries upstream's labels.
func TestUpstreamKWOKCatalog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	np := isolated(t, ctx, func(c *kwokv1alpha1.KWOKNodeClass) { c.Spec.Catalog = "upstream" }, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: "karpenter.kwok.sh/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}},
			{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
			{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		}
	})
	create(t, ctx, deployment("on-upstream-kwok", 2, np.Name, "1", nil))
	pods := runningPods(t, ctx, "on-upstream-kwok", 2)
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^c-[0-9]+x-(amd64|arm64)-linux$`)
	if it := node.Labels[corev1.LabelInstanceTypeStable]; !name.MatchString(it) {
		t.Errorf("instance type %q is not one of upstream's kwok c family for Linux", it)
	}
	if node.Labels["karpenter.kwok.sh/instance-family"] != "c" || node.Labels["karpenter.kwok.sh/instance-cpu"] == "" || node.Labels["karpenter.kwok.sh/instance-memory"] == "" {
		t.Errorf("node labels: %v", node.Labels)
	}
	if z := node.Labels[corev1.LabelTopologyZone]; !strings.HasPrefix(z, "test-zone-") {
		t.Errorf("zone %q is not one of upstream's kwok zones", z)
	}
}
