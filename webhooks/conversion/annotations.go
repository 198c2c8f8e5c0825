// Package conversion converts NodePool, NodeClaim (karpenter.sh) and EC2NodeClass
// (karpenter.k8s.aws) between v1beta1 and v1, the hub. It is served as the CRDs' conversion
// webhook by cmd/karpenter and run offline by `karpenterctl convert`.
//
// Conversion is lossless both ways: what one version cannot hold rides in an annotation on
// the other (see the Annotation* constants and docs/conversion.md), and is restored on the
// way back. The rule used throughout: convert by mapping, then check that converting the
// result back would give the original; where it would not, keep the original in an
// annotation. Nothing here does I/O.
package conversion

import (
	"encoding/json"
	"strings"
)

// Annotations that carry what one version cannot hold. The "v1beta1-" keys live on v1
// objects and hold v1beta1 data; the "v1-" keys live on v1beta1 objects and hold v1 data.
// Every value is JSON.
const (
	// AnnotationV1beta1Kubelet holds the v1beta1 NodePool/NodeClaim spec.kubelet, which v1
	// moved to the node class (KubeletConfiguration as JSON).
	AnnotationV1beta1Kubelet = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"
	// AnnotationV1beta1NodeClassRef holds the v1beta1 nodeClassRef ({apiVersion, kind, name})
	// when v1's {group, kind, name} would not give it back, e.g. an omitted kind.
	AnnotationV1beta1NodeClassRef = "compatibility.karpenter.sh/v1beta1-nodeclass-reference"
	// AnnotationV1beta1TemplateResources holds a v1beta1 NodePool's
	// spec.template.spec.resources, which v1 NodePools do not have ({"requests": {...}}).
	AnnotationV1beta1TemplateResources = "compatibility.karpenter.sh/v1beta1-template-resources"
	// AnnotationV1beta1Disruption holds v1beta1 disruption fields ({"consolidateAfter": ...,
	// "consolidationPolicy": ...}) that v1's mapping would not give back, e.g. an omitted
	// consolidateAfter.
	AnnotationV1beta1Disruption = "compatibility.karpenter.sh/v1beta1-disruption"

	// AnnotationV1NodeClassRef holds the v1 nodeClassRef ({group, kind, name}) when the
	// v1beta1 form would not give it back.
	AnnotationV1NodeClassRef = "compatibility.karpenter.sh/v1-nodeclass-reference"
	// AnnotationV1Disruption holds v1 disruption fields that v1beta1 cannot hold:
	// {"consolidateAfter": "30s", "consolidationPolicy": ..., "budgetReasons": [["Drifted"], null]}
	// (budgetReasons is aligned with spec.disruption.budgets).
	AnnotationV1Disruption = "compatibility.karpenter.sh/v1-disruption"
	// AnnotationV1TerminationGracePeriod holds the v1 terminationGracePeriod ("48h") of a
	// NodePool template or a NodeClaim, which v1beta1 does not have.
	AnnotationV1TerminationGracePeriod = "compatibility.karpenter.sh/v1-termination-grace-period"
	// AnnotationV1ExpireAfter holds a v1 NodeClaim's spec.expireAfter ("720h" or "Never").
	AnnotationV1ExpireAfter = "compatibility.karpenter.sh/v1-expire-after"
	// AnnotationV1Replicas holds a static v1 NodePool's spec.replicas, which v1beta1 does not
	// have (a JSON number).
	AnnotationV1Replicas = "compatibility.karpenter.sh/v1-replicas"

	// AnnotationV1beta1AMISelection holds a v1beta1 EC2NodeClass's {"amiFamily": ...,
	// "amiSelectorTerms": [...]} when v1's form would not give it back, e.g. Ubuntu, which
	// v1 serves as AL2.
	AnnotationV1beta1AMISelection = "compatibility.karpenter.k8s.aws/v1beta1-ami-selection"
	// AnnotationV1AMISelection holds a v1 EC2NodeClass's {"amiFamily": ...,
	// "amiSelectorTerms": [...]} when v1beta1 cannot hold it, e.g. an alias pinned to a
	// version or an ssmParameter term.
	AnnotationV1AMISelection = "compatibility.karpenter.k8s.aws/v1-ami-selection"
	// AnnotationV1Kubelet holds a v1 EC2NodeClass's spec.kubelet, which v1beta1 kept on the
	// NodePool instead.
	AnnotationV1Kubelet = "compatibility.karpenter.k8s.aws/v1-kubelet"
	// AnnotationV1EC2NodeClassFields holds the v1 EC2NodeClass fields v1beta1 does not have:
	// {"capacityReservationSelectorTerms", "placementGroupSelector", "ipPrefixCount",
	// "networkInterfaces", "connectionTracking", "cpuOptions", "volumeInitializationRates"
	// (aligned with blockDeviceMappings)}.
	AnnotationV1EC2NodeClassFields = "compatibility.karpenter.k8s.aws/v1-fields"
)

// IsCompatibilityAnnotation reports whether key is one of the keys conversion owns. Objects
// in Git should not set them.
func IsCompatibilityAnnotation(key string) bool {
	return strings.HasPrefix(key, "compatibility.karpenter.sh/") || strings.HasPrefix(key, "compatibility.karpenter.k8s.aws/")
}

// stash is a set of annotations being read from a source object or written to a target.
type stash map[string]string

// take removes key from s and decodes its JSON into v; it reports whether the key was there
// and decoded.
func (s stash) take(key string, v any) bool {
	raw, ok := s[key]
	if !ok {
		return false
	}
	delete(s, key)
	return json.Unmarshal([]byte(raw), v) == nil
}

// put stores v as JSON under key.
func (s stash) put(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value put here is plain data; a failure is a programming error.
		panic(err)
	}
	s[key] = string(b)
}

// copyAnnotations returns a copy of an object's annotations to read and edit.
func copyAnnotations(in map[string]string) stash {
	out := make(stash, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// result turns an edited annotation set back into a field value: nil when empty, so that an
// object without annotations keeps none.
func (s stash) result(original map[string]string) map[string]string {
	if len(s) == 0 {
		if original != nil && len(original) == 0 {
			return map[string]string{}
		}
		return nil
	}
	return map[string]string(s)
}
