package solver

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// PolicyHook is how the policy engine constrains new capacity for a pod on a NodePool: the
// engine evaluates once per (namespace, NodePool) and adds per-pod choices such as the
// capacity type that keeps a namespace's Spot share in bounds. It is called for every new
// NodeClaim a pod is tried on, so it must be cheap (a lookup, not an evaluation).
type PolicyHook interface {
	Constraints(pod *corev1.Pod, nodePool string) *Constraints
}

// Constraints are a policy's extra requirements and offering filter for a pod on one
// NodePool.
type Constraints struct {
	Requirements []corev1.NodeSelectorRequirement
	// AllowType filters instance types, e.g. by family; nil allows all. It is applied once
	// per NodeClaim, so prefer it to AllowOffering for what does not depend on the offering.
	AllowType func(it *cloudprovider.InstanceType) bool
	// AllowOffering filters offerings, e.g. by price or capacity type; nil allows all.
	AllowOffering func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool
	// OfferingKey, when set, says that Constraints with the same key filter offerings the
	// same way, so a NodeClaim holding pods of many namespaces applies the filter once.
	OfferingKey string
	// Source names the policy, for the reasons pods stay pending.
	Source string
}

// withPolicy merges a policy's requirements into the pod's, once per pod and NodePool.
func (s *solver) withPolicy(reqs scheduling.Requirements, pl *pool, pc *Constraints) scheduling.Requirements {
	if len(pc.Requirements) == 0 {
		return reqs
	}
	if m, ok := s.podPolicyReqs[pl]; ok {
		return m
	}
	extra := scheduling.Requirements{}
	for _, r := range pc.Requirements {
		extra.Add(scheduling.NewRequirement(r.Key, r.Operator, r.Values...))
	}
	m := reqs.Merged(extra)
	s.podPolicyReqs[pl] = m
	return m
}

func (s *solver) policy(p *corev1.Pod, pl *pool) *Constraints {
	if s.in.Policy == nil {
		return nil
	}
	if p != s.policyPod {
		s.policyPod, s.podPolicy = p, map[*pool]*Constraints{}
	}
	pc, ok := s.podPolicy[pl]
	if !ok {
		pc = s.in.Policy.Constraints(p, pl.name)
		s.podPolicy[pl] = pc
	}
	return pc
}

// offerFilter is a policy's offering filter with its answers kept per instance type, as a
// bit per offering: the solver asks the same questions millions of times in a batch.
type offerFilter struct {
	// id numbers the filter in its solve, for memo keys.
	id    int
	allow func(*cloudprovider.InstanceType, cloudprovider.Offering) bool
	// masks has, by instance type index, bit i set when offering i is allowed, and
	// maskKnown once computed.
	masks []uint64
}

const maskKnown = uint64(1) << 63

// mask is the type's offerings the filter allows, a bit each, for the first 63 offerings.
func (f *offerFilter) mask(t *instanceType) uint64 {
	m := f.masks[t.idx]
	if m&maskKnown == 0 {
		m = maskKnown
		for j, o := range t.offerings[:min(len(t.offerings), 63)] {
			if f.allow(t.it, o) {
				m |= 1 << j
			}
		}
		f.masks[t.idx] = m
	}
	return m
}

// offerFilter is the policy's filter, made once per solve and shared by Constraints with the
// same OfferingKey; nil when it has none.
func (s *solver) offerFilter(pc *Constraints) *offerFilter {
	if pc.AllowOffering == nil {
		return nil
	}
	if f, ok := s.offerFilters[pc]; ok {
		return f
	}
	if pc.OfferingKey != "" {
		if f, ok := s.offerFiltersByKey[pc.OfferingKey]; ok {
			s.offerFilters[pc] = f
			return f
		}
	}
	s.filterCount++
	f := &offerFilter{id: s.filterCount, allow: pc.AllowOffering, masks: make([]uint64, s.typeCount)}
	s.offerFilters[pc] = f
	if pc.OfferingKey != "" {
		s.offerFiltersByKey[pc.OfferingKey] = f
	}
	return f
}

// policyNote names the policy whose offerings a refusal was limited to.
func policyNote(pc *Constraints) string {
	if pc != nil && pc.Source != "" {
		return " allowed by " + pc.Source
	}
	return ""
}
