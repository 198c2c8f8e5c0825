package solver

import (
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// prepare turns the input into the solver's structures: the NodePools in weight order with
// the instance types each can launch, the existing and in-flight nodes with their free room,
// and the topology groups of the pending pods, counted over the pods already placed.
func (s *solver) prepare() error {
	for _, in := range s.in.NodePools {
		s.pools = append(s.pools, s.preparePool(in))
	}
	sort.SliceStable(s.pools, func(i, j int) bool {
		wi, wj := weight(s.pools[i].np), weight(s.pools[j].np)
		if wi != wj {
			return wi > wj
		}
		return s.pools[i].name < s.pools[j].name
	})
	s.prepareNodes()
	for _, p := range s.in.Pods {
		if err := s.topo.register(p); err != nil {
			// A selector that does not parse keeps its pod pending, with why; the rest of
			// the batch is placed as usual.
			if s.invalid == nil {
				s.invalid = map[*corev1.Pod]string{}
			}
			s.invalid[p] = "its scheduling constraints do not parse: " + err.Error()
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

// preparePool is a NodePool's requirements (its own, its name and its template labels), what
// its limits leave, the label keys its types define, and the types it can launch.
func (s *solver) preparePool(in *NodePool) *pool {
	np := in.NodePool
	p := &pool{np: np, name: np.Name, taints: np.Spec.Template.Spec.Taints, overhead: in.DaemonSetOverhead, typeKeys: sets.New[string]()}
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
	poolTaints := taintsKey(p.taints)
	overhead := toRes(in.DaemonSetOverhead)
	for _, it := range in.InstanceTypes {
		t := s.prepareType(it)
		if t == nil || t.compatible(p.reqs, poolTypeKeys) != nil {
			continue
		}
		if ok, _ := overhead.fitsIn(t.alloc); !ok {
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
	// The domains of the keys its types do not define: the values its requirements and
	// template labels list (a NodeClaim takes one of them), as upstream counts them.
	if len(p.types) > 0 {
		for _, k := range p.reqs.Keys() {
			if r := p.reqs[k]; !p.typeKeys.Has(k) && !r.Complement() {
				for _, v := range r.Values() {
					s.topo.addDomain(k, v, p.taints, poolTaints)
				}
			}
		}
	}
	if len(p.types) == 0 {
		p.excluded = fmt.Sprintf("no instance type of its %d matches its requirements and has an available offering", len(in.InstanceTypes))
	}
	return p
}

// prepareType is an instance type as the solver reads it: its labels and the zones and
// capacity types of its available offerings as requirements and bit masks, its offerings
// cheapest first; nil when it has no available offering.
func (s *solver) prepareType(it *cloudprovider.InstanceType) *instanceType {
	c := s.in.Catalog
	if c == nil || c.types == nil || len(s.in.FreedReservations) > 0 {
		return s.buildType(it)
	}
	base, ok := c.types[it]
	if !ok {
		base = s.buildType(it)
		c.types[it] = base
		return base
	}
	if base == nil {
		return nil
	}
	// The same type prepared by an earlier solve of the batch: this solve's number and
	// reservation ledger on a copy.
	t := *base
	t.idx, t.reserved = s.typeCount, s.reserved
	s.typeCount++
	for _, o := range t.offerings {
		if o.ReservationID != "" {
			if _, seen := s.reserved[o.ReservationID]; !seen {
				s.reserved[o.ReservationID] = max(o.ReservationCapacity, 0)
			}
		}
	}
	return &t
}

// buildType prepares an instance type from its labels, allocatable and offerings.
func (s *solver) buildType(it *cloudprovider.InstanceType) *instanceType {
	t := &instanceType{it: it, reqs: scheduling.LabelRequirements(it.Labels), alloc: toRes(it.Allocatable()), idx: s.typeCount}
	s.typeCount++
	zones, cts := sets.New[string](), sets.New[string]()
	for _, o := range it.Offerings {
		if o.ReservationID != "" {
			freed := s.in.FreedReservations[o.ReservationID]
			room := max(o.ReservationCapacity, 0) + freed
			if room <= 0 {
				continue
			}
			if freed > 0 && o.ReservationCapacity <= 0 {
				// Full, so not available as the provider reports it: the freed slot is room.
				o.Available = true
			}
			if _, seen := s.reserved[o.ReservationID]; !seen {
				s.reserved[o.ReservationID] = room
			}
		}
		if o.Available {
			zones.Insert(o.Zone)
			cts.Insert(o.CapacityType)
			t.offerings = append(t.offerings, o)
		}
	}
	if zones.Len() == 0 {
		return nil
	}
	t.reqs[karpv1.LabelTopologyZone] = scheduling.NewRequirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, sets.List(zones)...)
	t.reqs[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, sets.List(cts)...)
	t.zones, t.capacityTypes, t.in, t.reserved = zones, cts, s.intern, s.reserved
	// Cheapest first, by the one price rule (the type is the same, so zone, capacity type
	// and reservation break ties).
	sort.SliceStable(t.offerings, func(i, j int) bool {
		return cloudprovider.CompareOfferings(it.Name, t.offerings[i], it.Name, t.offerings[j]) < 0
	})
	for _, o := range t.offerings {
		zb, cb := s.intern.bit(s.intern.zones, o.Zone), s.intern.bit(s.intern.cts, o.CapacityType)
		t.offerZone, t.offerCT = append(t.offerZone, zb), append(t.offerCT, cb)
		t.zoneMask, t.ctMask = t.zoneMask|zb, t.ctMask|cb
	}
	return t
}

// prepareNode is a node with what its pods leave free, its host ports in use and its volumes,
// from the catalog when an earlier solve of the batch prepared the same node.
func (s *solver) prepareNode(n *scheduling.Node) *existing {
	c := s.in.Catalog
	if c != nil {
		if base, ok := c.nodes[n]; ok {
			return &existing{node: n, reqs: base.reqs, available: base.available.DeepCopy(), ports: maps.Clone(base.ports), volumes: base.volumes.Clone()}
		}
	}
	e := &existing{node: n, reqs: scheduling.LabelRequirements(n.Labels), available: n.Allocatable.DeepCopy(), ports: map[string]bool{},
		volumes: scheduling.NewAttachments(n.VolumeLimits)}
	if _, ok := n.Labels[corev1.LabelHostname]; !ok {
		e.reqs[corev1.LabelHostname] = scheduling.NewRequirement(corev1.LabelHostname, corev1.NodeSelectorOpIn, n.Name)
	}
	for _, p := range n.Pods {
		e.available = scheduling.Subtract(e.available, s.requests.Of(p))
		e.volumes.Add(s.in.PodVolumes[PodKey(p)])
		for _, hp := range hostPorts(p) {
			e.ports[hp] = true
		}
	}
	if c != nil {
		c.nodes[n] = &existing{node: n, reqs: e.reqs, available: e.available.DeepCopy(), ports: maps.Clone(e.ports), volumes: e.volumes.Clone()}
	}
	return e
}

// prepareNodes are the existing nodes, then the in-flight ones, by name, each with what its
// pods leave free, its host ports in use, and its labels as topology domains.
func (s *solver) prepareNodes() {
	nodes := append([]*scheduling.Node(nil), s.in.Nodes...)
	sort.SliceStable(nodes, func(i, j int) bool {
		if nodes[i].InFlight != nodes[j].InFlight {
			return !nodes[i].InFlight
		}
		return nodes[i].Name < nodes[j].Name
	})
	if len(nodes)+len(s.in.TakenHostnames) > 0 {
		s.nodeNames = make(map[string]bool, len(nodes)+len(s.in.TakenHostnames))
	}
	for _, name := range s.in.TakenHostnames {
		s.nodeNames[name] = true
	}
	for _, n := range nodes {
		s.nodeNames[n.Name] = true
		if h, ok := n.Labels[corev1.LabelHostname]; ok {
			s.nodeNames[h] = true
		}
		nodeTaints := taintsKey(n.Taints)
		for k, v := range n.Labels {
			s.topo.addDomain(k, v, n.Taints, nodeTaints)
		}
		s.nodes = append(s.nodes, s.prepareNode(n))
	}
}
