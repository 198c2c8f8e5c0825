package solver

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// growthTolerance is how much more than the best single-type cover a NodeClaim may cost when a
// pod makes it grow into a larger type.
const growthTolerance = 1.02

// standalonePrice is what a NodeClaim of the pod's own would cost: the cheapest compatible
// type that fits the pod and the NodePool's DaemonSets.
func (s *solver) standalonePrice(c *NodeClaim, p *corev1.Pod, podReqs scheduling.Requirements, filters []*offerFilter,
	typeFilters []func(*cloudprovider.InstanceType) bool, pod res) float64 {
	key := standaloneKey{pod: p, pool: c.pool}
	if v, ok := s.standalone[key]; ok {
		return v
	}
	reqs := c.pool.reqs.Merged(podReqs)
	need := toRes(c.pool.overhead).plus(pod)
	var keys []string
	for k := range reqs {
		if c.pool.typeKeys.Has(k) {
			keys = append(keys, k)
		}
	}
	best := math.Inf(1)
	sel := s.intern.sel(reqs)
	checks, exact := s.intern.checks(reqs, keys)
	for _, t := range c.pool.types {
		if ok, _ := need.fitsIn(t.alloc); !ok || t.check(reqs, keys, checks, exact) != nil || !allowedType(t, typeFilters) {
			continue
		}
		if o, ok := t.cheapestOfferingSel(sel, filters); ok && o.Price < best {
			best = o.Price
		}
	}
	s.standalone[key] = best
	return best
}

// efficientTypes keeps the types whose fractional cover of the requests costs at most
// growthTolerance times the best compatible type's.
func (s *solver) efficientTypes(c *NodeClaim, reqs scheduling.Requirements, types []*instanceType, total res, typeFilters []func(*cloudprovider.InstanceType) bool) []*instanceType {
	cover := func(alloc res, p float64) float64 {
		if alloc.cpu <= 0 || alloc.mem <= 0 {
			return 0
		}
		return p * max(float64(total.cpu)/float64(alloc.cpu), float64(total.mem)/float64(alloc.mem))
	}
	var keys []string
	for k := range reqs {
		if c.pool.typeKeys.Has(k) {
			keys = append(keys, k)
		}
	}
	// Each type's cheapest allowed price: kept by typePrices when it can be (no policy type
	// filter), else found type by type. The kept types already meet reqs; the pool's others
	// are checked against them.
	var prices []float64
	if len(typeFilters) == 0 {
		prices = s.typePrices(c.pool, reqs, c.filters)
	}
	sel := s.intern.sel(reqs)
	checks, exact := s.intern.checks(reqs, keys)
	priceOf := func(t *instanceType, check bool) (float64, bool) {
		if prices != nil {
			return prices[t.idx], prices[t.idx] >= 0
		}
		if check && (t.check(reqs, keys, checks, exact) != nil || !allowedType(t, typeFilters)) {
			return 0, false
		}
		o, ok := t.cheapestOfferingSel(sel, c.filters)
		return o.Price, ok
	}
	best := 0.0
	for _, o := range c.pool.types {
		if p, ok := priceOf(o, true); ok {
			if v := cover(o.alloc, p); v > 0 && (best == 0 || v < best) {
				best = v
			}
		}
	}
	var out []*instanceType
	for _, t := range types {
		// A type that even every pod still to come could not fill is not efficient, whatever
		// its price per unit: most of it would stay idle.
		if total.cpu+s.aheadCPU < t.alloc.cpu && total.mem+s.aheadMem < t.alloc.mem {
			continue
		}
		if p, ok := priceOf(t, false); ok && cover(t.alloc, p) <= best*growthTolerance {
			out = append(out, t)
		}
	}
	return out
}
