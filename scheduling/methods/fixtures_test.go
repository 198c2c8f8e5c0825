package methods

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// types is a small catalog: size n has 2^n vCPU and 2^(n+1) GiB at $0.05 x 2^n on-demand, 30%
// of that on Spot, in zones a and b; "c5.large" costs what "m5.large" does.
func types() []*cloudprovider.InstanceType {
	var out []*cloudprovider.InstanceType
	for i, name := range []string{"m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "c5.large"} {
		n := i
		if name == "c5.large" {
			n = 0
		}
		cpu := 2 << n
		od := 0.05 * float64(int(1)<<n) * 2
		it := &cloudprovider.InstanceType{Name: name, Labels: map[string]string{
			corev1.LabelInstanceTypeStable: name, karpv1.LabelInstanceFamily: name[:2], corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI),
				corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", cpu*2)), corev1.ResourcePods: resource.MustParse("110")}}
		for _, z := range []string{"z-a", "z-b"} {
			it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: od, Available: true},
				cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: od * 0.3, Available: true})
		}
		out = append(out, it)
	}
	return out
}

func nodePool(name string, mut ...func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: karpv1.NodePoolSpec{
		Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{
				Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot}}}}},
		Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.MustParseNillableDuration("30s"), ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
			Budgets: []karpv1.Budget{{Nodes: "100%"}}}}}
	for _, m := range mut {
		m(np)
	}
	return np
}

func node(name, itype, capacityType, zone string, mut ...func(*corev1.Node)) *corev1.Node {
	var alloc corev1.ResourceList
	for _, it := range types() {
		if it.Name == itype {
			alloc = it.Allocatable()
		}
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-48 * time.Hour)), Labels: map[string]string{
		karpv1.NodePoolLabelKey: "default", corev1.LabelInstanceTypeStable: itype, karpv1.CapacityTypeLabelKey: capacityType, corev1.LabelTopologyZone: zone}},
		Status: corev1.NodeStatus{Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, m := range mut {
		m(n)
	}
	return n
}

func pod(name, nodeName, cpu, mem string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func pdb(name string, minAvailable int, app string) *k8spolicyv1.PodDisruptionBudget {
	return &k8spolicyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: k8spolicyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptrIntStr(minAvailable), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
}

func ptrIntStr(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }

// world is a cluster for one test.
type world struct {
	pools []*karpv1.NodePool
	nodes []*corev1.Node
	pods  []*corev1.Pod
	pdbs  []*k8spolicyv1.PodDisruptionBudget
	opts  Options
	// nominated names a node the provisioner nominated pending pods to.
	nominated string
	// claims are NodeClaims of the nodes (by node name, see claim).
	claims []*karpv1.NodeClaim
	// buffers are CapacityBuffers' virtual pods.
	buffers []*corev1.Pod
	// catalog, when set, replaces types() as every NodePool's instance types.
	catalog []*cloudprovider.InstanceType
	// pvs and pvcs are the pods' volumes (where they can be reached).
	pvs  []*corev1.PersistentVolume
	pvcs []*corev1.PersistentVolumeClaim
}

// claim is an initialized NodeClaim of the named node.
func claim(nodeName string, mut ...func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: apitypes.UID("uid-" + nodeName), Labels: map[string]string{karpv1.NodePoolLabelKey: "default"},
		CreationTimestamp: metav1.NewTime(now.Add(-48 * time.Hour))},
		Status: karpv1.NodeClaimStatus{NodeName: nodeName, Conditions: []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue}}}}
	for _, m := range mut {
		m(nc)
	}
	return nc
}

func (w world) cluster() *Cluster {
	pools := w.pools
	if len(pools) == 0 {
		pools = []*karpv1.NodePool{nodePool("default")}
	}
	objs := &snapshot.Objects{Nodes: w.nodes, Pods: w.pods, NodePools: pools, PDBs: w.pdbs, NodeClaims: w.claims, BufferPods: w.buffers,
		PersistentVolumes: w.pvs, PersistentVolumeClaims: w.pvcs}
	catalog := w.catalog
	if catalog == nil {
		catalog = types()
	}
	env := snapshot.Env{Now: now, InstanceTypes: func(*karpv1.NodePool) ([]*cloudprovider.InstanceType, error) { return catalog, nil }}
	if w.nominated != "" {
		// A pending pod the provisioner nominated to the node.
		waiting := pod("nominated", "", "100m", "128Mi", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		})
		objs.Pods = append(append([]*corev1.Pod(nil), objs.Pods...), waiting)
		env.Nominations = nominations{waiting.Name: w.nominated}
	}
	return NewCluster(snapshot.Build(objs, env), w.opts)
}

// nominations are the provisioner's, by pod name: all made now.
type nominations map[string]string

func (n nominations) NominatedTo(p *corev1.Pod) (string, time.Time, bool) {
	target, ok := n[p.Name]
	return target, now, ok
}
func (nominations) RejectedSince(*corev1.Pod, time.Time) bool { return false }
func (nominations) DisplacedGrace() time.Duration             { return 5 * time.Second }

// commands runs one method on the world's candidates that qualify for it.
func commands(t *testing.T, m Method, c *Cluster) []*Command {
	t.Helper()
	var cands []*Candidate
	for _, cand := range c.Candidates {
		if m.Qualifies(c, cand) {
			cands = append(cands, cand)
		}
	}
	cmds, err := m.Commands(context.Background(), c, cands, NewBudgets(c))
	if err != nil {
		t.Fatal(err)
	}
	return cmds
}

// commandNames are the candidates' node names of each command, joined.
func commandNames(cmds []*Command) []string {
	var out []string
	for _, cmd := range cmds {
		s := string(cmd.Decision) + ":"
		for i, c := range cmd.Candidates {
			if i > 0 {
				s += ","
			}
			s += c.Name()
		}
		for _, r := range cmd.Replacements {
			s += "+" + r.InstanceType.Name + "/" + r.Offering.CapacityType
		}
		out = append(out, s)
	}
	return out
}
