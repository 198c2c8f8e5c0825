package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePoolHashVersion versions NodePool.Hash; a change of algorithm changes it, so that
// NodeClaims hashed the old way are not taken for drifted.
const NodePoolHashVersion = "v1"

// Hash hashes what the NodePool's template decides about a node beyond its requirements:
// metadata, taints, node class, expiry and grace period. A NodeClaim records it at launch
// (NodePoolHashAnnotationKey); when it no longer matches, the node has drifted.
func (in *NodePool) Hash() string {
	t := in.Spec.Template
	b, _ := json.Marshal(struct {
		Labels, Annotations    map[string]string
		Taints, StartupTaints  []corev1.Taint
		NodeClassRef           *NodeClassReference
		ExpireAfter            string
		TerminationGracePeriod *metav1.Duration
	}{t.Labels, t.Annotations, t.Spec.Taints, t.Spec.StartupTaints, t.Spec.NodeClassRef, t.Spec.ExpireAfter.String(), t.Spec.TerminationGracePeriod})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
