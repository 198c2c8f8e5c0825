package solver

import (
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// PricePerHour is the total price of the chosen offerings of the NodeClaims.
func (r *Result) PricePerHour() float64 {
	total := 0.0
	for _, c := range r.NodeClaims {
		total += c.Offering.Price
	}
	return total
}

// option is an instance type at its cheapest allowed offering, as cpu and memory per hour.
type option struct {
	cpu, mem, price float64
}

// lowerBound is what the pods placed on new NodeClaims would cost at best: for each group of
// pods that can use the same instance types and offerings, the cheapest mix of those types,
// fractional counts allowed, whose cpu and memory cover the group's total requests. It ignores
// per-node overheads and packing, so no solution can be cheaper than it for the same groups.
func (s *solver) lowerBound(placed []*NodeClaim) float64 {
	type groupTotals struct {
		cpu, mem float64
		options  []option
	}
	groups := map[string]*groupTotals{}
	var order []string
	for _, c := range placed {
		for _, p := range c.Pods {
			reqs := podRequirements(p, 0, nil)
			key := c.pool.name + "|" + p.Namespace + "|" + reqsKey(reqs) + "|" + extKey(s.requests.Of(p))
			g, ok := groups[key]
			if !ok {
				g = &groupTotals{options: s.options(c.pool, p, reqs)}
				groups[key] = g
				order = append(order, key)
			}
			r := s.resOf(p, s.requests.Of(p))
			g.cpu += float64(r.cpu) / 1000
			g.mem += float64(r.mem)
		}
	}
	sort.Strings(order)
	total := 0.0
	for _, k := range order {
		g := groups[k]
		total += cheapestCover(g.cpu, g.mem, g.options)
	}
	return total
}

func (s *solver) options(pl *pool, p *corev1.Pod, reqs scheduling.Requirements) []option {
	merged := pl.reqs.Merged(reqs)
	var keys []string
	for _, k := range merged.Keys() {
		if pl.typeKeys.Has(k) {
			keys = append(keys, k)
		}
	}
	var filters []*offerFilter
	var typeFilters []func(*cloudprovider.InstanceType) bool
	if pc := s.policy(p, pl); pc != nil {
		if f := s.offerFilter(pc); f != nil {
			filters = append(filters, f)
		}
		if pc.AllowType != nil {
			typeFilters = append(typeFilters, pc.AllowType)
		}
	}
	podReq := s.resOf(p, s.requests.Of(p))
	var out []option
	for _, t := range pl.types {
		if t.incompatible(merged, keys) != nil || !allowedType(t, typeFilters) {
			continue
		}
		if ok, _ := podReq.fitsIn(t.alloc); !ok {
			continue
		}
		if o, ok := t.cheapestOffering(merged, filters); ok {
			out = append(out, option{cpu: float64(t.alloc.cpu) / 1000, mem: float64(t.alloc.mem), price: o.Price})
		}
	}
	return out
}

// cheapestCover solves min Σ x·price subject to Σ x·cpu ≥ cpu, Σ x·mem ≥ mem, x ≥ 0 (0 when
// no type has both). With two constraints an optimum uses at most two types (coverBasis).
func cheapestCover(cpu, mem float64, opts []option) float64 {
	best, _, _ := coverBasis(cpu, mem, opts)
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

func reqsKey(rs scheduling.Requirements) string {
	var b strings.Builder
	for _, k := range rs.Keys() {
		b.WriteString(rs[k].String())
		b.WriteByte(';')
	}
	return b.String()
}

func extKey(requests corev1.ResourceList) string {
	var names []string
	for k := range requests {
		switch k {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods:
		default:
			names = append(names, string(k))
		}
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}
