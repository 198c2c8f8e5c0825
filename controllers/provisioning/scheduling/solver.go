package scheduling

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/scheduling"
)

// MaxInstanceTypes is how many instance types a new NodeClaim offers the cloud provider.
const MaxInstanceTypes = 60

// Input is everything the solver decides from.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// NodePools with their instance types, DaemonSet overhead and usage so far.
	NodePools []*NodePool
	// Nodes are existing nodes and in-flight NodeClaims, with the pods bound or nominated to them.
	Nodes []*scheduling.Node
	// VolumeRequirements are node requirements from pods' bound PersistentVolumes (zonal
	// volumes), by pod namespace/name.
	VolumeRequirements map[string][]corev1.NodeSelectorRequirement
	// Policy, when set, adds per-namespace constraints on new NodeClaims.
	Policy PolicyHook
	// Requests, when set, holds the pods' requests computed once for the snapshot the input
	// comes from; the solver adds the pods it has not seen.
	Requests *scheduling.PodRequestCache
	// Seed, when set, are the NodeClaims of an earlier solve of mostly the same pods (the
	// policy engine solves again after it changes a few pods' constraints). Each pod that
	// was on one is tried first on that NodeClaim, rebuilt in the same order, with its
	// strictest placement; only the pods that do not fit there any more, and those not on a
	// seed, search every node and NodeClaim. Every placement is checked as usual, so the
	// result is valid whatever the seed: a seed makes the solve faster, not different in
	// what it honours.
	Seed []*NodeClaim
}

// NodePool is a NodePool with what the solver needs to launch from it.
type NodePool struct {
	NodePool      *karpv1.NodePool
	InstanceTypes []*cloudprovider.InstanceType
	// DaemonSetOverhead is what the DaemonSets that would run on its nodes request.
	DaemonSetOverhead corev1.ResourceList
	// Usage is what its nodes and in-flight NodeClaims already use, including "nodes", for limits.
	Usage corev1.ResourceList
}

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

// Result is the solver's decision.
type Result struct {
	NodeClaims []*NodeClaim
	// Existing maps node names to the pods placed on them.
	Existing map[string][]*corev1.Pod
	// Unschedulable pods, each with a reason a person can act on.
	Unschedulable []Unschedulable
	// LowerBoundPerHour is what the pods placed on new NodeClaims would cost at best (see
	// lowerBound); PricePerHour() over it says how close the decision is.
	LowerBoundPerHour float64
	// Requests are the pending pods' requests as the solver counted them (PodRequests).
	Requests map[*corev1.Pod]corev1.ResourceList
}

// Unschedulable is a pod the solver could not place.
type Unschedulable struct {
	Pod    *corev1.Pod
	Reason string
}

// NodeClaim is a new node to launch.
type NodeClaim struct {
	NodePool string
	// Requirements are the NodePool's, narrowed by the pods.
	Requirements scheduling.Requirements
	// InstanceTypes the cloud provider may launch, cheapest first, at most MaxInstanceTypes.
	InstanceTypes []*cloudprovider.InstanceType
	// InstanceType and Offering are the cheapest choice.
	InstanceType *cloudprovider.InstanceType
	Offering     cloudprovider.Offering
	Pods         []*corev1.Pod
	// Requests are the pods' and the DaemonSets' requests.
	Requests corev1.ResourceList
	// Hostname stands for the node's hostname in topology until it exists.
	Hostname string

	pool    *pool
	types   []*instanceType
	filters []*offerFilter
	// typeFilters are the policies' type filters; the remaining types already pass them.
	typeFilters []func(*cloudprovider.InstanceType) bool
	// applied are the policy constraints whose filters are in filters.
	applied  []*Constraints
	ports    map[string]bool
	reserved corev1.ResourceList
	req      res
	// price is the cheapest offering among the remaining types; cheapest is that type.
	price    float64
	cheapest *instanceType
	// frozen: growing into a costlier type was refused once; the NodeClaim now only takes
	// pods that fit its cheapest type.
	frozen bool
	// maxAlloc is the largest allocatable cpu and memory among the remaining types, to turn
	// pods away without looking at every type.
	maxAlloc res
	// zoneMask and ctMask are the zones and capacity types the remaining types offer, as
	// bits of the solver's interner.
	zoneMask, ctMask uint64
	// ownTypes: types is the NodeClaim's own slice (at first it is the NodePool's).
	ownTypes bool
	// hostCounts count its pods by the hostname topology groups they match.
	hostCounts map[*group]int
}

// setTypes narrows the NodeClaim's remaining instance types.
func (c *NodeClaim) setTypes(types []*instanceType) {
	c.types, c.zoneMask, c.ctMask = types, 0, 0
	for _, t := range types {
		c.zoneMask, c.ctMask = c.zoneMask|t.zoneMask, c.ctMask|t.ctMask
	}
}

type pool struct {
	np        *karpv1.NodePool
	name      string
	reqs      scheduling.Requirements
	taints    []corev1.Taint
	types     []*instanceType
	overhead  corev1.ResourceList
	remaining corev1.ResourceList // nil: no limits
	excluded  string              // why no instance type is left, if none
	// typeKeys are the label keys its instance types define (zone and capacity type included).
	typeKeys sets.Set[string]
}

type instanceType struct {
	it    *cloudprovider.InstanceType
	reqs  scheduling.Requirements
	alloc res
	// zones and capacityTypes of its available offerings, as names and as bits of in.
	zones, capacityTypes sets.Set[string]
	zoneMask, ctMask     uint64
	// offerings are the available ones, cheapest first, with their zone and capacity-type bits.
	offerings          []cloudprovider.Offering
	offerZone, offerCT []uint64
	in                 *interner
	// idx numbers the solve's instance types (a type in two NodePools counts twice).
	idx int
}

// interner numbers the zones and capacity types of a solve, so that the inner loops test
// offerings with bit masks instead of looking names up in requirement sets. Requirements
// are immutable once built, so each one's mask is computed once.
type interner struct {
	zones, cts map[string]uint64
	masks      map[*scheduling.Requirement]uint64
}

func newInterner() *interner {
	return &interner{zones: map[string]uint64{}, cts: map[string]uint64{}, masks: map[*scheduling.Requirement]uint64{}}
}

// bit numbers a name; past 64 names every further one shares the last bit, which only makes
// masks allow more, never less (candidates are checked against the names again).
func bit(m map[string]uint64, name string) uint64 {
	if b, ok := m[name]; ok {
		return b
	}
	b := uint64(1) << min(len(m), 63)
	m[name] = b
	return b
}

// mask is the set of known names r allows; all bits for no requirement.
func (in *interner) mask(r *scheduling.Requirement, names map[string]uint64) uint64 {
	if r == nil {
		return ^uint64(0)
	}
	if m, ok := in.masks[r]; ok {
		return m
	}
	var m uint64
	for name, b := range names {
		if r.Has(name) {
			m |= b
		}
	}
	in.masks[r] = m
	return m
}

// exact reports whether masks decide alone: fewer than 64 zones and capacity types.
func (in *interner) exact() bool { return len(in.zones) < 64 && len(in.cts) < 64 }

// compatible checks the given keys of reqs against what the type defines: its labels, and
// the zones and capacity types of its offerings. A key it does not define must allow absence.
func (t *instanceType) compatible(reqs scheduling.Requirements, keys []string) error {
	if r := t.incompatible(reqs, keys); r != nil {
		return fmt.Errorf("%s, but %s does not offer it", r, t.it.Name)
	}
	return nil
}

func allowedType(t *instanceType, filters []func(*cloudprovider.InstanceType) bool) bool {
	for _, f := range filters {
		if !f(t.it) {
			return false
		}
	}
	return true
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

// notEnoughErrors are the errors of notEnough, made once per resource: a full NodeClaim turns
// away every pod tried on it, which made formatting them a large share of a solve.
var notEnoughErrors sync.Map

func notEnough(r corev1.ResourceName) error {
	if e, ok := notEnoughErrors.Load(r); ok {
		return e.(error)
	}
	e, _ := notEnoughErrors.LoadOrStore(r, fmt.Errorf("not enough %s", r))
	return e.(error)
}

// incompatible is the first of the requirements on keys the type does not meet; nil when it
// meets them all. It allocates nothing, for the solver's inner loops.
func (t *instanceType) incompatible(reqs scheduling.Requirements, keys []string) *scheduling.Requirement {
	for _, k := range keys {
		r, ok := reqs[k]
		if !ok {
			continue
		}
		var allowed bool
		switch k {
		case karpv1.LabelTopologyZone:
			if t.in.exact() {
				allowed = t.zoneMask&t.in.mask(r, t.in.zones) != 0
			} else {
				allowed = anyOf(t.zones, r)
			}
		case karpv1.CapacityTypeLabelKey:
			if t.in.exact() {
				allowed = t.ctMask&t.in.mask(r, t.in.cts) != 0
			} else {
				allowed = anyOf(t.capacityTypes, r)
			}
		default:
			if v, defined := t.it.Labels[k]; defined {
				allowed = r.Has(v)
			} else {
				allowed = r.AllowsAbsent()
			}
		}
		if !allowed {
			return r
		}
	}
	return nil
}

// keyCheck is one requirement to check instance types against, with the zone or
// capacity-type mask worked out once for a loop over types.
type keyCheck struct {
	key  string
	r    *scheduling.Requirement
	mask uint64
	kind int // 0 label, 1 zone, 2 capacity type
}

// checks prepares the requirements on keys for failing; with more than 64 zones or capacity
// types it leaves them to incompatible.
func (in *interner) checks(reqs scheduling.Requirements, keys []string) ([]keyCheck, bool) {
	if !in.exact() {
		return nil, false
	}
	out := make([]keyCheck, 0, len(keys))
	for _, k := range keys {
		r, ok := reqs[k]
		if !ok {
			continue
		}
		c := keyCheck{key: k, r: r}
		switch k {
		case karpv1.LabelTopologyZone:
			c.kind, c.mask = 1, in.mask(r, in.zones)
		case karpv1.CapacityTypeLabelKey:
			c.kind, c.mask = 2, in.mask(r, in.cts)
		}
		out = append(out, c)
	}
	return out, true
}

// check is fails when the checks could be prepared, else incompatible.
func (t *instanceType) check(reqs scheduling.Requirements, keys []string, checks []keyCheck, exact bool) *scheduling.Requirement {
	if exact {
		return t.fails(checks)
	}
	return t.incompatible(reqs, keys)
}

// fails is incompatible with the checks prepared.
func (t *instanceType) fails(checks []keyCheck) *scheduling.Requirement {
	for _, c := range checks {
		var allowed bool
		switch c.kind {
		case 1:
			allowed = t.zoneMask&c.mask != 0
		case 2:
			allowed = t.ctMask&c.mask != 0
		default:
			if v, defined := t.it.Labels[c.key]; defined {
				allowed = c.r.Has(v)
			} else {
				allowed = c.r.AllowsAbsent()
			}
		}
		if !allowed {
			return c.r
		}
	}
	return nil
}

func anyOf(values sets.Set[string], r *scheduling.Requirement) bool {
	for v := range values {
		if r.Has(v) {
			return true
		}
	}
	return false
}

type existing struct {
	node      *scheduling.Node
	reqs      scheduling.Requirements
	available corev1.ResourceList
	ports     map[string]bool
	placed    []*corev1.Pod
}

type standaloneKey struct {
	pod  *corev1.Pod
	pool *pool
}

type solver struct {
	// podRes are the pending pods' requests as integers, made once per solve.
	podRes map[*corev1.Pod]res
	// lastPod and lastRes cache resOf's last answer: a pod is tried on many NodeClaims in a row.
	lastPod *corev1.Pod
	lastRes res
	// requests are the pods' requests, computed once per pod (Input.Requests when given).
	requests *scheduling.PodRequestCache
	// standalone caches what a node of its own would cost a pod on a NodePool.
	standalone map[standaloneKey]float64
	in         *Input
	pools      []*pool
	nodes      []*existing
	claims     []*NodeClaim
	topo       *topology
	intern     *interner
	// typeCount is how many instance types prepare made; offerFilters are the policies'
	// offering filters with their answers.
	typeCount         int
	offerFilters      map[*Constraints]*offerFilter
	offerFiltersByKey map[string]*offerFilter
	// policyPod and podPolicy cache the hook's answers for the pod being placed, by NodePool.
	policyPod *corev1.Pod
	podPolicy map[*pool]*Constraints
	// podPolicyReqs are the pod being placed's requirements with its policy's, by NodePool;
	// reset for every placement attempt.
	podPolicyReqs map[*pool]scheduling.Requirements
	// ahead is the cpu and memory the pods not yet placed request: a NodeClaim grows into a
	// type only if the batch could still fill it.
	aheadCPU, aheadMem int64
	// packing: the NodeClaims are being filled for a target type (pack.go), which decides
	// how far they grow.
	packing bool
	// keptBuf holds the types a plan keeps until it is committed or dropped: most plans of a
	// solve are dropped, so they share one buffer.
	keptBuf []*instanceType
}

// resOf is a pod's requests as integers: made once for a pending pod, else from requests.
func (s *solver) resOf(p *corev1.Pod, requests corev1.ResourceList) res {
	if p == s.lastPod {
		return s.lastRes
	}
	r, ok := s.podRes[p]
	if !ok {
		r = toRes(requests)
	}
	s.lastPod, s.lastRes = p, r
	return r
}

// Solve places the pods: on existing nodes first, then in-flight ones, then on new NodeClaims
// from the NodePools in weight order. It is deterministic.
func Solve(in *Input) (*Result, error) {
	s := &solver{in: in, topo: newTopology(), standalone: map[standaloneKey]float64{}, intern: newInterner(),
		offerFilters: map[*Constraints]*offerFilter{}, offerFiltersByKey: map[string]*offerFilter{}}
	if s.requests = in.Requests; s.requests == nil {
		s.requests = scheduling.NewPodRequestCache()
	}
	if err := s.prepare(); err != nil {
		return nil, err
	}
	pods := append([]*corev1.Pod(nil), in.Pods...)
	requests := make(map[*corev1.Pod]corev1.ResourceList, len(pods))
	out := &Result{Existing: map[string][]*corev1.Pod{}, Requests: requests}
	s.podRes = make(map[*corev1.Pod]res, len(pods))
	for _, p := range pods {
		requests[p] = s.requests.Of(p)
		s.podRes[p] = toRes(requests[p])
	}
	// Largest first, measuring cpu and memory together (a vCPU weighs as much as 4 GiB, the
	// general-purpose shape), so that cpu-heavy and memory-heavy pods arrive interleaved.
	size := func(p *corev1.Pod) float64 {
		r := s.podRes[p]
		return float64(r.cpu)/1000 + float64(r.mem)/(4<<30)
	}
	sort.SliceStable(pods, func(i, j int) bool {
		if a, b := size(pods[i]), size(pods[j]); a != b {
			return a > b
		}
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	for _, p := range pods {
		r := s.podRes[p]
		s.aheadCPU, s.aheadMem = s.aheadCPU+r.cpu, s.aheadMem+r.mem
	}
	seedOf := map[*corev1.Pod]int{}
	for i, c := range in.Seed {
		for _, p := range c.Pods {
			seedOf[p] = i
		}
	}
	rebuilt := make([]*NodeClaim, len(in.Seed))
	var free []*corev1.Pod
	for _, p := range pods {
		if _, seeded := seedOf[p]; !seeded && s.packable(p) {
			free = append(free, p)
			continue
		}
		r := s.podRes[p]
		s.aheadCPU, s.aheadMem = s.aheadCPU-r.cpu, s.aheadMem-r.mem
		if i, ok := seedOf[p]; ok && s.placeSeeded(p, requests[p], in.Seed[i].NodePool, &rebuilt[i]) {
			continue
		}
		if reason := s.place(p, requests[p]); reason != "" {
			out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: p, Reason: reason})
		}
	}
	for _, p := range s.pack(free, requests) {
		r := s.podRes[p]
		s.aheadCPU, s.aheadMem = s.aheadCPU-r.cpu, s.aheadMem-r.mem
		if reason := s.place(p, requests[p]); reason != "" {
			out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: p, Reason: reason})
		}
	}
	for _, n := range s.nodes {
		if len(n.placed) > 0 {
			out.Existing[n.node.Name] = n.placed
		}
	}
	for _, c := range s.claims {
		s.finalize(c)
		out.NodeClaims = append(out.NodeClaims, c)
	}
	sort.SliceStable(out.Unschedulable, func(i, j int) bool { return PodKey(out.Unschedulable[i].Pod) < PodKey(out.Unschedulable[j].Pod) })
	out.LowerBoundPerHour = s.lowerBound(out.NodeClaims)
	return out, nil
}

func (s *solver) prepare() error {
	for _, in := range s.in.NodePools {
		np := in.NodePool
		p := &pool{np: np, name: np.Name, taints: np.Spec.Template.Spec.Taints, overhead: in.DaemonSetOverhead, typeKeys: sets.New[string]()}
		poolTaints := taintsKey(p.taints)
		p.reqs = scheduling.NewRequirements(np.Spec.Template.Spec.Requirements...)
		p.reqs.Add(scheduling.NewRequirement(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, np.Name))
		for k, v := range np.Spec.Template.Labels {
			p.reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
		if len(np.Spec.Limits) > 0 {
			// What is left of each limited resource; usage of resources without a limit is
			// irrelevant.
			p.remaining = corev1.ResourceList{}
			for k, limit := range np.Spec.Limits {
				left := limit.DeepCopy()
				if used, ok := in.Usage[k]; ok {
					left.Sub(used)
				}
				p.remaining[k] = left
			}
		}
		p.typeKeys.Insert(karpv1.LabelTopologyZone, karpv1.CapacityTypeLabelKey)
		for _, it := range in.InstanceTypes {
			for k := range it.Labels {
				p.typeKeys.Insert(k)
			}
		}
		var poolTypeKeys []string
		for _, k := range p.reqs.Keys() {
			if p.typeKeys.Has(k) {
				poolTypeKeys = append(poolTypeKeys, k)
			}
		}
		for _, it := range in.InstanceTypes {
			t := &instanceType{it: it, reqs: scheduling.LabelRequirements(it.Labels), alloc: toRes(it.Allocatable()), idx: s.typeCount}
			s.typeCount++
			zones, cts := sets.New[string](), sets.New[string]()
			for _, o := range it.Offerings {
				if o.Available {
					zones.Insert(o.Zone)
					cts.Insert(o.CapacityType)
				}
			}
			if zones.Len() == 0 {
				continue
			}
			t.reqs[karpv1.LabelTopologyZone] = scheduling.NewRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, sets.List(zones)...)
			t.reqs[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, sets.List(cts)...)
			t.zones, t.capacityTypes, t.in = zones, cts, s.intern
			for _, o := range it.Offerings {
				if o.Available {
					t.offerings = append(t.offerings, o)
				}
			}
			sort.SliceStable(t.offerings, func(i, j int) bool { return t.offerings[i].Price < t.offerings[j].Price })
			for _, o := range t.offerings {
				zb, cb := bit(s.intern.zones, o.Zone), bit(s.intern.cts, o.CapacityType)
				t.offerZone, t.offerCT = append(t.offerZone, zb), append(t.offerCT, cb)
				t.zoneMask, t.ctMask = t.zoneMask|zb, t.ctMask|cb
			}
			if err := t.compatible(p.reqs, poolTypeKeys); err != nil {
				continue
			}
			if ok, _ := toRes(in.DaemonSetOverhead).fitsIn(t.alloc); !ok {
				continue
			}
			p.types = append(p.types, t)
			// The domains the NodePool can launch into: its types' values its requirements allow.
			for k, r := range t.reqs {
				for _, v := range r.Values() {
					if pr, ok := p.reqs[k]; !ok || pr.Has(v) {
						s.topo.addDomain(k, v, p.taints, poolTaints)
					}
				}
			}
		}
		if len(p.types) == 0 {
			p.excluded = fmt.Sprintf("no instance type of its %d matches its requirements and has an available offering", len(in.InstanceTypes))
		}
		s.pools = append(s.pools, p)
	}
	sort.SliceStable(s.pools, func(i, j int) bool {
		wi, wj := weight(s.pools[i].np), weight(s.pools[j].np)
		if wi != wj {
			return wi > wj
		}
		return s.pools[i].name < s.pools[j].name
	})
	nodes := append([]*scheduling.Node(nil), s.in.Nodes...)
	sort.SliceStable(nodes, func(i, j int) bool {
		if nodes[i].InFlight != nodes[j].InFlight {
			return !nodes[i].InFlight
		}
		return nodes[i].Name < nodes[j].Name
	})
	for _, n := range nodes {
		e := &existing{node: n, reqs: scheduling.LabelRequirements(n.Labels), available: n.Allocatable.DeepCopy(), ports: map[string]bool{}}
		if _, ok := n.Labels[corev1.LabelHostname]; !ok {
			e.reqs[corev1.LabelHostname] = scheduling.NewRequirement(corev1.LabelHostname, corev1.NodeSelectorOpIn, n.Name)
		}
		nodeTaints := taintsKey(n.Taints)
		for k, v := range n.Labels {
			s.topo.addDomain(k, v, n.Taints, nodeTaints)
		}
		for _, p := range n.Pods {
			e.available = scheduling.Subtract(e.available, s.requests.Of(p))
			for _, hp := range hostPorts(p) {
				e.ports[hp] = true
			}
		}
		s.nodes = append(s.nodes, e)
	}
	for _, p := range s.in.Pods {
		if err := s.topo.register(p); err != nil {
			return fmt.Errorf("pod %s: %w", PodKey(p), err)
		}
	}
	// Count the pods already bound, now that every group exists.
	for _, e := range s.nodes {
		for _, p := range e.node.Pods {
			s.topo.registerExisting(p, e.labelsWithHostname())
			s.topo.count(p, e.domain, nil)
		}
	}
	return nil
}

func weight(np *karpv1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

func (e *existing) labelsWithHostname() map[string]string {
	if _, ok := e.node.Labels[corev1.LabelHostname]; ok {
		return e.node.Labels
	}
	l := map[string]string{corev1.LabelHostname: e.node.Name}
	for k, v := range e.node.Labels {
		l[k] = v
	}
	return l
}

func (e *existing) domain(key string) (string, bool) {
	v, ok := e.labelsWithHostname()[key]
	return v, ok
}

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
func (s *solver) placeSeeded(p *corev1.Pod, requests corev1.ResourceList, nodePool string, c **NodeClaim) bool {
	var pl *pool
	for _, candidate := range s.pools {
		if candidate.name == nodePool {
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
// affinity terms (lowest weight first), then ScheduleAnyway spreads, and last the
// PreferNoSchedule taints.
func relaxations(p *corev1.Pod, t *topology) []attempt {
	prefs := preferredTerms(p)
	affinity, all := t.preferences(p)
	var out []attempt
	for k := 0; k <= affinity; k++ {
		out = append(out, attempt{prefs: prefs, soft: k, strict: true})
	}
	for d := 1; d <= len(prefs); d++ {
		out = append(out, attempt{prefs: prefs[:len(prefs)-d], soft: affinity, strict: true})
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

func (s *solver) tryExisting(e *existing, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) error {
	if ok, t := tolerates(p, e.node.Taints, strict); !ok {
		return fmt.Errorf("taint %s not tolerated", taintString(t))
	}
	if err := e.reqs.Compatible(reqs); err != nil {
		return err
	}
	if ok, r := scheduling.Fits(requests, e.available); !ok {
		return notEnough(r)
	}
	ports := hostPorts(p)
	if c := portsConflict(e.ports, ports); c != "" {
		return fmt.Errorf("host port %s in use", c)
	}
	if _, err := s.topo.choose(p, strict, reqs, func(key string) []string {
		if v, ok := e.domain(key); ok {
			return []string{v}
		}
		return nil
	}); err != nil {
		return err
	}
	e.available = scheduling.Subtract(e.available, requests)
	for _, hp := range ports {
		e.ports[hp] = true
	}
	e.placed = append(e.placed, p)
	s.topo.count(p, e.domain, nil)
	return nil
}

func (s *solver) newClaim(pl *pool, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) (*NodeClaim, error) {
	if pl.excluded != "" {
		return nil, fmt.Errorf("%s", pl.excluded)
	}
	if pl.remaining != nil {
		if n, ok := pl.remaining[corev1.ResourceName("nodes")]; ok && n.Value() < 1 {
			limit := pl.np.Spec.Limits[corev1.ResourceName("nodes")]
			return nil, fmt.Errorf("limit nodes reached (%s)", limit.String())
		}
	}
	c := &NodeClaim{NodePool: pl.name, pool: pl, Requirements: pl.reqs.Copy(),
		Requests: pl.overhead.DeepCopy(), Hostname: fmt.Sprintf("%s-nodeclaim-%d", pl.name, len(s.claims)), ports: map[string]bool{}, hostCounts: map[*group]int{},
		req: toRes(pl.overhead), maxAlloc: res{cpu: 1 << 62, mem: 1 << 62, pods: 1 << 62}}
	c.setTypes(pl.types)
	if c.Requests == nil {
		c.Requests = corev1.ResourceList{}
	}
	if err := s.tryClaim(c, p, requests, reqs, strict); err != nil {
		return nil, err
	}
	if pl.remaining != nil {
		if n, ok := pl.remaining[corev1.ResourceName("nodes")]; ok {
			n.Sub(resource.MustParse("1"))
			pl.remaining[corev1.ResourceName("nodes")] = n
		}
	}
	return c, nil
}

// claimPlan is what adding a pod to a NodeClaim would make of it.
type claimPlan struct {
	c           *NodeClaim
	p           *corev1.Pod
	requests    corev1.ResourceList
	merged      scheduling.Requirements
	kept        []*instanceType
	filters     []*offerFilter
	typeFilters []func(*cloudprovider.InstanceType) bool
	applied     []*Constraints
	total       res
	maxAlloc    res
	price       float64
	cheapest    *instanceType
	ports       []string
}

// tryClaim adds the pod to the NodeClaim if it fits.
func (s *solver) tryClaim(c *NodeClaim, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) error {
	plan, err := s.planClaim(c, p, requests, reqs, strict)
	if err != nil {
		return err
	}
	s.commit(plan)
	return nil
}

func (s *solver) planClaim(c *NodeClaim, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) (*claimPlan, error) {
	if ok, t := tolerates(p, c.pool.taints, strict); !ok {
		return nil, fmt.Errorf("taint %s not tolerated", taintString(t))
	}
	podReq := s.resOf(p, requests)
	total := c.req.plus(podReq)
	if ok, r := (res{cpu: total.cpu, mem: total.mem, pods: total.pods}).fitsIn(c.maxAlloc); !ok {
		return nil, notEnough(r)
	}
	if c.frozen {
		if ok, r := total.fitsIn(c.cheapest.alloc); !ok {
			return nil, fmt.Errorf("not enough %s on %s", r, c.cheapest.it.Name)
		}
	}
	if err := s.topo.precheckHostname(p, strict, c.hostCounts); err != nil {
		return nil, err
	}
	filters, typeFilters, applied := c.filters, c.typeFilters, c.applied
	// fresh is a type filter the NodeClaim's remaining types have not been through yet.
	var fresh func(*cloudprovider.InstanceType) bool
	if pc := s.policy(p, c.pool); pc != nil {
		reqs = s.withPolicy(reqs, c.pool, pc)
		// Pods of one namespace share their Constraints: its filters are added to a NodeClaim once.
		if !slices.Contains(applied, pc) {
			applied = append(append([]*Constraints(nil), applied...), pc)
			if f := s.offerFilter(pc); f != nil && !slices.Contains(filters, f) {
				filters = append(append([]*offerFilter(nil), filters...), f)
			}
			if pc.AllowType != nil {
				typeFilters = append(append([]func(*cloudprovider.InstanceType) bool(nil), typeFilters...), pc.AllowType)
				fresh = pc.AllowType
			}
		}
	}
	// Keys the instance types define are checked against the types below; the others are
	// the NodePool's labels and requirements, or absent.
	own := scheduling.Requirements{}
	for k, r := range reqs {
		if !c.pool.typeKeys.Has(k) {
			own[k] = r
		}
	}
	if err := c.Requirements.Compatible(own); err != nil {
		return nil, fmt.Errorf("incompatible requirements: %v", err)
	}
	// A key the NodeClaim already narrowed to values the pod excludes (a Spot NodeClaim for a
	// pod pinned to on-demand) rules it out before its types are looked at.
	for k, r := range reqs {
		if cr, ok := c.Requirements[k]; ok && c.pool.typeKeys.Has(k) && !cr.MayOverlap(r) {
			return nil, fmt.Errorf("incompatible requirements: %s, but the NodeClaim has %s", r, cr)
		}
	}
	merged := c.Requirements.Merged(reqs)
	chosen, err := s.topo.choose(p, strict, reqs, func(key string) []string {
		if key == corev1.LabelHostname {
			return []string{c.Hostname}
		}
		return c.domains(s.intern, key, merged)
	})
	if err != nil {
		return nil, err
	}
	for k, v := range chosen {
		if k != corev1.LabelHostname {
			merged.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
	}
	ports := hostPorts(p)
	if conflict := portsConflict(c.ports, ports); conflict != "" {
		return nil, fmt.Errorf("host port %s in use", conflict)
	}
	// Only keys this pod (or the topology) narrows need checking again: the remaining types
	// already match the rest.
	var narrowed []string
	for k := range reqs {
		if c.pool.typeKeys.Has(k) {
			narrowed = append(narrowed, k)
		}
	}
	for k := range chosen {
		if c.pool.typeKeys.Has(k) {
			narrowed = append(narrowed, k)
		}
	}
	limit := c.pool.remaining
	if limit != nil && c.reserved != nil {
		limit = limit.DeepCopy()
		scheduling.AddResources(limit, c.reserved)
	}
	kept := s.keptBuf[:0]
	defer func() { s.keptBuf = kept[:0] }()
	// The reason reported is the one of the type that got furthest: requirements, resources,
	// limits, offerings.
	miss, missStage := "", -1
	note := func(stage int, msg func() string) {
		if stage > missStage {
			miss, missStage = msg(), stage
		}
	}
	maxAlloc := res{}
	var cheapest *instanceType
	price := 0.0
	mergedSel := s.intern.sel(merged)
	checks, exact := s.intern.checks(merged, narrowed)
	for _, t := range c.types {
		if r := t.check(merged, narrowed, checks, exact); r != nil {
			note(0, func() string { return fmt.Sprintf("requires %s, but %s does not offer it", r, t.it.Name) })
			continue
		}
		if ok, r := total.fitsIn(t.alloc); !ok {
			note(1, func() string { return fmt.Sprintf("not enough %s", r) })
			continue
		}
		if limit != nil {
			if ok, r := withinLimits(t.it.Capacity, limit); !ok {
				note(2, func() string { return fmt.Sprintf("limit %s would be exceeded", r) })
				continue
			}
		}
		if fresh != nil && !fresh(t.it) {
			note(3, func() string {
				return fmt.Sprintf("instance type %s is refused by %s", t.it.Name, s.policy(p, c.pool).Source)
			})
			continue
		}
		o, ok := t.cheapestOfferingSel(mergedSel, filters)
		if !ok {
			note(3, func() string {
				return fmt.Sprintf("no available offering of %s matches %s and %s%s", t.it.Name,
					reqString(merged, karpv1.LabelTopologyZone), reqString(merged, karpv1.CapacityTypeLabelKey), policyNote(s, p, c.pool))
			})
			continue
		}
		kept = append(kept, t)
		if cheapest == nil || o.Price < price {
			cheapest, price = t, o.Price
		}
		maxAlloc.cpu, maxAlloc.mem, maxAlloc.pods = max(maxAlloc.cpu, t.alloc.cpu), max(maxAlloc.mem, t.alloc.mem), max(maxAlloc.pods, t.alloc.pods)
	}
	if len(kept) == 0 {
		all := c.Requests.DeepCopy()
		scheduling.AddResources(all, requests)
		return nil, fmt.Errorf("no instance type fits %s (%s)", resourcesString(all), miss)
	}
	// Growing into a costlier type is worth it when the increase costs no more than a node of
	// its own for the pod would, or when the type covers this mix of cpu and memory about as
	// cheaply as the best type would. Otherwise premium types are dropped from the NodeClaim,
	// and if none is left the pod goes to a new NodeClaim instead.
	if !s.packing && len(c.Pods) > 0 && price > c.price && price-c.price > s.standalonePrice(c, p, reqs, filters, typeFilters, podReq) {
		efficient := s.efficientTypes(c, merged, kept, total, typeFilters)
		if len(efficient) == 0 {
			c.frozen = true
			return nil, fmt.Errorf("growing would need a type costing over %.0f%% more than the best cover", (growthTolerance-1)*100)
		}
		kept, cheapest, price = efficient, nil, 0
		for _, t := range kept {
			if o, ok := t.cheapestOfferingSel(mergedSel, filters); ok && (cheapest == nil || o.Price < price) {
				cheapest, price = t, o.Price
			}
		}
		maxAlloc = res{}
		for _, t := range kept {
			maxAlloc.cpu, maxAlloc.mem, maxAlloc.pods = max(maxAlloc.cpu, t.alloc.cpu), max(maxAlloc.mem, t.alloc.mem), max(maxAlloc.pods, t.alloc.pods)
		}
	}
	for _, r := range merged {
		if r.MinValues != nil {
			distinct := sets.New[string]()
			for _, t := range kept {
				if v, ok := t.it.Labels[r.Key]; ok && r.Has(v) {
					distinct.Insert(v)
				}
			}
			if distinct.Len() < *r.MinValues {
				return nil, fmt.Errorf("minValues %d on %s: only %d values would remain", *r.MinValues, r.Key, distinct.Len())
			}
		}
	}
	return &claimPlan{c: c, p: p, requests: requests, merged: merged, kept: kept, filters: filters, typeFilters: typeFilters, applied: applied, total: total,
		maxAlloc: maxAlloc, price: price, cheapest: cheapest, ports: ports}, nil
}

// commit applies a plan.
func (s *solver) commit(pl *claimPlan) {
	c, p, merged, kept, filters := pl.c, pl.p, pl.merged, pl.kept, pl.filters
	scheduling.AddResources(c.Requests, pl.requests)
	c.Requirements, c.filters, c.typeFilters, c.applied = merged, filters, pl.typeFilters, pl.applied
	// The plan's kept types are in the solver's buffer; they are a subset of the NodeClaim's.
	if c.ownTypes {
		c.setTypes(c.types[:copy(c.types, kept)])
	} else {
		c.setTypes(slices.Clone(kept))
		c.ownTypes = true
	}
	c.req, c.maxAlloc, c.price, c.cheapest = pl.total, pl.maxAlloc, pl.price, pl.cheapest
	for _, hp := range pl.ports {
		c.ports[hp] = true
	}
	c.Pods = append(c.Pods, p)
	if c.pool.remaining != nil {
		// Reserve, against the NodePool's limits, the capacity of the type it would launch.
		reserve := corev1.ResourceList{}
		for k, q := range cheapestType(kept, merged, filters).it.Capacity {
			if _, limited := c.pool.remaining[k]; limited && k != "nodes" {
				reserve[k] = q
			}
		}
		if c.reserved != nil {
			scheduling.AddResources(c.pool.remaining, c.reserved)
		}
		c.pool.remaining = scheduling.Subtract(c.pool.remaining, reserve)
		c.reserved = reserve
	}
	s.topo.count(p, func(key string) (string, bool) {
		if key == corev1.LabelHostname {
			return c.Hostname, true
		}
		if r, ok := c.Requirements[key]; ok {
			if v, single := r.Single(); single {
				return v, true
			}
		}
		return "", false
	}, c.hostCounts)
}

// withinLimits checks capacity against the resources a NodePool limits.
func withinLimits(capacity, limit corev1.ResourceList) (bool, corev1.ResourceName) {
	for k, l := range limit {
		if k == "nodes" {
			continue
		}
		if c, ok := capacity[k]; ok && c.Cmp(l) > 0 {
			return false, k
		}
	}
	return true, ""
}

// cheapestOffering is the cheapest available offering of the type that reqs and filters allow.
func (t *instanceType) cheapestOffering(reqs scheduling.Requirements, filters []*offerFilter) (cloudprovider.Offering, bool) {
	return t.cheapestOfferingSel(t.in.sel(reqs), filters)
}

// offerFilter is a policy's offering filter with its answers kept per instance type, as a
// bit per offering: the solver asks the same questions millions of times in a batch.
type offerFilter struct {
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
	f := &offerFilter{allow: pc.AllowOffering, masks: make([]uint64, s.typeCount)}
	s.offerFilters[pc] = f
	if pc.OfferingKey != "" {
		s.offerFiltersByKey[pc.OfferingKey] = f
	}
	return f
}

// offerSel is what requirements allow of offerings, computed once for a loop over types.
type offerSel struct {
	zone, ct *scheduling.Requirement
	zm, cm   uint64
	exact    bool
}

func (in *interner) sel(reqs scheduling.Requirements) offerSel {
	zone, ct := reqs[karpv1.LabelTopologyZone], reqs[karpv1.CapacityTypeLabelKey]
	return offerSel{zone: zone, ct: ct, zm: in.mask(zone, in.zones), cm: in.mask(ct, in.cts), exact: in.exact()}
}

// cheapestOfferingSel is cheapestOffering with the requirements' selection made already.
func (t *instanceType) cheapestOfferingSel(sel offerSel, filters []*offerFilter) (cloudprovider.Offering, bool) {
	allowed := ^uint64(0)
	for _, f := range filters {
		allowed &= f.mask(t)
	}
next:
	for i, o := range t.offerings {
		if t.offerZone[i]&sel.zm == 0 || t.offerCT[i]&sel.cm == 0 {
			continue
		}
		if !sel.exact && ((sel.zone != nil && !sel.zone.Has(o.Zone)) || (sel.ct != nil && !sel.ct.Has(o.CapacityType))) {
			continue
		}
		if i < 63 {
			if allowed&(1<<i) == 0 {
				continue
			}
		} else {
			for _, f := range filters {
				if !f.allow(t.it, o) {
					continue next
				}
			}
		}
		return o, true
	}
	return cloudprovider.Offering{}, false
}

func cheapestType(types []*instanceType, reqs scheduling.Requirements, filters []*offerFilter) *instanceType {
	var best *instanceType
	bestPrice := 0.0
	for _, t := range types {
		if o, ok := t.cheapestOffering(reqs, filters); ok && (best == nil || o.Price < bestPrice || (o.Price == bestPrice && t.it.Name < best.it.Name)) {
			best, bestPrice = t, o.Price
		}
	}
	return best
}

// finalize orders a NodeClaim's instance types cheapest first and picks the cheapest.
func (s *solver) finalize(c *NodeClaim) {
	type priced struct {
		t *instanceType
		o cloudprovider.Offering
	}
	var ps []priced
	for _, t := range c.types {
		if o, ok := t.cheapestOffering(c.Requirements, c.filters); ok {
			ps = append(ps, priced{t, o})
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].o.Price != ps[j].o.Price {
			return ps[i].o.Price < ps[j].o.Price
		}
		return ps[i].t.it.Name < ps[j].t.it.Name
	})
	if len(ps) > MaxInstanceTypes {
		ps = ps[:MaxInstanceTypes]
	}
	for _, p := range ps {
		c.InstanceTypes = append(c.InstanceTypes, p.t.it)
	}
	if len(ps) > 0 {
		c.InstanceType, c.Offering = ps[0].t.it, ps[0].o
	}
}

func reqString(rs scheduling.Requirements, key string) string {
	if r, ok := rs[key]; ok {
		return r.String()
	}
	return key + " (any)"
}

func resourcesString(l corev1.ResourceList) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := l[corev1.ResourceName(k)]
		parts = append(parts, k+"="+q.String())
	}
	return strings.Join(parts, ", ")
}

// domains are the values key can still take on the NodeClaim: those its requirements and
// remaining instance types allow.
func (c *NodeClaim) domains(in *interner, key string, reqs scheduling.Requirements) []string {
	r, constrained := reqs[key]
	if in.exact() && (key == karpv1.LabelTopologyZone || key == karpv1.CapacityTypeLabelKey) {
		names, mask := in.zones, c.zoneMask
		if key == karpv1.CapacityTypeLabelKey {
			names, mask = in.cts, c.ctMask
		}
		var out []string
		for name, b := range names {
			if mask&b != 0 && (!constrained || r.Has(name)) {
				out = append(out, name)
			}
		}
		sort.Strings(out)
		return out
	}
	out := sets.New[string]()
	if c.pool.typeKeys.Has(key) {
		for _, t := range c.types {
			var values sets.Set[string]
			switch key {
			case karpv1.LabelTopologyZone:
				values = t.zones
			case karpv1.CapacityTypeLabelKey:
				values = t.capacityTypes
			default:
				if v, ok := t.it.Labels[key]; ok && (!constrained || r.Has(v)) {
					out.Insert(v)
				}
				continue
			}
			for v := range values {
				if !out.Has(v) && (!constrained || r.Has(v)) {
					out.Insert(v)
				}
			}
		}
		return sets.List(out)
	}
	if constrained && !r.Complement() {
		return r.Values()
	}
	return nil
}

func policyNote(s *solver, p *corev1.Pod, pl *pool) string {
	if pc := s.policy(p, pl); pc != nil && pc.Source != "" {
		return " allowed by " + pc.Source
	}
	return ""
}

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
	best := 0.0
	sel := s.intern.sel(reqs)
	checks, exact := s.intern.checks(reqs, keys)
	for _, o := range c.pool.types {
		if o.check(reqs, keys, checks, exact) != nil || !allowedType(o, typeFilters) {
			continue
		}
		if off, ok := o.cheapestOfferingSel(sel, c.filters); ok {
			if v := cover(o.alloc, off.Price); v > 0 && (best == 0 || v < best) {
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
		if off, ok := t.cheapestOfferingSel(sel, c.filters); ok && cover(t.alloc, off.Price) <= best*growthTolerance {
			out = append(out, t)
		}
	}
	return out
}
