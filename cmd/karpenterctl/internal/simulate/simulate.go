// Package simulate runs the solver on manifests instead of a cluster: NodePools, workloads
// (Pods, Deployments, ReplicaSets, StatefulSets, Jobs, DaemonSets), CapacityBuffers and existing Nodes with
// their pods, as a repository holds them, and reports what the provisioner would launch. It
// backs `karpenterctl simulate`; like the solver it does no I/O.
package simulate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Input are the decoded objects of a simulation.
type Input struct {
	// NodePools are v1: the CLI converts v1beta1 ones at its edge (webhooks/conversion).
	NodePools []*karpv1.NodePool
	// NodeOverlays change the instance types' prices and extended resources, as the manager
	// applies them with the NodeOverlay feature gate on (scheduling/overlay).
	NodeOverlays []*karpv1alpha1.NodeOverlay
	Workloads    []runtime.Object // Pods, Deployments, ReplicaSets, StatefulSets, Jobs, DaemonSets
	Nodes        []*corev1.Node
	BoundPods    []*corev1.Pod // pods with spec.nodeName, from the nodes' files
	// LimitRanges and RuntimeClasses, from the workloads' files, add to what pods request as
	// the API server would admit them (scheduling.Admission).
	LimitRanges    []*corev1.LimitRange
	RuntimeClasses []*nodev1.RuntimeClass
	// Storage are the PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes
	// read from any input file: where pods' volumes can be reached, how many a node attaches.
	Storage       Storage
	InstanceTypes []*cloudprovider.InstanceType
	// CapacityBuffers keep room as virtual pending pods (scheduling.BufferPods), resolved
	// against PodTemplates and the Workloads; their NodeClaims and prices count as the
	// manager's do, against the buffer's namespace's CapacityBudget too.
	CapacityBuffers []*autoscalingv1beta1.CapacityBuffer
	PodTemplates    []*corev1.PodTemplate
	// Planner, when set, applies CapacityBudgets and CapacityPolicies around the solver.
	Planner *planner.Planner
}

// Storage are the objects that say where volumes can go.
type Storage struct {
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
	CSINodes               []*storagev1.CSINode
}

// Add takes a storage object; it reports false for any other kind.
func (s *Storage) Add(o runtime.Object) bool {
	switch v := o.(type) {
	case *corev1.PersistentVolume:
		s.PersistentVolumes = append(s.PersistentVolumes, v)
	case *corev1.PersistentVolumeClaim:
		if v.Namespace == "" {
			v.Namespace = corev1.NamespaceDefault
		}
		s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, v)
	case *storagev1.StorageClass:
		s.StorageClasses = append(s.StorageClasses, v)
	case *storagev1.CSINode:
		s.CSINodes = append(s.CSINodes, v)
	default:
		return false
	}
	return true
}

// Report is the simulation's outcome; its JSON shape is documented in docs/simulate.md.
type Report struct {
	NodeClaims    []NodeClaim    `json:"nodeClaims"`
	ExistingNodes []ExistingNode `json:"existingNodes"`
	Unschedulable []Pending      `json:"unschedulable"`
	Totals        Totals         `json:"totals"`
	// Namespaces account for each namespace with pending pods when policies are applied.
	Namespaces map[string]*NamespaceReport `json:"namespaces,omitempty"`
	// Teams account for each ClusterCapacityBudget that selects a namespace with pending
	// pods, by its name: its namespaces together.
	Teams map[string]*TeamReport `json:"teams,omitempty"`
	// PolicyWarnings are Warn results (and DryRun ones, marked so); they blocked nothing.
	PolicyWarnings []string `json:"policyWarnings,omitempty"`
	// Disruption is what disruption passes do to the cluster (simulate --disrupt).
	Disruption *DisruptionReport `json:"disruption,omitempty"`
	// Nodes are the existing nodes (--nodes) with the capacity type and price each is taken
	// at.
	Nodes []PricedNode `json:"nodes,omitempty"`
}

// NamespaceReport is one namespace under the policies: its run-rate and Spot share once the
// new NodeClaims launch (existing nodes included), and the pods policies keep pending.
type NamespaceReport struct {
	PricePerHour float64 `json:"pricePerHour"`
	SpotPercent  float64 `json:"spotPercent"`
	// HourlyLimit is its CapacityBudget's limit in force, when it has one.
	HourlyLimit *float64  `json:"hourlyLimit,omitempty"`
	BlockedPods []Pending `json:"blockedPods"`
}

// TeamReport is one ClusterCapacityBudget's namespaces together under the policies: their
// run-rate and Spot share once the new NodeClaims launch, its hourly limit in force, the pods
// it keeps pending.
type TeamReport struct {
	Namespaces   []string `json:"namespaces"`
	PricePerHour float64  `json:"pricePerHour"`
	// SpotPercent is their Spot share together, as the ClusterCapacityBudget judges it.
	SpotPercent float64   `json:"spotPercent"`
	HourlyLimit *float64  `json:"hourlyLimit,omitempty"`
	BlockedPods []Pending `json:"blockedPods"`
}

// NodeClaim is a node to launch.
type NodeClaim struct {
	NodePool      string   `json:"nodePool"`
	InstanceType  string   `json:"instanceType"`
	InstanceTypes []string `json:"instanceTypes"`
	CapacityType  string   `json:"capacityType"`
	Zone          string   `json:"zone"`
	PricePerHour  float64  `json:"pricePerHour"`
	Pods          []string `json:"pods"`
	CPU           string   `json:"cpu"`
	Memory        string   `json:"memory"`
}

// PricedNode is an existing node (--nodes) as the simulation prices it: its capacity type
// and the label that says it ("" when none does and on-demand is assumed), and its price.
type PricedNode struct {
	Name             string  `json:"name"`
	InstanceType     string  `json:"instanceType"`
	CapacityType     string  `json:"capacityType"`
	CapacityTypeFrom string  `json:"capacityTypeFrom"`
	PricePerHour     float64 `json:"pricePerHour"`
}

// Assumed says how a node's capacity type was found, for people: "label L", or "assumed: no
// capacity-type label".
func (n PricedNode) Assumed() string {
	if n.CapacityTypeFrom == "" {
		return "assumed: no capacity-type label"
	}
	return "label " + n.CapacityTypeFrom
}

// pricedNodes are the snapshot's running nodes, by name.
func pricedNodes(snap *snapshot.Snapshot) []PricedNode {
	out := []PricedNode{}
	for _, n := range snap.StateNodes {
		if n.Node == nil {
			continue
		}
		ct, from := scheduling.CapacityTypeOf(n.Labels)
		out = append(out, PricedNode{Name: n.Node.Name, InstanceType: n.Labels[corev1.LabelInstanceTypeStable], CapacityType: ct, CapacityTypeFrom: from,
			PricePerHour: round(n.PricePerHour)})
	}
	sort.Slice(out, func(i, j int) bool { return NaturalLess(out[i].Name, out[j].Name) })
	return out
}

// ExistingNode lists the pending pods placed on an existing node.
type ExistingNode struct {
	Name string   `json:"name"`
	Pods []string `json:"pods"`
}

// Pending is a pod that stays pending.
type Pending struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// Totals sum up the new NodeClaims.
type Totals struct {
	PricePerHour      float64 `json:"pricePerHour"`
	Nodes             int     `json:"nodes"`
	Pods              int     `json:"pods"`
	Unschedulable     int     `json:"unschedulable"`
	CPUUtilization    float64 `json:"cpuUtilization"`
	MemoryUtilization float64 `json:"memoryUtilization"`
	LowerBoundPerHour float64 `json:"lowerBoundPerHour"`
	RatioToLowerBound float64 `json:"ratioToLowerBound"`
}

// Run expands the workloads, solves, and reports. The input becomes the objects the cluster
// model would hold, and the snapshot.Build the controller uses turns them into the solver's
// input: simulate and the provisioner decide on the same thing.
func Run(ctx context.Context, in *Input) (*Report, error) {
	objs, err := in.objects(true)
	if err != nil {
		return nil, err
	}
	snap := in.snapshot(objs, time.Time{})
	res, out, err := planner.Decide(ctx, in.Planner, snap.SolverInput(), nil)
	if err != nil {
		return nil, err
	}
	r := withUnresolved(report(res), snap)
	if out == nil {
		return r, nil
	}
	r.Namespaces = map[string]*NamespaceReport{}
	for name, ns := range out.Namespaces {
		nr := &NamespaceReport{PricePerHour: round(ns.PricePerHour()), SpotPercent: round(SpotPercent(ns)), BlockedPods: []Pending{}}
		if ns.Budget != nil && ns.Budget.HasLimit {
			l := round(ns.Budget.HourlyLimit)
			nr.HourlyLimit = &l
		}
		for _, b := range ns.Blocked {
			nr.BlockedPods = append(nr.BlockedPods, Pending{Pod: solver.PodKey(b.Pod), Reason: b.Violation.Message})
		}
		sort.Slice(nr.BlockedPods, func(i, j int) bool { return NaturalLess(nr.BlockedPods[i].Pod, nr.BlockedPods[j].Pod) })
		r.Namespaces[name] = nr
	}
	for key, t := range out.Teams {
		if r.Teams == nil {
			r.Teams = map[string]*TeamReport{}
		}
		tr := &TeamReport{Namespaces: t.Members, PricePerHour: round(t.PricePerHour()), SpotPercent: round(SpotPercent(t)), BlockedPods: []Pending{}}
		if t.Budget != nil && t.Budget.HasLimit {
			l := round(t.Budget.HourlyLimit)
			tr.HourlyLimit = &l
		}
		for _, b := range t.Blocked {
			tr.BlockedPods = append(tr.BlockedPods, Pending{Pod: solver.PodKey(b.Pod), Reason: b.Violation.Message})
		}
		sort.Slice(tr.BlockedPods, func(i, j int) bool { return NaturalLess(tr.BlockedPods[i].Pod, tr.BlockedPods[j].Pod) })
		r.Teams[strings.TrimPrefix(key, "ClusterCapacityBudget/")] = tr
	}
	for _, w := range out.Warnings {
		r.PolicyWarnings = append(r.PolicyWarnings, w.Message)
	}
	for _, w := range out.DryRun {
		r.PolicyWarnings = append(r.PolicyWarnings, "dry run: "+w.Message)
	}
	for _, e := range out.Errors {
		r.PolicyWarnings = append(r.PolicyWarnings, "evaluation error: "+e.Error())
	}
	sort.Strings(r.PolicyWarnings)
	r.Unschedulable = sortedPending(r.Unschedulable)
	return r, nil
}

// withUnresolved adds to the report's unschedulable pods those whose claim or StorageClass
// does not exist: the controller launches nothing for them either.
func withUnresolved(r *Report, snap *snapshot.Snapshot) *Report {
	r.Nodes = pricedNodes(snap)
	for _, u := range snap.Unresolved {
		r.Unschedulable = append(r.Unschedulable, Pending{Pod: solver.PodKey(u.Pod), Reason: u.Reason})
	}
	r.Unschedulable = sortedPending(r.Unschedulable)
	r.Totals.Unschedulable = len(r.Unschedulable)
	return r
}

// SpotPercent is a namespace's Spot share once the new NodeClaims launch, under its budget's
// bounds in force (policies.SpotBounds.Share), or with no on-demand base when it has none.
func SpotPercent(ns *planner.Namespace) float64 {
	b := policies.NoSpotBounds
	if ns.Budget != nil {
		b = ns.Budget.Spot
	}
	return ns.After().SpotShare(b).Percent
}

// objects are the input as the cluster model would hold them: the NodePools by name, the
// nodes, their bound pods and, with pending, the workloads' pods (pending, in workload order),
// the DaemonSets. Every NodePool has the input's instance types (snapshot).
func (in *Input) objects(pending bool) (*snapshot.Objects, error) {
	pools, err := nodePools(in)
	if err != nil {
		return nil, err
	}
	objs := &snapshot.Objects{Nodes: in.Nodes, NodePools: pools, LimitRanges: in.LimitRanges, RuntimeClasses: in.RuntimeClasses,
		PersistentVolumes: in.Storage.PersistentVolumes, PersistentVolumeClaims: in.Storage.PersistentVolumeClaims,
		StorageClasses: in.Storage.StorageClasses, CSINodes: in.Storage.CSINodes, NodeOverlays: in.NodeOverlays}
	adm := scheduling.Admission{LimitRanges: in.LimitRanges, RuntimeClasses: in.RuntimeClasses}
	for _, w := range in.Workloads {
		switch o := w.(type) {
		case *appsv1.DaemonSet:
			objs.DaemonSets = append(objs.DaemonSets, o)
		default:
			if !pending {
				continue
			}
			ps, err := Expand(w, adm)
			if err != nil {
				return nil, err
			}
			objs.Pods = append(objs.Pods, ps...)
		}
	}
	objs.Pods = append(objs.Pods, in.BoundPods...)
	if objs.BufferPods, err = in.bufferPods(); err != nil {
		return nil, err
	}
	return objs, nil
}

// snapshot builds the snapshot of the objects, every NodePool with the input's instance types.
func (in *Input) snapshot(objs *snapshot.Objects, now time.Time) *snapshot.Snapshot {
	return snapshot.Build(objs, snapshot.Env{Now: now, InstanceTypes: func(*karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
		return in.InstanceTypes, nil
	}})
}

func sortedPending(ps []Pending) []Pending {
	sort.SliceStable(ps, func(i, j int) bool { return NaturalLess(ps[i].Pod, ps[j].Pod) })
	return ps
}

// nodePools are the input's NodePools by name. None is a cluster that launches nothing: its
// pods stay pending (a plan's base before the first NodePool is merged).
func nodePools(in *Input) ([]*karpv1.NodePool, error) {
	out := append([]*karpv1.NodePool(nil), in.NodePools...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Expand turns a workload into its pods, named <namespace>/<controller>-<index> from 0, with
// their requests as the API server would admit them.
func Expand(o runtime.Object, adm scheduling.Admission) ([]*corev1.Pod, error) {
	var (
		meta     metav1.ObjectMeta
		template corev1.PodTemplateSpec
		replicas int32
	)
	switch w := o.(type) {
	case *corev1.Pod:
		p := adm.Admit(w)
		if p.Namespace == "" {
			p.Namespace = corev1.NamespaceDefault
		}
		return []*corev1.Pod{p}, nil
	case *appsv1.Deployment:
		meta, template, replicas = w.ObjectMeta, w.Spec.Template, ptr.Deref(w.Spec.Replicas, 1)
	case *appsv1.ReplicaSet:
		meta, template, replicas = w.ObjectMeta, w.Spec.Template, ptr.Deref(w.Spec.Replicas, 1)
	case *appsv1.StatefulSet:
		meta, template, replicas = w.ObjectMeta, w.Spec.Template, ptr.Deref(w.Spec.Replicas, 1)
	case *batchv1.Job:
		meta, template = w.ObjectMeta, w.Spec.Template
		// A Job runs at most parallelism pods at once, and no more than it has to complete.
		replicas = 1
		if w.Spec.Parallelism != nil {
			replicas = *w.Spec.Parallelism
		}
		if w.Spec.Completions != nil && *w.Spec.Completions < replicas {
			replicas = *w.Spec.Completions
		}
	default:
		return nil, fmt.Errorf("%T is not a workload simulate understands", o)
	}
	ns := meta.Namespace
	if ns == "" {
		ns = corev1.NamespaceDefault
	}
	pods := make([]*corev1.Pod, 0, replicas)
	for i := range replicas {
		p := &corev1.Pod{ObjectMeta: template.ObjectMeta, Spec: template.Spec}
		p.Name = fmt.Sprintf("%s-%d", meta.Name, i)
		p.Namespace = ns
		pods = append(pods, adm.Admit(p))
	}
	return pods, nil
}

func report(res *solver.Result) *Report {
	r := &Report{NodeClaims: []NodeClaim{}, ExistingNodes: []ExistingNode{}, Unschedulable: []Pending{}}
	var usedCPU, usedMem, capCPU, capMem float64
	for _, c := range res.NodeClaims {
		nc := NodeClaim{NodePool: c.NodePool, InstanceType: c.InstanceType.Name, CapacityType: c.Offering.CapacityType,
			Zone: c.Offering.Zone, PricePerHour: round(c.Offering.Price), Pods: podKeys(c.Pods),
			CPU: c.Requests.Cpu().String(), Memory: c.Requests.Memory().String()}
		for _, it := range c.InstanceTypes {
			nc.InstanceTypes = append(nc.InstanceTypes, it.Name)
		}
		alloc := c.InstanceType.Allocatable()
		usedCPU += float64(c.Requests.Cpu().MilliValue())
		usedMem += float64(c.Requests.Memory().Value())
		capCPU += float64(alloc.Cpu().MilliValue())
		capMem += float64(alloc.Memory().Value())
		r.NodeClaims = append(r.NodeClaims, nc)
		// The total adds up the prices listed, each rounded, so that what is printed sums.
		r.Totals.PricePerHour += nc.PricePerHour
		r.Totals.Pods += len(c.Pods)
	}
	var names []string
	for name := range res.Existing {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r.ExistingNodes = append(r.ExistingNodes, ExistingNode{Name: name, Pods: podKeys(res.Existing[name])})
	}
	for _, u := range res.Unschedulable {
		r.Unschedulable = append(r.Unschedulable, Pending{Pod: solver.PodKey(u.Pod), Reason: u.Reason})
	}
	r.Unschedulable = sortedPending(r.Unschedulable)
	r.Totals.Nodes = len(res.NodeClaims)
	r.Totals.Unschedulable = len(res.Unschedulable)
	r.Totals.PricePerHour = round(r.Totals.PricePerHour)
	r.Totals.LowerBoundPerHour = round(res.LowerBoundPerHour)
	if capCPU > 0 {
		r.Totals.CPUUtilization = round(usedCPU / capCPU)
		r.Totals.MemoryUtilization = round(usedMem / capMem)
	}
	if res.LowerBoundPerHour > 0 {
		r.Totals.RatioToLowerBound = round(res.PricePerHour() / res.LowerBoundPerHour)
	}
	return r
}

func podKeys(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = solver.PodKey(p)
	}
	sort.Slice(out, func(i, j int) bool { return NaturalLess(out[i], out[j]) })
	return out
}

// NaturalLess orders pod keys with their index numerically (web-2 before web-10).
func NaturalLess(a, b string) bool {
	pa, na := splitIndex(a)
	pb, nb := splitIndex(b)
	if pa != pb {
		return pa < pb
	}
	return na < nb
}

func splitIndex(s string) (string, int) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 {
		return s, -1
	}
	n := 0
	for _, c := range s[i+1:] {
		if c < '0' || c > '9' {
			return s, -1
		}
		n = n*10 + int(c-'0')
	}
	return s[:i], n
}

func round(f float64) float64 {
	return float64(int64(f*1e4+0.5)) / 1e4
}

// Usage is each namespace's run-rate and Spot share on the input's nodes, by the attribution
// the cluster's budgets and admission use (planner.UsageOf over the snapshot's nodes), priced
// from the input's catalog: what offline admission reads as the namespace's usage.
func Usage(in *Input, now time.Time) (map[string]policies.Usage, error) {
	objs, err := in.objects(false)
	if err != nil {
		return nil, err
	}
	snap := in.snapshot(objs, now)
	return planner.UsageOf(snap.NodesWithBufferRoom(), planner.NewPriceBook(in.InstanceTypes)), nil
}
