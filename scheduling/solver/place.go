package solver

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// place tries a pod with every relaxation in turn and returns "" or why it cannot be placed.
func (s *solver) place(p *corev1.Pod, requests corev1.ResourceList) string {
	defer func() { s.topo.relaxed = 0 }()
	var reason string
	for term := range requiredTerms(p) {
		for _, a := range relaxations(p, s.topo) {
			s.topo.relaxed = a.soft
			reqs := podRequirements(p, term, a.prefs)
			for _, v := range s.in.VolumeRequirements[PodKey(p)] {
				reqs.Add(scheduling.NewRequirement(v.Key, v.Operator, v.Values...))
			}
			if reason = s.placeWith(p, requests, reqs, a.strict); reason == "" {
				return ""
			}
		}
	}
	return reason
}

// placeSeeded tries the pod on the NodeClaim rebuilt from its seed, making it from the
// NodePool if the pod is its first, with the pod's strictest placement only: a pod that
// needs a preference relaxed is placed from scratch, where it may find a node that keeps it.
func (s *solver) placeSeeded(p *corev1.Pod, requests corev1.ResourceList, seed *NodeClaim, c **NodeClaim) bool {
	var pl *pool
	for _, candidate := range s.pools {
		if candidate.name == seed.NodePool {
			pl = candidate
		}
	}
	if pl == nil {
		return false
	}
	first := relaxations(p, s.topo)[0]
	s.topo.relaxed = first.soft
	defer func() { s.topo.relaxed = 0 }()
	reqs := podRequirements(p, 0, first.prefs)
	for _, v := range s.in.VolumeRequirements[PodKey(p)] {
		reqs.Add(scheduling.NewRequirement(v.Key, v.Operator, v.Values...))
	}
	s.podPolicyReqs = map[*pool]scheduling.Requirements{}
	if *c != nil {
		return s.tryClaim(*c, p, requests, reqs, first.strict) == nil
	}
	nc, err := s.newClaim(pl, p, requests, reqs, first.strict)
	if err != nil {
		return false
	}
	// The seed's packing may have chosen a large type for pods that, added one at a time,
	// the growth rule would spread over small ones: the rebuilt NodeClaim may grow up to the
	// price the seed paid without asking it.
	nc.seedPrice = seed.Offering.Price
	s.claims = append(s.claims, nc)
	*c = nc
	return true
}

// attempt is one way of placing a pod: the preferred node affinity terms it keeps, how many
// of its topology preferences it drops, and whether PreferNoSchedule taints still repel it.
type attempt struct {
	prefs  []corev1.PreferredSchedulingTerm
	soft   int
	strict bool
}

// relaxations are a pod's attempts, relaxing one preference at a time as upstream Karpenter
// does: preferred pod affinity terms, then preferred anti-affinity terms, then preferred node
// affinity terms (lowest weight first, then each alone), then ScheduleAnyway spreads, and
// last the PreferNoSchedule taints.
func relaxations(p *corev1.Pod, t *topology) []attempt {
	prefs := t.preferredTerms(p)
	affinity, all := t.preferences(p)
	var out []attempt
	for k := 0; k <= affinity; k++ {
		out = append(out, attempt{prefs: prefs, soft: k, strict: true})
	}
	// The lightest preferred node affinity terms go first, keeping as many of the heavier
	// ones together as can be met; then each term alone, heaviest first, as upstream tries
	// them (its terms are ORed): a heavy term nothing can meet does not cost a lighter one
	// that could be; then none.
	for d := 1; d < len(prefs); d++ {
		out = append(out, attempt{prefs: prefs[:len(prefs)-d], soft: affinity, strict: true})
	}
	for i := 1; i < len(prefs); i++ {
		out = append(out, attempt{prefs: prefs[i : i+1], soft: affinity, strict: true})
	}
	if len(prefs) > 0 {
		out = append(out, attempt{soft: affinity, strict: true})
	}
	for k := affinity + 1; k <= all; k++ {
		out = append(out, attempt{soft: k, strict: true})
	}
	return append(out, attempt{soft: all, strict: false})
}

func (s *solver) placeWith(p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) string {
	var reasons []string
	s.podPolicyReqs = map[*pool]scheduling.Requirements{}
	for _, e := range s.nodes {
		if err := s.tryExisting(e, p, requests, reqs, strict); err == nil {
			return ""
		}
	}
	if g := s.topo.hostnameGate(p); g != nil {
		if s.tryOpenClaims(g, p, requests, reqs, strict) {
			return ""
		}
	} else {
		for _, c := range s.claims {
			if err := s.tryClaim(c, p, requests, reqs, strict); err == nil {
				return ""
			}
		}
	}
	for _, pl := range s.pools {
		c, err := s.newClaim(pl, p, requests, reqs, strict)
		if err == nil {
			s.claims = append(s.claims, c)
			return ""
		}
		reasons = append(reasons, fmt.Sprintf("nodepool %s: %v", pl.name, err))
	}
	if len(s.pools) == 0 {
		reasons = append(reasons, "no NodePool")
	}
	return strings.Join(reasons, "; ")
}

// tryOpenClaims tries the pod on the NodeClaims the gate leaves open, in creation order, as
// the full scan would (the others refuse it), dropping those that closed.
func (s *solver) tryOpenClaims(g *group, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) bool {
	g.open = append(g.open, s.claims[g.synced:]...)
	g.synced = len(s.claims)
	kept := g.open[:0]
	placed := false
	for i, c := range g.open {
		if placed {
			kept = append(kept, g.open[i:]...)
			break
		}
		if g.closes(c.hostCounts) {
			continue
		}
		if err := s.tryClaim(c, p, requests, reqs, strict); err == nil {
			placed = true
		}
		kept = append(kept, c)
	}
	clear(g.open[len(kept):])
	g.open = kept
	return placed
}
