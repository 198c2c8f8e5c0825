package solver

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// claimPlan is what adding a pod to a NodeClaim would make of it. planClaim builds it in named
// steps, each of which may refuse the pod; commit applies it.
type claimPlan struct {
	c        *NodeClaim
	p        *corev1.Pod
	requests corev1.ResourceList
	strict   bool
	// reqs are the pod's requirements, with its policy's once applyPolicy ran; merged are the
	// NodeClaim's narrowed by them and by the topology domains chosen.
	reqs, merged scheduling.Requirements
	chosen       map[string]string
	kept         []*instanceType
	filters      []*offerFilter
	typeFilters  []func(*cloudprovider.InstanceType) bool
	// fresh is a type filter the NodeClaim's remaining types have not been through yet.
	fresh    func(*cloudprovider.InstanceType) bool
	applied  []*Constraints
	podReq   res
	total    res
	maxAlloc res
	price    float64
	cheapest *instanceType
	ports    []string
	// relaxed: a minValues was lowered to what the kept types offer (MinValuesBestEffort).
	relaxed bool
}

// tryClaim adds the pod to the NodeClaim if it fits.
func (s *solver) tryClaim(c *NodeClaim, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) error {
	if !c.roomFor(s.resOf(p, requests)) {
		// fit would refuse it: most tries of a large solve end here, before a plan is built.
		return errNoRoom
	}
	plan, err := s.planClaim(c, p, requests, reqs, strict)
	if err != nil {
		return err
	}
	s.commit(&plan)
	return nil
}

// planClaim plans adding the pod to the NodeClaim: whether it fits at all, what the policy
// adds, the requirements and topology domains it narrows the NodeClaim to, which instance types
// remain, whether growing into them is worth it, and whether minValues still hold. The plan's
// kept types are in the solver's buffer until the next plan: commit it or drop it first.
func (s *solver) planClaim(c *NodeClaim, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) (claimPlan, error) {
	pl := claimPlan{c: c, p: p, requests: requests, strict: strict, reqs: reqs,
		filters: c.filters, typeFilters: c.typeFilters, applied: c.applied}
	if err := s.fit(&pl); err != nil {
		return claimPlan{}, err
	}
	s.applyPolicy(&pl)
	if err := s.narrow(&pl); err != nil {
		return claimPlan{}, err
	}
	pl.ports = hostPorts(p)
	if conflict := portsConflict(c.ports, pl.ports); conflict != "" {
		return claimPlan{}, fmt.Errorf("host port %s in use", conflict)
	}
	// A refusal memo lookup builds a key; it is only worth it once the NodeClaim, as it is
	// now, has refused a pod (memoAt).
	memo, stamp := s.memoizable(&pl), c.stamp()
	var key refusalKey
	if memo && c.memoAt == stamp {
		key = s.refusalKey(&pl)
		if err, ok := s.refusals[key]; ok {
			return claimPlan{}, err
		}
	}
	err := s.filterTypes(&pl)
	if err == nil {
		err = s.grow(&pl)
	}
	if err != nil {
		if memo {
			if key.c == nil {
				key = s.refusalKey(&pl)
			}
			if s.refusals == nil || len(s.refusals) >= refusalMax {
				s.refusals = map[refusalKey]error{}
			}
			s.refusals[key] = err
			c.memoAt = stamp
		}
		return claimPlan{}, err
	}
	if err := minValues(pl.merged, pl.kept); err != nil {
		if !s.in.MinValuesBestEffort {
			return claimPlan{}, err
		}
		pl.merged, pl.relaxed = relaxMinValues(pl.merged, pl.kept), true
	}
	return pl, nil
}

// fit refuses, before any other work, a pod the NodeClaim cannot take whatever its types: a
// taint it does not tolerate, no room in the largest remaining type (or in the cheapest, once
// the NodeClaim is frozen), or a hostname constraint its pods already break.
func (s *solver) fit(pl *claimPlan) error {
	c, p := pl.c, pl.p
	if t := scheduling.Untolerated(p, c.pool.taints, pl.strict); t != nil {
		return untolerated{t}
	}
	pl.podReq = s.resOf(p, pl.requests)
	pl.total = c.req.plus(pl.podReq)
	if ok, r := (res{cpu: pl.total.cpu, mem: pl.total.mem, pods: pl.total.pods}).fitsIn(c.maxAlloc); !ok {
		return notEnough(r)
	}
	if c.frozen {
		if ok, r := pl.total.fitsIn(c.cheapest.alloc); !ok {
			return notEnoughOn{r, c.cheapest}
		}
	}
	return s.topo.precheckHostname(p, pl.strict, c.hostCounts)
}

// errNoRoom is tryClaim's refusal of a pod with no room in the NodeClaim's largest type (or,
// frozen, its cheapest); planClaim's fit says which resource.
var errNoRoom = errors.New("no room for the pod's cpu, memory or pods")

// roomFor is fit's room check on cpu, memory and pods alone, without building a plan.
func (c *NodeClaim) roomFor(pod res) bool {
	cpu, mem, pods := c.req.cpu+pod.cpu, c.req.mem+pod.mem, c.req.pods+pod.pods
	if cpu > c.maxAlloc.cpu || mem > c.maxAlloc.mem || pods > c.maxAlloc.pods {
		return false
	}
	if c.frozen {
		a := c.cheapest.alloc
		return cpu <= a.cpu && mem <= a.mem && pods <= a.pods
	}
	return true
}

// applyPolicy adds the pod's policy constraints: its requirements, and the first time the
// NodeClaim meets them, their offering and type filters (pods of one namespace share their
// Constraints, so a NodeClaim takes each once).
func (s *solver) applyPolicy(pl *claimPlan) {
	pc := s.policy(pl.p, pl.c.pool)
	if pc == nil {
		return
	}
	pl.reqs = s.withPolicy(pl.reqs, pl.c.pool, pc)
	if slices.Contains(pl.applied, pc) {
		return
	}
	pl.applied = append(append([]*Constraints(nil), pl.applied...), pc)
	if f := s.offerFilter(pc); f != nil && !slices.Contains(pl.filters, f) {
		pl.filters = append(append([]*offerFilter(nil), pl.filters...), f)
	}
	if pc.AllowType != nil {
		pl.typeFilters = append(append([]func(*cloudprovider.InstanceType) bool(nil), pl.typeFilters...), pc.AllowType)
		pl.fresh = pc.AllowType
	}
}

// narrow merges the pod's requirements into the NodeClaim's and chooses its topology domains.
// Keys the instance types define are checked against the types later (filterTypes); the
// others are the NodePool's labels and requirements, or absent.
func (s *solver) narrow(pl *claimPlan) error {
	c := pl.c
	own := scheduling.Requirements{}
	for k, r := range pl.reqs {
		if !c.pool.typeKeys.Has(k) {
			own[k] = r
		}
	}
	if err := c.Requirements.Compatible(own); err != nil {
		return fmt.Errorf("incompatible requirements: %v", err)
	}
	// A key the NodeClaim already narrowed to values the pod excludes (a Spot NodeClaim for a
	// pod pinned to on-demand) rules it out before its types are looked at.
	for k, r := range pl.reqs {
		if cr, ok := c.Requirements[k]; ok && c.pool.typeKeys.Has(k) && !cr.MayOverlap(r) {
			return fmt.Errorf("incompatible requirements: %s, but the NodeClaim has %s", r, cr)
		}
	}
	merged := c.Requirements.Merged(pl.reqs)
	chosen, err := s.topo.choose(pl.p, pl.strict, pl.reqs, func(key string) []string {
		if key == corev1.LabelHostname {
			return []string{c.Hostname}
		}
		return c.domains(s.intern, key, merged)
	})
	if err != nil {
		return err
	}
	for k, v := range chosen {
		if k != corev1.LabelHostname {
			merged.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
	}
	pl.merged, pl.chosen = merged, chosen
	return nil
}

// filterTypes keeps the NodeClaim's types that meet the narrowed requirements, fit the pods,
// stay within the NodePool's limits, pass the policy's new type filter and have an offering
// the filters allow; it refuses the pod when none is left, with the reason of the type that
// got furthest.
func (s *solver) filterTypes(pl *claimPlan) error {
	c, merged := pl.c, pl.merged
	// Only keys this pod (or the topology) narrows need checking again: the remaining types
	// already match the rest.
	var narrowed []string
	for k := range pl.reqs {
		if c.pool.typeKeys.Has(k) {
			narrowed = append(narrowed, k)
		}
	}
	for k := range pl.chosen {
		if c.pool.typeKeys.Has(k) {
			narrowed = append(narrowed, k)
		}
	}
	limit := c.pool.remaining
	if limit != nil && c.reserved != nil {
		limit = limit.DeepCopy()
		scheduling.AddResources(limit, c.reserved)
	}
	return s.filterTypesWith(pl, narrowed, limit, s.typePrices(c.pool, merged, pl.filters))
}

// filterTypesWith is filterTypes over the narrowed keys and the limit left, with the types'
// prices kept by typePrices (nil: found type by type).
func (s *solver) filterTypesWith(pl *claimPlan, narrowed []string, limit corev1.ResourceList, prices []float64) error {
	c, merged := pl.c, pl.merged
	kept := s.keptBuf[:0]
	// The reason reported is the one of the type that got furthest: requirements, resources,
	// limits, policy, offerings. It is formatted only if read.
	miss := noTypeFits{c: c, requests: pl.requests, stage: -1}
	note := func(stage int, t *instanceType, r corev1.ResourceName, req *scheduling.Requirement) {
		if stage > miss.stage {
			miss.stage, miss.t, miss.r, miss.req = stage, t, r, req
		}
	}
	// With the types' prices under these requirements and filters kept (typePrices), a type
	// they rule out is skipped without its reason, which is found again below if no type is
	// left.
	mergedSel := s.intern.sel(merged)
	checks, exact := s.intern.checks(merged, narrowed)
	for _, t := range c.types {
		if prices != nil && prices[t.idx] < 0 {
			continue
		}
		if r := t.check(merged, narrowed, checks, exact); r != nil {
			note(missRequirement, t, "", r)
			continue
		}
		if ok, r := pl.total.fitsIn(t.alloc); !ok {
			note(missResources, t, r, nil)
			continue
		}
		if limit != nil {
			if ok, r := withinLimits(t.it.Capacity, limit); !ok {
				note(missLimit, t, r, nil)
				continue
			}
		}
		if pl.fresh != nil && !pl.fresh(t.it) {
			note(missPolicy, t, "", nil)
			continue
		}
		var price float64
		if prices != nil {
			price = prices[t.idx]
		} else {
			o, ok := t.cheapestOfferingSel(mergedSel, pl.filters)
			if !ok {
				note(missOffering, t, "", nil)
				continue
			}
			price = o.Price
		}
		kept = append(kept, t)
		if pl.cheapest == nil || price < pl.price {
			pl.cheapest, pl.price = t, price
		}
		pl.maxAlloc = pl.maxAlloc.largest(t.alloc)
	}
	s.keptBuf = kept[:0]
	if len(kept) == 0 {
		if prices != nil {
			// The reason: the same filter without the kept prices.
			return s.filterTypesWith(pl, narrowed, limit, nil)
		}
		miss.merged, miss.policy = merged, s.policy(pl.p, c.pool)
		return miss
	}
	pl.kept = kept
	return nil
}

// grow decides whether the NodeClaim may grow into a costlier type for the pod: when the
// increase costs no more than a node of its own for the pod would, or when the type covers
// this mix of cpu and memory about as cheaply as the best type would. Otherwise premium types
// are dropped, and if none is left the NodeClaim freezes and the pod goes elsewhere. While
// packing (pack.go), the target type decides instead.
func (s *solver) grow(pl *claimPlan) error {
	c := pl.c
	if s.packing || s.in.GrowFreely || len(c.Pods) == 0 || pl.price <= c.price || pl.price <= c.seedPrice ||
		pl.price-c.price <= s.standalonePrice(c, pl.p, pl.reqs, pl.filters, pl.typeFilters, pl.podReq) {
		return nil
	}
	efficient := s.efficientTypes(c, pl.merged, pl.kept, pl.total, pl.typeFilters)
	if len(efficient) == 0 {
		c.frozen = true
		return errGrowth
	}
	mergedSel := s.intern.sel(pl.merged)
	pl.kept, pl.cheapest, pl.price, pl.maxAlloc = efficient, nil, 0, res{}
	for _, t := range pl.kept {
		if o, ok := t.cheapestOfferingSel(mergedSel, pl.filters); ok && (pl.cheapest == nil || o.Price < pl.price) {
			pl.cheapest, pl.price = t, o.Price
		}
		pl.maxAlloc = pl.maxAlloc.largest(t.alloc)
	}
	return nil
}

// minValues refuses a plan that leaves fewer distinct values of a key than a requirement's
// minValues asks for.
func minValues(merged scheduling.Requirements, kept []*instanceType) error {
	for _, r := range merged {
		if r.MinValues == nil {
			continue
		}
		if n := distinctValues(r, kept); n < *r.MinValues {
			return fmt.Errorf("minValues %d on %s: only %d values would remain", *r.MinValues, r.Key, n)
		}
	}
	return nil
}

// distinctValues counts the values of the requirement's key that the kept types offer and
// the requirement allows.
func distinctValues(r *scheduling.Requirement, kept []*instanceType) int {
	distinct := sets.New[string]()
	for _, t := range kept {
		if v, ok := t.it.Labels[r.Key]; ok && r.Has(v) {
			distinct.Insert(v)
		}
	}
	return distinct.Len()
}

// relaxMinValues lowers each minValues the kept types cannot meet to the number of distinct
// values they offer (upstream's MIN_VALUES_POLICY=BestEffort); the requirements changed are
// copies, merged itself is left alone.
func relaxMinValues(merged scheduling.Requirements, kept []*instanceType) scheduling.Requirements {
	out := make(scheduling.Requirements, len(merged))
	for k, r := range merged {
		out[k] = r
		if r.MinValues == nil {
			continue
		}
		if n := distinctValues(r, kept); n < *r.MinValues {
			cp := *r
			cp.MinValues = &n
			out[k] = &cp
		}
	}
	return out
}

// errGrowth refuses a pod that would make a NodeClaim grow into a type that covers it too
// dearly.
var errGrowth = fmt.Errorf("growing would need a type costing over %.0f%% more than the best cover", (growthTolerance-1)*100)

// The refusals below are formatted only when read: most are of NodeClaims a pod is merely
// tried on, and formatting them was a large share of big solves.

// notEnoughOn refuses a pod a frozen NodeClaim's cheapest type has no room for.
type notEnoughOn struct {
	r corev1.ResourceName
	t *instanceType
}

func (e notEnoughOn) Error() string { return fmt.Sprintf("not enough %s on %s", e.r, e.t.it.Name) }

// untolerated refuses a pod that does not tolerate a taint.
type untolerated struct{ t *corev1.Taint }

func (e untolerated) Error() string {
	return fmt.Sprintf("taint %s not tolerated", scheduling.TaintString(e.t))
}

// How far an instance type got in filterTypes.
const (
	missRequirement = iota
	missResources
	missLimit
	missPolicy
	missOffering
)

// noTypeFits refuses a pod when no remaining type of the NodeClaim takes it, naming what
// stopped the type that got furthest.
type noTypeFits struct {
	c        *NodeClaim
	requests corev1.ResourceList
	stage    int
	t        *instanceType
	r        corev1.ResourceName
	req      *scheduling.Requirement
	merged   scheduling.Requirements
	// policy is the pod's policy on the NodePool, nil when it has none.
	policy *Constraints
}

func (e noTypeFits) Error() string {
	var why string
	switch e.stage {
	case missRequirement:
		why = fmt.Sprintf("requires %s, but %s does not offer it", e.req, e.t.it.Name)
	case missResources:
		why = fmt.Sprintf("not enough %s", e.r)
	case missLimit:
		why = fmt.Sprintf("limit %s would be exceeded", e.r)
	case missPolicy:
		why = fmt.Sprintf("instance type %s is refused by %s", e.t.it.Name, e.policy.Source)
	case missOffering:
		why = fmt.Sprintf("no available offering of %s matches %s and %s%s", e.t.it.Name,
			reqString(e.merged, karpv1.LabelTopologyZone), reqString(e.merged, karpv1.CapacityTypeLabelKey), policyNote(e.policy))
	}
	all := e.c.Requests.DeepCopy()
	scheduling.AddResources(all, e.requests)
	return fmt.Sprintf("no instance type fits %s (%s)", resourcesString(all), why)
}
