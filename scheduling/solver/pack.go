package solver

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// Packing. First-fit in size order places each pod on the first node that takes it, which is
// right for pods with topology constraints (their spread decides where they go) but leaves
// the shape of new nodes to chance: a NodeClaim that takes a memory-heavy pod early becomes a
// memory-rich type and then fills up with cpu-heavy pods until its cpu runs out, with memory
// paid for and idle. The fractional lower bound instead mixes instance shapes so that every
// resource bought is used.
//
// So pods that nothing constrains but their requests and node requirements ("free" pods: no
// topology spread, no pod affinity or anti-affinity of their own, selected by no other pod's,
// no host ports, one node affinity term, no preferences) are placed after the others, node by
// node rather than pod by pod:
//
//  1. on existing and in-flight nodes, first fit, as before;
//  2. into the room left on the NodeClaims the constrained pods opened, without making any of
//     them a costlier type;
//  3. on new NodeClaims, each filled for a target type (see target): while many pods are
//     left, a type of the cheapest mix that covers them (the fractional relaxation of the
//     lower bound names at most two), the one with more memory per cpu first, so that the
//     memory-heavy pods go where cpu-heavy ones balance them; near the end, the type the last
//     pods fill best. A NodeClaim takes, each time, the pod that brings its memory per cpu
//     closest to the target's (the memory-richest pod while it is short of memory, the
//     cpu-richest otherwise, larger first), until no pod fits the target's allocatable, and
//     then launches the cheapest type that holds what it took.
//
// Every placement goes through the same checks as first fit (planClaim), so the result
// honours the same constraints; a pod that none of this places is placed by first fit with
// all its relaxations.

// packable reports whether a pod can be placed by packing: only its requests and node
// requirements decide where it may go.
func (s *solver) packable(p *corev1.Pod) bool {
	if len(s.topo.constraints(p)) > 0 || len(hostPorts(p)) > 0 || requiredTerms(p) > 1 || len(s.topo.preferredTerms(p)) > 0 {
		return false
	}
	for _, g := range s.topo.groups {
		if g.matches(p) {
			return false
		}
	}
	return true
}

// bucket holds free pods that are interchangeable: same requests, requirements, tolerations
// and policy constraints.
type bucket struct {
	pods []*corev1.Pod
	next int
	req  res
	reqs scheduling.Requirements
	// group identifies the pods that share instance types and offerings (all but the requests).
	group string
	// failed is the NodeClaim (by sequence) on which the bucket's next pod was refused.
	failed int
}

func (b *bucket) left() int { return len(b.pods) - b.next }

type packer struct {
	s        *solver
	requests map[*corev1.Pod]corev1.ResourceList
	buckets  []*bucket
	// totals are the cpu and memory of the pods left, by bucket group.
	totals map[string]*[2]float64
	seq    int
	// Buffers of target and dryFill, reused from one NodeClaim to the next.
	dry   []dryBucket
	cands []candidate
	opts  []option
}

// pack places the free pods; it returns those it could not place.
func (s *solver) pack(pods []*corev1.Pod, requests map[*corev1.Pod]corev1.ResourceList) []*corev1.Pod {
	pk := &packer{s: s, requests: requests, totals: map[string]*[2]float64{}}
	byKey := map[string]*bucket{}
	for _, p := range pods {
		reqs := podRequirements(p, 0, nil)
		for _, v := range s.in.VolumeRequirements[PodKey(p)] {
			reqs.Add(scheduling.NewRequirement(v.Key, v.Operator, v.Values...))
		}
		r := s.resOf(p, requests[p])
		if s.placeOnExisting(p, requests[p], reqs) {
			s.aheadCPU, s.aheadMem = s.aheadCPU-r.cpu, s.aheadMem-r.mem
			continue
		}
		group := pk.groupKey(p, reqs)
		key := group + "|" + resourcesString(requests[p])
		b, ok := byKey[key]
		if !ok {
			b = &bucket{req: r, reqs: reqs, group: group, failed: -1}
			byKey[key] = b
			pk.buckets = append(pk.buckets, b)
		}
		b.pods = append(b.pods, p)
		t := pk.totals[group]
		if t == nil {
			t = &[2]float64{}
			pk.totals[group] = t
		}
		t[0], t[1] = t[0]+float64(r.cpu), t[1]+float64(r.mem)
	}
	if len(pk.buckets) == 0 {
		return nil
	}
	s.packing = true
	defer func() { s.packing = false }()
	for _, c := range slices.Clone(s.claims) {
		if c.cheapest != nil {
			pk.fill(c, c.cheapest, false)
		}
	}
	for _, pl := range s.pools {
		refused := map[*bucket]bool{}
		for {
			b := pk.seedFor(refused)
			if b == nil {
				break
			}
			p := b.pods[b.next]
			s.podPolicyReqs = map[*pool]scheduling.Requirements{}
			c, err := s.newClaim(pl, p, requests[p], b.reqs, true)
			if err != nil {
				refused[b] = true
				continue
			}
			s.claims = append(s.claims, c)
			pk.took(b)
			pk.fill(c, pk.target(c, b.group), true)
		}
	}
	var left []*corev1.Pod
	for _, b := range pk.buckets {
		left = append(left, b.pods[b.next:]...)
	}
	return left
}

// placeOnExisting tries a free pod on the existing and in-flight nodes, first fit.
func (s *solver) placeOnExisting(p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements) bool {
	for _, e := range s.nodes {
		if s.tryExisting(e, p, requests, reqs, true) == nil {
			return true
		}
	}
	return false
}

// groupKey identifies what, besides requests, decides where a free pod may go.
func (pk *packer) groupKey(p *corev1.Pod, reqs scheduling.Requirements) string {
	var b strings.Builder
	b.WriteString(reqsKey(reqs))
	b.WriteByte('|')
	b.WriteString(extKey(pk.s.requests.Of(p)))
	b.WriteByte('|')
	for _, t := range p.Spec.Tolerations {
		fmt.Fprintf(&b, "%s=%s:%s:%s", t.Key, t.Value, t.Operator, t.Effect)
		if t.TolerationSeconds != nil {
			fmt.Fprintf(&b, ":%d", *t.TolerationSeconds)
		}
		b.WriteByte(';')
	}
	if pk.s.in.Policy != nil {
		// Policies answer per pod and NodePool; pods with the same answers (the hook shares
		// Constraints with the same content) are interchangeable.
		for _, pl := range pk.s.pools {
			fmt.Fprintf(&b, "|%p", pk.s.policy(p, pl))
		}
	}
	return b.String()
}

// seedFor is the largest bucket with pods left that the NodePool has not refused.
func (pk *packer) seedFor(refused map[*bucket]bool) *bucket {
	for _, b := range pk.buckets {
		if b.left() > 0 && !refused[b] {
			return b
		}
	}
	return nil
}

// took records that a bucket's next pod is placed.
func (pk *packer) took(b *bucket) {
	t := pk.totals[b.group]
	t[0], t[1] = t[0]-float64(b.req.cpu), t[1]-float64(b.req.mem)
	pk.s.aheadCPU, pk.s.aheadMem = pk.s.aheadCPU-b.req.cpu, pk.s.aheadMem-b.req.mem
	b.next++
}

// target picks the type a new NodeClaim is filled for. The cheapest mix of its remaining
// types that covers what the group's free pods still request (the pod just placed included),
// the fractional relaxation of the lower bound, prices cpu and memory (its dual prices: the
// types of the mix cost exactly what their cpu and memory are worth, the others more). The
// target is the type that costs least per worth of what the group's pods would fill of it,
// by a dry run of fill. While many pods are left that is a type of the mix, and of two, the
// one with more memory per cpu, so that the memory-heavy pods go to the nodes that balance
// them; where the pods are coarse for a type (three 1-vCPU pods on a 2-vCPU type that has
// 1.9 allocatable use half of it) or few are left, the dry run finds the type they fill best.
func (pk *packer) target(c *NodeClaim, group string) *instanceType {
	t := pk.totals[group]
	cpu, mem := t[0]+float64(c.req.cpu), t[1]+float64(c.req.mem)
	sel := pk.s.intern.sel(c.Requirements)
	cands, opts := pk.cands[:0], pk.opts[:0]
	defer func() { pk.cands, pk.opts = cands[:0], opts[:0] }()
	for _, it := range c.types {
		if it.alloc.cpu <= 0 || it.alloc.mem <= 0 {
			continue
		}
		if o, ok := it.cheapestOfferingSel(sel, c.filters); ok {
			opt := option{cpu: float64(it.alloc.cpu), mem: float64(it.alloc.mem), price: o.Price}
			opts = append(opts, opt)
			cands = append(cands, candidate{t: it, o: opt})
		}
	}
	_, a, b := coverBasis(cpu, mem, opts)
	if a < 0 {
		return c.cheapest
	}
	var cpuPrice, memPrice float64
	switch oa := opts[a]; {
	case b >= 0:
		ob := opts[b]
		det := oa.cpu*ob.mem - ob.cpu*oa.mem
		cpuPrice, memPrice = (oa.price*ob.mem-ob.price*oa.mem)/det, (oa.cpu*ob.price-ob.cpu*oa.price)/det
	case mem/cpu < oa.mem/oa.cpu:
		cpuPrice = oa.price / oa.cpu
	default:
		memPrice = oa.price / oa.mem
	}
	worth := func(cpu, mem float64) float64 { return cpuPrice*cpu + memPrice*mem }
	// A type of the mix that the pods fill well, the one with more memory per cpu first.
	basis := []int{a}
	if b >= 0 {
		if opts[b].mem/opts[b].cpu > opts[a].mem/opts[a].cpu {
			basis = []int{b, a}
		} else {
			basis = append(basis, b)
		}
	}
	for _, i := range basis {
		o := opts[i]
		usedCPU, usedMem := pk.dryFill(c, cands[i].t, group)
		if worth(usedCPU, usedMem) >= wellFilled*worth(o.cpu, o.mem) {
			return cands[i].t
		}
	}
	for i := range cands {
		o := &cands[i].o
		cands[i].bound = math.Inf(1)
		if w := worth(math.Min(o.cpu, cpu), math.Min(o.mem, mem)); w > 0 {
			cands[i].bound = o.price / w
		}
	}
	// Dry-run the types in order of their bound; one whose bound is no better than the best
	// dry run so far cannot win.
	slices.SortStableFunc(cands, func(x, y candidate) int {
		if x.bound != y.bound {
			return cmpFloat(x.bound, y.bound)
		}
		// Equal: more memory per cpu, then larger.
		if rx, ry := x.o.mem/x.o.cpu, y.o.mem/y.o.cpu; rx != ry {
			return cmpFloat(ry, rx)
		}
		return cmpFloat(y.o.cpu, x.o.cpu)
	})
	var best *instanceType
	bestCost := math.Inf(1)
	for _, cd := range cands {
		if math.IsInf(cd.bound, 1) || cd.bound >= bestCost*(1-1e-9) {
			break
		}
		usedCPU, usedMem := pk.dryFill(c, cd.t, group)
		if w := worth(usedCPU, usedMem); w > 0 && cd.o.price/w < bestCost*(1-1e-9) {
			best, bestCost = cd.t, cd.o.price/w
		}
	}
	if best == nil {
		return c.cheapest
	}
	return best
}

// wellFilled is how much of a type of the cheapest mix the pods must fill, in worth, for it
// to be the target without comparing every type.
const wellFilled = 0.97

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// dryFill is what fill would put on the NodeClaim for the target from the group's pods,
// ignoring every check but resources: the cpu and memory the pods would use, those already
// on it included. It takes a bucket's pods several at a time, as many as fill would take in
// a row.
func (pk *packer) dryFill(c *NodeClaim, target *instanceType, group string) (float64, float64) {
	capCPU, capMem := float64(target.alloc.cpu), float64(target.alloc.mem)
	cpu, mem, pods := c.req.cpu, c.req.mem, c.req.pods
	overhead := toRes(c.pool.overhead)
	if ok, _ := c.req.fitsIn(target.alloc); !ok {
		return 0, 0
	}
	left := pk.dry[:0]
	for _, b := range pk.buckets {
		if b.group == group && b.left() > 0 {
			left = append(left, dryBucket{b: b, n: int64(b.left())})
		}
	}
	pk.dry = left
	// Other resources (ephemeral storage, extended ones) bound the fill too: a type whose
	// storage takes one pod is not filled by its cpu and memory.
	var ext map[corev1.ResourceName]int64
	if len(c.req.ext) > 0 {
		ext = maps.Clone(c.req.ext)
	}
	for {
		roomCPU, roomMem, roomPods := target.alloc.cpu-cpu, target.alloc.mem-mem, target.alloc.pods-pods
		gap := float64(mem)/capMem - float64(cpu)/capCPU // < 0: it needs memory
		best := -1
		for i, d := range left {
			r := d.b.req
			if d.n == 0 || r.cpu > roomCPU || r.mem > roomMem || r.pods > roomPods || extRoom(r, ext, target.alloc) < 1 {
				continue
			}
			if best < 0 || steers(gap < 0, r, left[best].b.req) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		r := left[best].b.req
		k := left[best].n
		if r.cpu > 0 {
			k = min(k, roomCPU/r.cpu)
		}
		if r.mem > 0 {
			k = min(k, roomMem/r.mem)
		}
		if r.pods > 0 {
			k = min(k, roomPods/r.pods)
		}
		if len(r.ext) > 0 {
			k = min(k, extRoom(r, ext, target.alloc))
		}
		// Until the pod's kind stops being the one the node needs.
		if step := float64(r.mem)/capMem - float64(r.cpu)/capCPU; step != 0 && (gap < 0) == (step > 0) {
			k = min(k, max(1, int64(math.Ceil(-gap/step))))
		}
		k = max(k, 1)
		left[best].n -= k
		cpu, mem, pods = cpu+k*r.cpu, mem+k*r.mem, pods+k*r.pods
		for name, v := range r.ext {
			if ext == nil {
				ext = map[corev1.ResourceName]int64{}
			}
			ext[name] += k * v
		}
	}
	return float64(cpu - overhead.cpu), float64(mem - overhead.mem)
}

// extRoom is how many pods requesting r fit in alloc's other resources besides what used
// holds; a large number when r asks for none.
func extRoom(r res, used map[corev1.ResourceName]int64, alloc res) int64 {
	n := int64(math.MaxInt64)
	for name, v := range r.ext {
		if v <= 0 {
			continue
		}
		n = min(n, (alloc.ext[name]-used[name])/v)
	}
	return n
}

// candidate is a type target considers.
type candidate struct {
	t     *instanceType
	o     option
	bound float64 // cost per worth if the pods filled it perfectly, a lower bound
}

type dryBucket struct {
	b *bucket
	n int64
}

// fill adds free pods to the NodeClaim while they fit the target type, each time the pod
// that brings its memory per cpu closest to the target's. With grow, the target must stay
// among its types; without, the NodeClaim may not become costlier than it is.
func (pk *packer) fill(c *NodeClaim, target *instanceType, grow bool) {
	s := pk.s
	pk.seq++
	price := c.price
	capCPU, capMem := float64(target.alloc.cpu), float64(target.alloc.mem)
	if capCPU <= 0 || capMem <= 0 {
		return
	}
	for {
		roomCPU, roomMem, roomPods := target.alloc.cpu-c.req.cpu, target.alloc.mem-c.req.mem, target.alloc.pods-c.req.pods
		// Steer the NodeClaim along the target's shape: while it holds less memory per cpu
		// than the target has, take the pod with the most memory per cpu, otherwise the one
		// with the least; larger pods first among equals.
		needMem := float64(c.req.mem)/capMem < float64(c.req.cpu)/capCPU
		var best *bucket
		for _, b := range pk.buckets {
			if b.left() == 0 || b.failed == pk.seq || b.req.cpu > roomCPU || b.req.mem > roomMem || b.req.pods > roomPods {
				continue
			}
			if best == nil || steers(needMem, b.req, best.req) {
				best = b
			}
		}
		if best == nil {
			return
		}
		p := best.pods[best.next]
		s.podPolicyReqs = map[*pool]scheduling.Requirements{}
		plan, err := s.planClaim(c, p, pk.requests[p], best.reqs, true)
		if err == nil && (grow && !slices.Contains(plan.kept, target) || !grow && plan.price > price) {
			err = errTooCostly
		}
		if err != nil {
			best.failed = pk.seq
			continue
		}
		s.commit(&plan)
		pk.took(best)
	}
}

var errTooCostly = fmt.Errorf("the NodeClaim would become costlier than its target")

// steers reports whether a pod requesting r brings a NodeClaim closer to its target's shape
// than one requesting than: more memory per cpu when it needs memory, less otherwise, and
// the larger of two equal ones (a vCPU weighing as much as 4 GiB, as in the solver's order).
func steers(needMem bool, r, than res) bool {
	a, b := memPerCPU(r), memPerCPU(than)
	if a != b {
		return needMem == (a > b)
	}
	return r.cpu+r.mem/(4<<20) > than.cpu+than.mem/(4<<20)
}

func memPerCPU(r res) float64 {
	if r.cpu <= 0 {
		return math.Inf(1)
	}
	return float64(r.mem) / float64(r.cpu)
}

// coverBasis is cheapestCover that also returns the types of the optimum (b is -1 when one
// type alone is optimal, a too when there is none). Among optima of equal price it prefers
// larger types, which leave less room unused in the last node. Only the types that no other
// gives both more cpu and more memory per dollar can be in an optimum, so the pairs are
// tried among those.
func coverBasis(cpu, mem float64, opts []option) (best float64, a, b int) {
	best, a, b = math.Inf(1), -1, -1
	front := make([]int, 0, len(opts))
	for i, o := range opts {
		if o.cpu > 0 && o.mem > 0 && o.price > 0 {
			front = append(front, i)
		}
	}
	slices.SortStableFunc(front, func(i, j int) int {
		oi, oj := opts[i], opts[j]
		if c := cmpFloat(oj.cpu/oj.price, oi.cpu/oi.price); c != 0 {
			return c
		}
		if c := cmpFloat(oj.mem/oj.price, oi.mem/oi.price); c != 0 {
			return c
		}
		return cmpFloat(oj.cpu, oi.cpu)
	})
	kept, maxMem := front[:0], math.Inf(-1)
	for _, i := range front {
		if m := opts[i].mem / opts[i].price; m > maxMem {
			kept, maxMem = append(kept, i), m
		}
	}
	for _, i := range kept {
		o := opts[i]
		if v := o.price * math.Max(cpu/o.cpu, mem/o.mem); v < best*(1-1e-9) {
			best, a, b = v, i, -1
		}
	}
	for x, i := range kept {
		for _, j := range kept[x+1:] {
			oi, oj := opts[i], opts[j]
			det := oi.cpu*oj.mem - oj.cpu*oi.mem
			if det == 0 {
				continue
			}
			xi := (cpu*oj.mem - oj.cpu*mem) / det
			xj := (oi.cpu*mem - cpu*oi.mem) / det
			if xi <= 0 || xj <= 0 {
				continue
			}
			if v := xi*oi.price + xj*oj.price; v < best*(1-1e-9) {
				best, a, b = v, i, j
			}
		}
	}
	return best, a, b
}
