package solver

import (
	"sort"
	"strconv"
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
		b.WriteString("\x00f")
		b.WriteString(strconv.Itoa(f.id))
	}
	return b.String(), keys
}

// refusalKey is what decides whether a NodeClaim's types take a pod once its requirements are
// narrowed (filterTypes, grow): the NodeClaim as it is (its pods and whether it froze), the
// pod's requests and the narrowed requirements on the pool's type keys (by fingerprint: a
// collision could only refuse a pod a NodeClaim would take, never place one where it may not
// go) and filters.
type refusalKey struct {
	c               *NodeClaim
	pods            int
	frozen, packing bool
	cpu, mem, count int64
	reqs            [2]uint64
	filters         string
}

// refusalMax bounds the refusal memo: past it, it is dropped and built again.
const refusalMax = 1 << 16

// memoizable says whether a plan's type filtering and growth outcome is decided by its
// refusalKey alone: not with a NodePool limit (what is left of it moves), a policy type filter,
// extended resources or capacity reservations. A NodeClaim refuses a pod with the same key for
// the same reason: its types, requests and price only change when it takes a pod, which the
// key counts. Solving a large catalog, the pods of a workload are refused by the same frozen
// NodeClaims thousands of times; the memo answers those at the cost of the key.
func (s *solver) memoizable(pl *claimPlan) bool {
	return memoize && pl.c.pool.remaining == nil && pl.fresh == nil && len(pl.typeFilters) == 0 && len(pl.podReq.ext) == 0 && len(s.reserved) == 0
}

// refusalKey is the plan's memo key (memoizable).
func (s *solver) refusalKey(pl *claimPlan) refusalKey {
	c := pl.c
	var h1, h2 uint64
	for k, r := range pl.merged {
		if !c.pool.typeKeys.Has(k) {
			continue
		}
		// Summed: the map's order does not matter; the key is in the fingerprint.
		a, b := r.Fingerprint()
		h1, h2 = h1+a, h2+(b^0x5bd1e995)*0x9E3779B97F4A7C15
	}
	var filters strings.Builder
	for _, f := range pl.filters {
		filters.WriteString(strconv.Itoa(f.id))
		filters.WriteByte(',')
	}
	return refusalKey{c: c, pods: len(c.Pods), frozen: c.frozen, packing: s.packing, cpu: pl.podReq.cpu, mem: pl.podReq.mem, count: pl.podReq.pods,
		reqs: [2]uint64{h1, h2}, filters: filters.String()}
}

// stamp is the NodeClaim's state as the refusal memo tells it apart: its pods and whether it
// froze, never 0.
func (c *NodeClaim) stamp() int {
	st := 2*len(c.Pods) + 1
	if c.frozen {
		st++
	}
	return st*2 + 1
}
