package v1

import (
	"reflect"
	"strconv"

	"github.com/mitchellh/hashstructure/v2"
)

// NodePoolHashVersion versions NodePool.Hash; a change of algorithm changes it, so that
// NodeClaims hashed the old way are not taken for drifted (the NodePool controller
// re-stamps them, docs/architecture.md, "Drift"). It is upstream Karpenter's, with upstream's
// algorithm: a NodePool and NodeClaims hashed by upstream carry the same values here.
const NodePoolHashVersion = "v3"

// Hash hashes what the NodePool's template decides about a node beyond its requirements:
// metadata, taints, startup taints, node class, expiry and grace period, as upstream does
// (hashstructure FormatV2 over the template, requirements and the durations' raw text left
// out by their `hash:"ignore"` tags, zero values and nil ignored, slices as sets). A NodeClaim
// records it at launch (NodePoolHashAnnotationKey); when it no longer matches, the node has
// drifted.
func (in *NodePool) Hash() string {
	h, err := hashstructure.Hash(in.Spec.Template, hashstructure.FormatV2, &hashstructure.HashOptions{
		SlicesAsSets:    true,
		IgnoreZeroValue: true,
		ZeroNil:         true,
	})
	if err != nil {
		// Only a channel or a func in the template could fail; it has neither.
		panic(err)
	}
	return strconv.FormatUint(h, 10)
}

// HashInclude leaves an expireAfter of "Never" out of NodePool.Hash, as an absent one:
// upstream reads "Never" as the zero value, which the hash skips, where this API keeps the
// text "Never" to write it back as written (NillableDuration.Raw).
func (NodeClaimTemplateSpec) HashInclude(field string, v any) (bool, error) {
	if field != "ExpireAfter" {
		return true, nil
	}
	rv, ok := v.(reflect.Value)
	if !ok {
		return true, nil
	}
	d, ok := rv.Interface().(NillableDuration)
	return !ok || d.Duration != nil, nil
}
