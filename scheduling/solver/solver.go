package solver

import (
	"errors"
	"sort"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
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
	// PodVolumes are the volumes pods attach, by CSI driver, by pod namespace/name: a node's
	// VolumeLimits cap them.
	PodVolumes map[string]scheduling.Volumes
	// Policy, when set, adds per-namespace constraints on new NodeClaims.
	Policy PolicyHook
	// GrowFreely lets a NodeClaim grow into any type that fits its pods, however it compares
	// with a node of their own: disruption sets it when its replacement must be one node.
	GrowFreely bool
	// IgnorePreferences drops the pods' preferences: preferred node affinity, preferred pod
	// (anti-)affinity and ScheduleAnyway topology spreads (upstream's PREFERENCE_POLICY=Ignore).
	IgnorePreferences bool
	// MinValuesBestEffort lowers a requirement's minValues that the types left cannot meet,
	// instead of refusing the pod, and marks the NodeClaim (NodeClaim.MinValuesRelaxed;
	// upstream's MIN_VALUES_POLICY=BestEffort).
	MinValuesBestEffort bool
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
	// FreedReservations are slots of capacity reservations the caller counts as freed, by
	// reservation ID: a reserved node that goes first (disruption's terminate-first, upstream's
	// credited reservation). Each is room in its reservation, offered even where the cloud
	// provider reports the reservation full.
	FreedReservations map[string]int
	// Catalog, when set, keeps the instance types and nodes prepared by one solve for the
	// next solves of the same batch (NewCatalog, NewNodeCatalog).
	Catalog *Catalog
	// NamespaceLabels are the cluster's namespaces' labels, by name, for the namespaceSelector
	// of pod (anti-)affinity terms; nil when not known (a selector then selects only the pod's
	// own namespace).
	NamespaceLabels map[string]map[string]string
	// TakenHostnames are names a NodeClaim's Hostname must not take besides the Nodes': the
	// nodes a disruption simulation removes, so that a move to a replacement never names a
	// removed node.
	TakenHostnames []string
	// Progress, when set, is told after each pod is placed (or found unschedulable) how many
	// are left, for upstream's karpenter_scheduler_queue_depth. It must be cheap, and must
	// not change the input.
	Progress func(left int)
}

// Catalog keeps instance types prepared for solving (requirements, allocatable, available
// offerings cheapest first, zones and capacity types interned) and nodes (what their pods
// leave free, host ports, volumes) across the solves of one batch that share them: the
// planner's budget retries and Spot-share passes, the provisioner's effective-zones metric
// before them, a disruption pass's simulations (docs/architecture.md, "Prepare once, solve
// many"). Types and nodes are known by their pointers, so a catalog is for one snapshot;
// solves that free reservations (Input.FreedReservations) prepare their own types. A Catalog
// is not for concurrent solves.
type Catalog struct {
	intern *interner
	// types are the prepared instance types (nil: not kept, NewNodeCatalog).
	types map[*cloudprovider.InstanceType]*instanceType
	// nodes are the prepared nodes: what their pods leave free, ports, volumes.
	nodes map[*scheduling.Node]*existing
}

// NewCatalog is an empty catalog for a batch, keeping instance types and nodes. A node is
// known by its pointer too: the batch's nodes and their pods must not change between solves.
func NewCatalog() *Catalog {
	return &Catalog{intern: newInterner(), types: map[*cloudprovider.InstanceType]*instanceType{}, nodes: map[*scheduling.Node]*existing{}}
}

// NewNodeCatalog keeps the prepared nodes only, for solves whose instance types are new
// copies each time (disruption's replacement rules filter offerings into copies): keeping
// those would only grow the catalog.
func NewNodeCatalog() *Catalog {
	return &Catalog{nodes: map[*scheduling.Node]*existing{}}
}

// Policies are the manager's scheduling policies (upstream's PREFERENCE_POLICY and
// MIN_VALUES_POLICY), the same for every solve it makes: provisioning's and disruption's.
type Policies struct {
	IgnorePreferences, MinValuesBestEffort bool
}

// Apply sets the policies on in, and returns it.
func (p Policies) Apply(in *Input) *Input {
	in.IgnorePreferences, in.MinValuesBestEffort = p.IgnorePreferences, p.MinValuesBestEffort
	return in
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
	// priceMemo keeps typePrices's answers by requirements and filters.
	priceMemo map[string][]float64
	// refusals keeps the plans' type filtering and growth refusals (refusal).
	refusals map[refusalKey]error
	// filterCount numbers the offer filters.
	filterCount int
	in          *Input
	pools       []*pool
	nodes       []*existing
	claims      []*NodeClaim
	topo        *topology
	intern      *interner
	// reserved is how much room each capacity reservation has left in this solve.
	reserved reservations
	// invalid are the pods whose constraints do not parse, with why: never placed.
	invalid map[*corev1.Pod]string
	// nodeNames are the input nodes' names and hostnames, which no NodeClaim's Hostname takes.
	nodeNames map[string]bool
	// finalScratch is finalize's slice of priced types, reused NodeClaim after NodeClaim.
	finalScratch []priced
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
	pr, err := Prepare(in)
	if err != nil {
		return nil, err
	}
	return pr.Solve()
}

// Prepared is an input turned into the solver's structures once (the NodePools with their
// instance types, the nodes, the topology): what EffectiveZones reads and what Solve places
// the pods with. Solve uses it up; read EffectiveZones before.
type Prepared struct {
	s    *solver
	used bool
}

// Prepare turns the input into the solver's structures.
func Prepare(in *Input) (*Prepared, error) {
	s, err := newSolver(in)
	if err != nil {
		return nil, err
	}
	return &Prepared{s: s}, nil
}

// Solve places the pods (see the package function Solve). A Prepared solves once.
func (pr *Prepared) Solve() (*Result, error) {
	if pr.used {
		return nil, errors.New("a prepared input solves once; prepare it again")
	}
	pr.used = true
	s, in := pr.s, pr.s.in
	pods := make([]*corev1.Pod, 0, len(in.Pods))
	requests := make(map[*corev1.Pod]corev1.ResourceList, len(in.Pods))
	out := &Result{Existing: map[string][]*corev1.Pod{}, Requests: requests}
	for _, p := range in.Pods {
		if why, bad := s.invalid[p]; bad {
			requests[p] = s.requests.Of(p)
			out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: p, Reason: why})
			continue
		}
		pods = append(pods, p)
	}
	s.podRes = make(map[*corev1.Pod]res, len(pods))
	var virtual map[*corev1.Pod]bool
	for _, p := range pods {
		requests[p] = s.requests.Of(p)
		s.podRes[p] = toRes(requests[p])
		if scheduling.IsVirtual(p) {
			if virtual == nil {
				virtual = map[*corev1.Pod]bool{}
			}
			virtual[p] = true
		}
	}
	// Largest first, measuring cpu and memory together (a vCPU weighs as much as 4 GiB, the
	// general-purpose shape), so that cpu-heavy and memory-heavy pods arrive interleaved. Real
	// pods come before CapacityBuffers' virtual ones: room that exists goes to pods that exist.
	size := func(p *corev1.Pod) float64 {
		r := s.podRes[p]
		return float64(r.cpu)/1000 + float64(r.mem)/(4<<30)
	}
	sort.SliceStable(pods, func(i, j int) bool {
		if virtual != nil && virtual[pods[i]] != virtual[pods[j]] {
			return virtual[pods[j]]
		}
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
	left := len(pods)
	report := func() {
		if in.Progress != nil {
			in.Progress(left)
		}
	}
	done := func() {
		left--
		report()
	}
	var free []*corev1.Pod
	for _, p := range pods {
		if _, seeded := seedOf[p]; !seeded && s.packable(p) {
			free = append(free, p)
			continue
		}
		r := s.podRes[p]
		s.aheadCPU, s.aheadMem = s.aheadCPU-r.cpu, s.aheadMem-r.mem
		if i, ok := seedOf[p]; ok && s.placeSeeded(p, requests[p], in.Seed[i], &rebuilt[i]) {
			done()
			continue
		}
		if reason := s.place(p, requests[p]); reason != "" {
			out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: p, Reason: reason})
		}
		done()
	}
	rest := s.pack(free, requests)
	// Packing put the others on existing nodes.
	left -= len(free) - len(rest)
	report()
	for _, p := range rest {
		r := s.podRes[p]
		s.aheadCPU, s.aheadMem = s.aheadCPU-r.cpu, s.aheadMem-r.mem
		if reason := s.place(p, requests[p]); reason != "" {
			out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: p, Reason: reason})
		}
		done()
	}
	out.Unschedulable = s.retry(out.Unschedulable, requests)
	for _, n := range s.nodes {
		if len(n.placed) > 0 {
			out.Existing[n.node.Name] = n.placed
		}
	}
	for _, c := range s.claims {
		s.finalize(c)
		if c.InstanceType == nil {
			// Placement counts a reservation's room without taking it; finalize hands the
			// room out in order. A NodeClaim whose only offerings were in reservations the
			// NodeClaims before it filled launches nothing: its pods wait for the next
			// solve, which sees those reservations full and looks elsewhere.
			for _, p := range c.Pods {
				out.Unschedulable = append(out.Unschedulable, Unschedulable{Pod: p,
					Reason: "the capacity reservations its node could launch into have no room left: the other new nodes of the batch took it"})
			}
			continue
		}
		out.NodeClaims = append(out.NodeClaims, c)
	}
	sort.SliceStable(out.Unschedulable, func(i, j int) bool { return PodKey(out.Unschedulable[i].Pod) < PodKey(out.Unschedulable[j].Pod) })
	out.LowerBoundPerHour = s.lowerBound(out.NodeClaims)
	return out, nil
}

// retry tries again, in order and while any of them gets placed, the pods that failed for a
// pod affinity or a topology spread: the pods placed after them may be what they needed (a
// smaller pod they are affine to, the pods of the other domains that lower the spread's
// minimum). Upstream's scheduling queue retries a failed pod the same way. Every other
// refusal (resources, limits, ports, anti-affinity) only hardens as pods are placed.
func (s *solver) retry(failed []Unschedulable, requests map[*corev1.Pod]corev1.ResourceList) []Unschedulable {
	for progress := true; progress; {
		progress = false
		kept := failed[:0]
		for _, u := range failed {
			if !s.topo.waitsOnOthers(u.Pod) {
				kept = append(kept, u)
				continue
			}
			if reason := s.place(u.Pod, requests[u.Pod]); reason != "" {
				kept = append(kept, Unschedulable{Pod: u.Pod, Reason: reason})
				continue
			}
			progress = true
		}
		failed = kept
	}
	return failed
}

func weight(np *karpv1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

// newSolver prepares a solve of the input: pools, nodes and topology, nothing placed yet.
func newSolver(in *Input) (*solver, error) {
	s := &solver{in: in, topo: newTopology(), standalone: map[standaloneKey]float64{}, intern: newInterner(), reserved: reservations{},
		offerFilters: map[*Constraints]*offerFilter{}, offerFiltersByKey: map[string]*offerFilter{}}
	if in.Catalog != nil && in.Catalog.types != nil {
		// The kept types' zone and capacity-type bits are the catalog's interner's.
		s.intern = in.Catalog.intern
	}
	s.topo.ignorePreferences = in.IgnorePreferences
	s.topo.namespaceLabels = in.NamespaceLabels
	if s.requests = in.Requests; s.requests == nil {
		s.requests = scheduling.NewPodRequestCache()
	}
	if err := s.prepare(); err != nil {
		return nil, err
	}
	return s, nil
}
