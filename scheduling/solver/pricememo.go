package solver

import (
	"fmt"
	"sort"
	"strings"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// memoize turns typePrices and the refusal memo on; the property test solves with them off as
// well and requires the same result.
var memoize = true

// priceMemoMax bounds the memo: past it, it is dropped and built again.
const priceMemoMax = 4096

// typePrices is, by instance type index, the price of each of the pool's types' cheapest
// offering that reqs and filters allow, -1 for a type reqs rule out (on any of the pool's type
// keys) or with no such offering. Solving a mixed workload on a large catalog asks the same
// question of every type for most pods tried on most NodeClaims (growth's best cover, the
// plan's type filter), with few distinct requirements: the answer is kept by the requirements
// on the pool's type keys and the filters. nil when it cannot be kept: capacity reservations
// (their room changes during the solve) decide offerings.
func (s *solver) typePrices(pl *pool, reqs scheduling.Requirements, filters []*offerFilter) []float64 {
	if !memoize || len(s.reserved) > 0 {
		return nil
	}
	key, keys := typeKey(pl, reqs, filters)
	if v, ok := s.priceMemo[key]; ok {
		return v
	}
	out := make([]float64, s.typeCount)
	for i := range out {
		out[i] = -1
	}
	sel := s.intern.sel(reqs)
	checks, exact := s.intern.checks(reqs, keys)
	for _, t := range pl.types {
		if t.check(reqs, keys, checks, exact) != nil {
			continue
		}
		if o, ok := t.cheapestOfferingSel(sel, filters); ok {
			out[t.idx] = o.Price
		}
	}
	if s.priceMemo == nil || len(s.priceMemo) >= priceMemoMax {
		s.priceMemo = map[string][]float64{}
	}
	s.priceMemo[key] = out
	return out
}

// typeKey says what decides which of the pool's types requirements and filters allow and at
// what price: the requirements on the pool's type keys and the filters. It returns those keys.
func typeKey(pl *pool, reqs scheduling.Requirements, filters []*offerFilter) (string, []string) {
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		if pl.typeKeys.Has(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(pl.name)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(reqs[k].String())
	}
	for _, f := range filters {
		fmt.Fprintf(&b, "\x00%p", f)
	}
	return b.String(), keys
}

// refusalKey is what decides whether a NodeClaim's types take a pod once its requirements are
// narrowed (filterTypes, grow): the NodeClaim as it is (its pods and whether it froze), the
// pod's requests and the narrowed requirements and filters.
type refusalKey struct {
	c               *NodeClaim
	pods            int
	frozen, packing bool
	cpu, mem, count int64
	types           string
}

// refusalMax bounds the refusal memo: past it, it is dropped and built again.
const refusalMax = 1 << 16

// refusal is the key of a plan's type filtering and growth, and false when the outcome may
// depend on more than it holds: a NodePool limit (what is left of it moves), a policy type
// filter, extended resources, or capacity reservations. A NodeClaim refuses a pod with the
// same key for the same reason: its types, requests and price only change when it takes a
// pod, which the key counts. Solving a large catalog, the pods of a workload are refused by
// the same frozen NodeClaims thousands of times; this answers those at the cost of the key.
func (s *solver) refusal(pl *claimPlan) (refusalKey, bool) {
	c := pl.c
	if !memoize || c.pool.remaining != nil || pl.fresh != nil || len(pl.typeFilters) > 0 || len(pl.podReq.ext) > 0 || len(s.reserved) > 0 {
		return refusalKey{}, false
	}
	key, _ := typeKey(c.pool, pl.merged, pl.filters)
	return refusalKey{c: c, pods: len(c.Pods), frozen: c.frozen, packing: s.packing, cpu: pl.podReq.cpu, mem: pl.podReq.mem, count: pl.podReq.pods, types: key}, true
}
