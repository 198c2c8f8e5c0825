package showback

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
	"github.com/karpenter-policy/karpenter/test"
)

func kubeNode(name, pool, typ, ct, cpu, mem string, gpus int64) *corev1.Node {
	labels := map[string]string{corev1.LabelInstanceTypeStable: typ, karpv1.CapacityTypeLabelKey: ct, corev1.LabelTopologyZone: "us-east-1a"}
	if pool != "" {
		labels[karpv1.NodePoolLabelKey] = pool
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("58")}
	if gpus > 0 {
		n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func pod(ns, name, on, cpu, mem string, gpus int64) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	if gpus > 0 {
		req["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: on,
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req, Limits: corev1.ResourceList{"nvidia.com/gpu": req["nvidia.com/gpu"]}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func cluster(t *testing.T) *Showback {
	t.Helper()
	np := test.NodePool(func(np *karpv1.NodePool) { np.Name = "general" })
	gpu := test.NodePool(func(np *karpv1.NodePool) { np.Name = "gpu" })
	cordoned := kubeNode("n4", "general", "c5.xlarge", "on-demand", "4", "8Gi", 0)
	cordoned.Spec.Unschedulable = true
	objs := &snapshot.Objects{NodePools: []*karpv1.NodePool{np, gpu},
		Namespaces: []*corev1.Namespace{namespace("team-a"), namespace("team-b"), namespace("ml"), namespace("quiet")},
		Nodes: []*corev1.Node{
			kubeNode("n1", "general", "m5.large", "on-demand", "2", "8Gi", 0),
			kubeNode("n2", "general", "c5.large", "spot", "2", "4Gi", 0),
			kubeNode("n3", "gpu", "g4dn.xlarge", "on-demand", "4", "16Gi", 1),
			cordoned,
			kubeNode("n5", "", "m5.xlarge", "on-demand", "4", "16Gi", 0),
			kubeNode("n6", "", "unknown.large", "on-demand", "2", "8Gi", 0),
		},
		Pods: []*corev1.Pod{
			pod("team-a", "a-0", "n1", "1", "4Gi", 0), pod("team-b", "b-0", "n1", "500m", "2Gi", 0),
			pod("team-b", "b-1", "n2", "1", "2Gi", 0),
			pod("ml", "train", "n3", "1", "4Gi", 1), pod("team-a", "a-1", "n3", "1", "4Gi", 0),
			pod("team-a", "a-2", "n4", "2", "4Gi", 0),
			pod("kube-system", "coredns", "n5", "100m", "70Mi", 0),
			pod("team-b", "b-2", "n6", "1", "1Gi", 0),
		}}
	types := catalog.Embedded().ForProvider()
	snap := snapshot.Build(objs, snapshot.Env{Now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC),
		InstanceTypes: func(*karpv1.NodePool) ([]*cloudprovider.InstanceType, error) { return types, nil }})
	return Of(snap)
}

// The namespaces' costs and the idle costs add up to the sum of the node prices, to the cent.
func TestNamespacesAndIdleAddUpToTheNodePrices(t *testing.T) {
	s := cluster(t)
	charged := 0.0
	for _, ns := range s.Namespaces {
		charged += ns.Cost
	}
	idle := 0.0
	for _, v := range s.Idle() {
		idle += v
	}
	if math.Abs(charged+idle-s.Total()) >= 0.005 {
		t.Errorf("namespaces %.6f + idle %.6f = %.6f, node prices %.6f", charged, idle, charged+idle, s.Total())
	}
	pools := 0.0
	for _, v := range s.NodePoolPrices() {
		pools += v
	}
	if math.Abs(pools-s.Total()) > 1e-9 {
		t.Errorf("NodePool prices sum to %v, nodes to %v", pools, s.Total())
	}
	// m5.large 0.096, c5.large Spot 0.032582, g4dn.xlarge 0.526, c5.xlarge 0.17, m5.xlarge 0.192.
	if want := 0.096 + 0.032582 + 0.526 + 0.17 + 0.192; math.Abs(s.Total()-want) > 1e-9 {
		t.Errorf("total %v, want %v", s.Total(), want)
	}
}

// Every namespace is listed, also one that runs nothing; pods on a cordoned node and on a
// node of no NodePool are charged; a node no instance type prices is listed as unpriced.
func TestEveryNamespaceAndNodeIsAccountedFor(t *testing.T) {
	s := cluster(t)
	for _, ns := range []string{"team-a", "team-b", "ml", "quiet", "kube-system"} {
		if s.Namespaces[ns] == nil {
			t.Errorf("namespace %s is not listed", ns)
		}
	}
	if s.Namespaces["quiet"].Cost != 0 || s.Namespaces["quiet"].Pods != 0 {
		t.Errorf("quiet runs nothing: %+v", s.Namespaces["quiet"])
	}
	// a-2 takes half of n4's cpu and memory: half of $0.17.
	if got := s.Namespaces["team-a"].OnNodePools["general"]; math.Abs(got-(0.096*(0.5+0.5)/2+0.17*(0.5+0.5)/2)) > 1e-9 {
		t.Errorf("team-a on general: %v", got)
	}
	if s.Namespaces["kube-system"].OnNodePools[""] <= 0 {
		t.Errorf("coredns on a node of no NodePool is not charged: %+v", s.Namespaces["kube-system"])
	}
	if u := s.Unpriced(); len(u) != 1 || u[0] != "n6" {
		t.Errorf("unpriced %v, want [n6]", u)
	}
	if s.Namespaces["team-b"].Pods != 3 {
		t.Errorf("team-b pods %d, want 3 (one on the unpriced node, charged 0)", s.Namespaces["team-b"].Pods)
	}
}

// On a GPU node the pod requesting the GPU pays for it; the pod beside it with the same cpu
// and memory pays only its share of the rest.
func TestGPUPodPaysForTheGPU(t *testing.T) {
	s := cluster(t)
	ml := s.Namespaces["ml"].OnNodePools["gpu"]
	a := s.Namespaces["team-a"].OnNodePools["gpu"]
	if ml <= 3*a {
		t.Errorf("the GPU pod pays %v, the pod without a GPU %v: the GPU's part is not the GPU pod's", ml, a)
	}
	if s.Namespaces["ml"].GPU != 1 {
		t.Errorf("ml requests %v GPUs, want 1", s.Namespaces["ml"].GPU)
	}
	if idle := s.Idle()["gpu"]; idle < 0 || idle > 0.526 {
		t.Errorf("gpu idle %v", idle)
	}
}
