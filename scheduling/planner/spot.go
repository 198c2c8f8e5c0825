package planner

import (
	"maps"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Spot shares. A namespace's Spot share is its Spot vCPU over its vCPU above the on-demand
// base (policies.SpotBounds.Share; docs/policies.md, "Spot share"); a CapacityBudget bounds it,
// and a ClusterCapacityBudget bounds its namespaces' together: the functions below run over
// accounts (teams.go), a pod's vCPU counted in each account of its namespace. The planner meets the bounds in one
// of two ways:
//
//   - By NodeClaim, first: the batch is solved with no capacity type assigned, so every
//     NodeClaim takes its cheapest offering, Spot where there is one; then the Spot NodeClaims
//     that bring the namespaces over their maximum back within it for the least extra cost
//     launch on-demand (spotByClaim). This costs no second solve.
//   - By pod, when that cannot do it (a namespace below its minimum, no NodeClaim that may
//     flip): each namespace's pods are assigned Spot or on-demand and the batch is solved
//     again (spotByPod).
//
// Both count the drift: kube-scheduler binds a pending pod to any node with room, so pods the
// planner put on on-demand nodes may end in the spare room of the batch's Spot nodes.

// spotBounded reports whether the namespace has Spot bounds to keep.
func spotBounded(ns *Namespace) bool {
	b := ns.Budget
	return b != nil && b.Enforcement == policyv1.EnforcementDeny && (b.Spot.MinPercent > 0 || b.Spot.MaxPercent < 100)
}

// belowMinimum reports whether spot and on-demand vCPU leave a Spot share under the minimum.
func belowMinimum(b policies.SpotBounds, spot, onDemand float64) bool {
	return b.Below(b.Share(spot, onDemand))
}

// aboveMaximum reports whether spot and on-demand vCPU leave a Spot share over the maximum.
func aboveMaximum(b policies.SpotBounds, spot, onDemand float64) bool {
	return b.Above(b.Share(spot, onDemand))
}

// podShare is a pod on a new NodeClaim, as the Spot share sees it.
type podShare struct {
	pod      *corev1.Pod
	cpu, mem float64
}

// claimShare is a new NodeClaim: its pods' vCPU by namespace and its spare room.
type claimShare struct {
	c                  *solver.NodeClaim
	pods               []podShare
	byNS               map[string]float64
	spareCPU, spareMem float64
	// onDemand is the price of its cheapest on-demand option, once asked; NaN when it has
	// none.
	onDemand *float64
}

func (cs *claimShare) spot() bool { return cs.c.Offering.CapacityType == karpv1.CapacityTypeSpot }

// setSpare computes the spare room of the instance type the NodeClaim launches.
func (cs *claimShare) setSpare() {
	alloc := cs.c.InstanceType.Allocatable()
	cs.spareCPU = float64(alloc.Cpu().MilliValue()-cs.c.Requests.Cpu().MilliValue()) / 1000
	cs.spareMem = float64(alloc.Memory().Value() - cs.c.Requests.Memory().Value())
}

// shares is the batch's new NodeClaims with what the Spot bounds need of them.
type shares struct {
	claims     []*claimShare
	namespaces map[string]*Namespace
	// bounded are the namespaces with Spot bounds, sorted.
	bounded []string
	// capacityType caches the pods' own capacity-type requirements (nil: none).
	capacityType map[*corev1.Pod]*scheduling.Requirement
}

func newShares(res *solver.Result, namespaces map[string]*Namespace, z sizes) *shares {
	s := &shares{namespaces: namespaces, capacityType: map[*corev1.Pod]*scheduling.Requirement{}}
	for name, ns := range namespaces {
		if spotBounded(ns) {
			s.bounded = append(s.bounded, name)
		}
	}
	sort.Strings(s.bounded)
	if len(s.bounded) == 0 {
		return s
	}
	for _, c := range res.NodeClaims {
		cs := &claimShare{c: c, byNS: map[string]float64{}, pods: make([]podShare, 0, len(c.Pods))}
		for _, pod := range c.Pods {
			cpu, mem := z.of(pod)
			for _, a := range accountsOf(namespaces, pod.Namespace) {
				cs.byNS[a] += cpu
			}
			cs.pods = append(cs.pods, podShare{pod, cpu, mem})
		}
		cs.setSpare()
		s.claims = append(s.claims, cs)
	}
	return s
}

// split is a namespace's Spot and on-demand vCPU once the batch launches, with moved vCPU
// taken off Spot (negative: put on Spot, as kube-scheduler's drift does).
func (s *shares) split(name string, spot, all map[string]float64, moved float64) (sp, od float64) {
	ns := s.namespaces[name]
	return ns.Before.SpotCPU + spot[name] - moved, ns.Before.OnDemandCPU + all[name] - spot[name] + moved
}

// totals are each namespace's vCPU on the new Spot NodeClaims and on all of them.
func (s *shares) totals() (spot, all map[string]float64) {
	spot, all = map[string]float64{}, map[string]float64{}
	for _, cs := range s.claims {
		for name, cpu := range cs.byNS {
			all[name] += cpu
			if cs.spot() {
				spot[name] += cpu
			}
		}
	}
	return spot, all
}

// drift estimates, for each namespace with a Spot maximum, how much of its vCPU on on-demand
// NodeClaims kube-scheduler could bind into the spare room of the Spot ones, smallest pods
// first, namespaces in turn; only a drift that takes the namespace past its maximum is kept.
func (s *shares) drift(spot, all map[string]float64) map[string]float64 {
	type room struct{ cpu, mem float64 }
	var spare []*room
	for _, cs := range s.claims {
		if cs.spot() {
			spare = append(spare, &room{cs.spareCPU, cs.spareMem})
		}
	}
	drift := map[string]float64{}
	for _, name := range s.bounded {
		ns := s.namespaces[name]
		b := ns.Budget.Spot
		if b.MaxPercent >= 100 {
			continue
		}
		var pods []podShare
		for _, cs := range s.claims {
			if cs.spot() || cs.byNS[name] == 0 {
				continue
			}
			for _, p := range cs.pods {
				if slices.Contains(accountsOf(s.namespaces, p.pod.Namespace), name) && s.allows(p.pod, karpv1.CapacityTypeSpot) {
					pods = append(pods, p)
				}
			}
		}
		sort.SliceStable(pods, func(i, j int) bool { return pods[i].cpu < pods[j].cpu })
		for _, p := range pods {
			for _, r := range spare {
				if r.cpu >= p.cpu && r.mem >= p.mem {
					r.cpu, r.mem = r.cpu-p.cpu, r.mem-p.mem
					drift[name] += p.cpu
					break
				}
			}
		}
		if sp, od := s.split(name, spot, all, -drift[name]); !aboveMaximum(b, sp, od) {
			delete(drift, name)
		}
	}
	return drift
}

// allows reports whether the pod's own requirements let it run on the capacity type: what
// kube-scheduler goes by.
func (s *shares) allows(pod *corev1.Pod, capacityType string) bool {
	r, ok := s.capacityType[pod]
	if !ok {
		r = solver.PodRequirements(pod)[karpv1.CapacityTypeLabelKey]
		s.capacityType[pod] = r
	}
	return r == nil || r.Has(capacityType)
}

// excess is the vCPU each namespace must move off the new Spot NodeClaims: what its
// on-demand base lacks, or what takes it over its maximum, drift counted.
func (s *shares) excess(spot, all, drift map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, name := range s.bounded {
		b := s.namespaces[name].Budget.Spot
		sp, od := s.split(name, spot, all, -drift[name])
		x := b.OnDemandBaseCPU - od
		if b.MaxPercent < 100 && aboveMaximum(b, sp, od) {
			// Moving x vCPU fills the base first, then lowers the share of what is above it.
			x = max(x, sp-b.MaxPercent/100*(sp+od-b.OnDemandBaseCPU))
		}
		if x = min(x, spot[name]); x > 1e-9 {
			out[name] = x
		}
	}
	return out
}

// belowMin reports whether a namespace ends below its Spot minimum.
func (s *shares) belowMin(spot, all map[string]float64) bool {
	for _, name := range s.bounded {
		if sp, od := s.split(name, spot, all, 0); belowMinimum(s.namespaces[name].Budget.Spot, sp, od) {
			return true
		}
	}
	return false
}

// keepsMinima reports whether launching the NodeClaim on-demand keeps every namespace on it
// at or above its Spot minimum.
func (s *shares) keepsMinima(cs *claimShare, spot, all map[string]float64) bool {
	for name, cpu := range cs.byNS {
		if ns := s.namespaces[name]; ns == nil || !spotBounded(ns) {
			continue
		}
		if sp, od := s.split(name, spot, all, cpu); belowMinimum(s.namespaces[name].Budget.Spot, sp, od) {
			return false
		}
	}
	return true
}

// spotByClaim launches on-demand the Spot NodeClaims that bring the namespaces over their
// Spot maximum within it, best relief per extra dollar first, never taking a namespace below
// its minimum. It reports whether every namespace ends within its bounds; when not, the
// NodeClaims it flipped stay flipped.
func spotByClaim(res *solver.Result, h *hook, namespaces map[string]*Namespace, z sizes) bool {
	s := newShares(res, namespaces, z)
	if len(s.bounded) == 0 {
		return true
	}
	refused := map[*claimShare]bool{}
	spot, all := s.totals()
	for {
		if s.belowMin(spot, all) {
			return false
		}
		excess := s.excess(spot, all, s.drift(spot, all))
		if len(excess) == 0 {
			return true
		}
		var best *claimShare
		bestScore, bestOthers := 0.0, 0.0
		for _, cs := range s.claims {
			if !cs.spot() || refused[cs] {
				continue
			}
			relief := 0.0
			for _, name := range s.bounded { // in order: the sum decides ties
				if x, ok := excess[name]; ok {
					relief += min(cs.byNS[name], x)
				}
			}
			if relief == 0 || !s.keepsMinima(cs, spot, all) {
				continue
			}
			if cs.onDemand == nil {
				price := math.NaN()
				if _, o, ok := onDemandOptions(cs.c, h); ok {
					price = o.Price
				}
				cs.onDemand = &price
			}
			if math.IsNaN(*cs.onDemand) {
				refused[cs] = true
				continue
			}
			// Relief per extra dollar; on a tie, the NodeClaim moving fewer other pods.
			score := relief / max(*cs.onDemand-cs.c.Offering.Price, 1e-6)
			others := 0.0
			for _, name := range slices.Sorted(maps.Keys(cs.byNS)) { // a sum in map order is not the same every time
				if _, ok := excess[name]; !ok {
					others += cs.byNS[name]
				}
			}
			if best == nil || score > bestScore*(1+1e-9) || (score >= bestScore*(1-1e-9) && others < bestOthers) {
				best, bestScore, bestOthers = cs, score, others
			}
		}
		if best == nil {
			return false
		}
		if !s.flip(best.c, h) {
			refused[best] = true
			continue
		}
		best.setSpare()
		for name, cpu := range best.byNS {
			spot[name] -= cpu
		}
	}
}

// spotByPod assigns each namespace's pods to Spot or on-demand and solves the batch again,
// seeded with the last solve. If the drift would still pass a maximum and flipping NodeClaims
// cannot help, the assignment keeps the drift away from the maximum and the batch is solved
// once more.
func spotByPod(res *solver.Result, in *solver.Input, h *hook, namespaces map[string]*Namespace, z sizes) (*solver.Result, error) {
	assignCapacityTypes(h, in.Pods, in.NodePools, namespaces, z, nil)
	again := *in
	again.Seed = res.NodeClaims
	res, err := solver.Solve(&again)
	if err != nil {
		return nil, err
	}
	drift := spotDrift(res, namespaces, z)
	if len(drift) == 0 || spotByClaim(res, h, namespaces, z) {
		return res, nil
	}
	assignCapacityTypes(h, in.Pods, in.NodePools, namespaces, z, drift)
	again.Seed = res.NodeClaims
	return solver.Solve(&again)
}

// spotDrift is the drift (see shares.drift) of a solve's NodeClaims.
func spotDrift(res *solver.Result, namespaces map[string]*Namespace, z sizes) map[string]float64 {
	s := newShares(res, namespaces, z)
	spot, all := s.totals()
	return s.drift(spot, all)
}

// flip launches a Spot NodeClaim on-demand: its instance types with an on-demand offering in
// the zones it allows that every pod's policies accept, cheapest first. It refuses when a
// pod on it must run on Spot or may not run on-demand, or no type is left.
func (s *shares) flip(c *solver.NodeClaim, h *hook) bool {
	for _, pod := range c.Pods {
		if !s.allows(pod, karpv1.CapacityTypeOnDemand) {
			return false
		}
		if cons := h.cons[nsPool{pod.Namespace, c.NodePool}]; cons != nil {
			if _, no := cons.DeniedCapacityTypes[karpv1.CapacityTypeOnDemand]; no {
				return false
			}
		}
	}
	types, offering, ok := onDemandOptions(c, h)
	if !ok {
		return false
	}
	c.InstanceTypes, c.InstanceType, c.Offering = types, types[0], offering
	reqs := c.Requirements.Copy()
	reqs[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand)
	c.Requirements = reqs
	for _, pod := range c.Pods {
		if _, assigned := h.capacityType[pod]; assigned {
			h.capacityType[pod] = karpv1.CapacityTypeOnDemand
		}
	}
	return true
}

// onDemandOptions are the NodeClaim's instance types with an on-demand offering in the zones
// it allows that the policies of every pod on it accept, cheapest first, and the cheapest
// such offering.
func onDemandOptions(c *solver.NodeClaim, h *hook) ([]*cloudprovider.InstanceType, cloudprovider.Offering, bool) {
	// A namespace's type and offering filters are the same whatever capacity type its pods
	// were assigned, so one pod of each namespace tells them.
	var filters []*solver.Constraints
	seen := map[string]bool{}
	for _, pod := range c.Pods {
		if seen[pod.Namespace] {
			continue
		}
		seen[pod.Namespace] = true
		if pc := h.Constraints(pod, c.NodePool); pc != nil && !slices.Contains(filters, pc) {
			filters = append(filters, pc)
		}
	}
	allowed := func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		for _, f := range filters {
			if (f.AllowType != nil && !f.AllowType(it)) || (f.AllowOffering != nil && !f.AllowOffering(it, o)) {
				return false
			}
		}
		return true
	}
	reqs := c.Requirements.Copy()
	reqs[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand)
	// The one price rule orders them; a type comes in at its cheapest allowed offering.
	offers := scheduling.Offerings(c.InstanceTypes, reqs, nil, func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		return o.Available && allowed(it, o)
	})
	if len(offers) == 0 {
		return nil, cloudprovider.Offering{}, false
	}
	var types []*cloudprovider.InstanceType
	seenType := map[string]bool{}
	for _, l := range offers {
		if !seenType[l.InstanceType.Name] {
			seenType[l.InstanceType.Name] = true
			types = append(types, l.InstanceType)
		}
	}
	return types, offers[0].Offering, true
}

// assignCapacityTypes assigns each pod of a namespace (or a ClusterCapacityBudget's
// namespaces, for the pods their namespaces' bounds left free) with Spot bounds to Spot or
// on-demand so the share of vCPU above the on-demand base ends within the bounds,
// preferring Spot (cheaper) up to the maximum. Pods that can run on one capacity type only
// (their own requirements, or the NodePools') count where they must.
func assignCapacityTypes(h *hook, pods []*corev1.Pod, pools []*solver.NodePool, namespaces map[string]*Namespace, z sizes, drift map[string]float64) {
	offered := map[string]bool{}
	for _, np := range pools {
		r := scheduling.NewRequirements(np.NodePool.Spec.Template.Spec.Requirements...)[karpv1.CapacityTypeLabelKey]
		for _, ct := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
			if r == nil || r.Has(ct) {
				offered[ct] = true
			}
		}
	}
	byNS := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		for _, a := range accountsOf(namespaces, pod.Namespace) {
			byNS[a] = append(byNS[a], pod)
		}
	}
	// Namespaces first, then the ClusterCapacityBudgets, each counting the pods the
	// namespaces' bounds assigned where they were assigned.
	names := slices.Sorted(maps.Keys(byNS))
	sort.SliceStable(names, func(i, j int) bool { return !isTeam(names[i]) && isTeam(names[j]) })
	assigned := map[*corev1.Pod]bool{}
	for _, name := range names {
		nsPods := byNS[name]
		if namespaces[name] == nil {
			continue
		}
		b := namespaces[name].Budget
		if b == nil || b.Enforcement != policyv1.EnforcementDeny || (b.Spot.MinPercent <= 0 && b.Spot.MaxPercent >= 100) {
			continue
		}
		before := namespaces[name].Before
		spot, onDemand := before.SpotCPU, before.OnDemandCPU
		type flex struct {
			pod *corev1.Pod
			cpu float64
		}
		var flexible []flex
		for _, pod := range nsPods {
			cpu, _ := z.of(pod)
			if assigned[pod] {
				if h.capacityType[pod] == karpv1.CapacityTypeSpot {
					spot += cpu
				} else {
					onDemand += cpu
				}
				continue
			}
			r := solver.PodRequirements(pod)[karpv1.CapacityTypeLabelKey]
			canSpot := offered[karpv1.CapacityTypeSpot] && (r == nil || r.Has(karpv1.CapacityTypeSpot))
			canOD := offered[karpv1.CapacityTypeOnDemand] && (r == nil || r.Has(karpv1.CapacityTypeOnDemand))
			switch {
			case canSpot && canOD:
				flexible = append(flexible, flex{pod, cpu})
			case canSpot:
				spot += cpu
			default:
				onDemand += cpu
			}
		}
		total := spot + onDemand
		for _, f := range flexible {
			total += f.cpu
		}
		// Prefer Spot (cheaper) up to the maximum, less a pod's worth of slack and what
		// kube-scheduler is expected to move onto Spot by itself (see spotDrift), but never
		// below the minimum.
		slack := 0.0
		if b.Spot.MaxPercent < 100 {
			for _, f := range flexible {
				slack = max(slack, f.cpu)
			}
		}
		target := 0.0
		if above := total - b.Spot.OnDemandBaseCPU; above > 0 {
			target = max(b.Spot.MinPercent/100*above, b.Spot.MaxPercent/100*above-drift[name]-slack)
		}
		sort.SliceStable(flexible, func(i, j int) bool {
			if flexible[i].cpu != flexible[j].cpu {
				return flexible[i].cpu > flexible[j].cpu
			}
			return solver.PodKey(flexible[i].pod) < solver.PodKey(flexible[j].pod)
		})
		for _, f := range flexible {
			assigned[f.pod] = true
			if spot+f.cpu <= target+1e-9 {
				spot += f.cpu
				h.capacityType[f.pod] = karpv1.CapacityTypeSpot
			} else {
				h.capacityType[f.pod] = karpv1.CapacityTypeOnDemand
			}
		}
	}
}
