package solver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// The effective zones that are not one zone, as upstream's scheduler names them.
const (
	// ZoneFlexible: more than one zone is possible.
	ZoneFlexible = "flexible"
	// ZoneNone: no zone is possible.
	ZoneNone = "none"
)

// EffectiveZones counts the input's pods (CapacityBuffers' virtual pods left out) by effective
// zone, as upstream's karpenter_scheduler_pending_pods_by_effective_zone_count does: the one
// zone that what the pod requires of its node's zone, its volumes' zones and its own required
// topology constraints on the zone key (spreads, pod affinity and anti-affinity, counted over
// the pods already placed) leave; ZoneFlexible when more than one is left or nothing narrows
// it, ZoneNone when none is. It places nothing.
func EffectiveZones(in *Input) (map[string]int, error) {
	pr, err := Prepare(in)
	if err != nil {
		return nil, err
	}
	return pr.EffectiveZones(), nil
}

// EffectiveZones counts the prepared input's pods by effective zone (the package function
// EffectiveZones), before Solve.
func (pr *Prepared) EffectiveZones() map[string]int {
	s := pr.s
	out := map[string]int{}
	for _, p := range s.in.Pods {
		if !scheduling.IsVirtual(p) {
			out[s.effectiveZone(p)]++
		}
	}
	return out
}

// effectiveZone is the pod's effective zone (EffectiveZones). A pod whose required node
// affinity has several terms can go wherever any term allows: one zone only if every term
// leaves that same zone.
func (s *solver) effectiveZone(p *corev1.Pod) string {
	zones := sets.New[string]()
	for term := range requiredTerms(p) {
		zones.Insert(s.effectiveZoneOfTerm(p, podRequirements(p, term, nil)))
	}
	zones.Delete(ZoneNone)
	switch zones.Len() {
	case 0:
		return ZoneNone
	case 1:
		return zones.UnsortedList()[0]
	}
	return ZoneFlexible
}

// effectiveZoneOfTerm is the effective zone under one term of the pod's requirements, as
// upstream computes it: the candidates are the zones the pod's requirement lists, else those
// its volumes list, else those its topology constraints leave; a candidate counts when all
// three allow it.
func (s *solver) effectiveZoneOfTerm(p *corev1.Pod, reqs scheduling.Requirements) string {
	key := corev1.LabelTopologyZone
	zoneReq := reqs[key]
	var volumes *scheduling.Requirement
	for _, v := range s.in.VolumeRequirements[PodKey(p)] {
		if v.Key != key {
			continue
		}
		// Every volume must be reachable from the node: their zones intersect.
		if r := scheduling.NewRequirement(v.Key, v.Operator, v.Values...); volumes == nil {
			volumes = r
		} else {
			volumes = volumes.Intersect(r)
		}
	}
	valid, satisfiable := s.topo.zoneDomains(p, reqs)
	if !satisfiable {
		return ZoneNone
	}
	var candidates []string
	switch {
	case zoneReq != nil && !zoneReq.Complement():
		candidates = zoneReq.Values()
	case volumes != nil && !volumes.Complement():
		candidates = volumes.Values()
	case valid != nil:
		candidates = sets.List(valid)
	default:
		return ZoneFlexible
	}
	match, n := "", 0
	for _, z := range candidates {
		if (zoneReq != nil && !zoneReq.Has(z)) || (volumes != nil && !volumes.Has(z)) || (valid != nil && !valid.Has(z)) {
			continue
		}
		if n++; n > 1 {
			return ZoneFlexible
		}
		match = z
	}
	if n == 0 {
		return ZoneNone
	}
	return match
}

// zoneDomains are the zones the pod's required topology constraints on the zone key leave,
// among the zones known (nil if it has none); false if one of them leaves no zone. The domains
// a constraint considers are those the pod's requirements allow.
func (t *topology) zoneDomains(p *corev1.Pod, reqs scheduling.Requirements) (sets.Set[string], bool) {
	key := corev1.LabelTopologyZone
	var out sets.Set[string]
	for _, c := range t.constraints(p) {
		g := c.group
		if !c.required || g.key != key {
			continue
		}
		var domains []string
		for d := range t.domains[key] {
			if r, ok := reqs[key]; !ok || r.Has(d) {
				domains = append(domains, d)
			}
		}
		valid := sets.New[string]()
		switch g.kind {
		case spread:
			low := t.globalMin(g, p, reqs)
			for _, d := range domains {
				if int32(g.counts[d]+1-low) <= g.maxSkew {
					valid.Insert(d)
				}
			}
		case affinity:
			anyMatch := false
			for _, n := range g.counts {
				anyMatch = anyMatch || n > 0
			}
			for _, d := range domains {
				if g.counts[d] > 0 || (!anyMatch && c.selfMatch) {
					valid.Insert(d)
				}
			}
		case antiAffinity:
			for _, d := range domains {
				if g.counts[d] == 0 {
					valid.Insert(d)
				}
			}
		}
		if valid.Len() == 0 {
			return nil, false
		}
		if out == nil {
			out = valid
		} else {
			out = out.Intersection(valid)
		}
	}
	return out, true
}
