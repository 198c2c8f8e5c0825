package v1

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The hashes upstream Karpenter v1.15.0's NodePool.Hash gives these NodePools
// (sigs.k8s.io/karpenter/pkg/apis/v1, decoded from the same JSON): a NodeClaim
// upstream launched carries the same karpenter.sh/nodepool-hash as one launched here, so a
// cluster moving from upstream sees no drift and one moving back neither.
func TestNodePoolHashIsUpstreams(t *testing.T) {
	for _, tc := range []struct{ json, hash string }{
		{`{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a"}, "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}, "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}}}}`, "7428780003907761376"},
		{`{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "b"}, "spec": {"template": {"metadata": {"labels": {"team": "a", "tier": "web"}, "annotations": {"example.com/owner": "platform"}}, "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}], "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}, {"key": "gpu", "effect": "NoExecute"}], "startupTaints": [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoSchedule"}], "expireAfter": "720h", "terminationGracePeriod": "48h"}}}}`, "15307399556129307110"},
		{`{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "c"}, "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}, "requirements": [], "expireAfter": "Never"}}}}`, "7428780003907761376"},
	} {
		np := &NodePool{}
		if err := json.Unmarshal([]byte(tc.json), np); err != nil {
			t.Fatal(err)
		}
		if got := np.Hash(); got != tc.hash {
			t.Errorf("NodePool %s: hash %s, upstream's %s", np.Name, got, tc.hash)
		}
	}
}

// Requirements and the order of taints do not drift a node; a taint's value does.
func TestNodePoolHashIgnoresRequirementsAndOrder(t *testing.T) {
	np := &NodePool{}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Effect: "NoSchedule"}, {Key: "b", Effect: "NoSchedule"}}
	h := np.Hash()
	np.Spec.Template.Spec.Requirements = []NodeSelectorRequirementWithMinValues{{Key: "k", Operator: "Exists"}}
	np.Spec.Template.Spec.Taints[0], np.Spec.Template.Spec.Taints[1] = np.Spec.Template.Spec.Taints[1], np.Spec.Template.Spec.Taints[0]
	if np.Hash() != h {
		t.Errorf("requirements or taint order changed the hash")
	}
	np.Spec.Template.Spec.Taints[0].Value = "x"
	if np.Hash() == h {
		t.Errorf("a taint's value did not change the hash")
	}
}
