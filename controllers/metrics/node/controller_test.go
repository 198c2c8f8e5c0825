package node

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

type model struct{ objs *snapshot.Objects }

func (m *model) Synced() bool               { return true }
func (m *model) Objects() *snapshot.Objects { return m.objs }

func node(name, pool string, cpu, overheadMilli int64, created time.Time) *corev1.Node {
	capacity := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("8Gi")}
	allocatable := capacity.DeepCopy()
	c := allocatable[corev1.ResourceCPU]
	c.Sub(*resource.NewMilliQuantity(overheadMilli, resource.DecimalSI))
	allocatable[corev1.ResourceCPU] = c
	labels := map[string]string{corev1.LabelInstanceTypeStable: "m5.xlarge", corev1.LabelTopologyZone: "z-a", karpv1.CapacityTypeLabelKey: "spot"}
	if pool != "" {
		labels[karpv1.NodePoolLabelKey] = pool
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.NewTime(created)},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable}}
}

func pod(name, nodeName, cpu, cpuLimit string, daemon bool, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: phase}}
	if cpuLimit != "" {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLimit)}
	}
	if daemon {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds", Controller: new(true)}}
	}
	return p
}

func value(t *testing.T, g *prometheus.GaugeVec, nodeName, resourceType string) (float64, bool) {
	t.Helper()
	for _, labels := range seriesOf(t, g) {
		if labels["node_name"] == nodeName && labels["resource_type"] == resourceType {
			return labels2value[key(labels)], true
		}
	}
	return 0, false
}

// labels2value holds the values seriesOf read, by series key.
var labels2value = map[string]float64{}

// seriesOf reads every series of the gauge: its labels, and its value into labels2value.
func seriesOf(t *testing.T, g *prometheus.GaugeVec) []prometheus.Labels {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []prometheus.Labels
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := prometheus.Labels{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			labels2value[key(l)] = m.GetGauge().GetValue()
			out = append(out, l)
		}
	}
	return out
}

// Each node gets its allocatable, overhead, the requests and limits of its pods and of its
// DaemonSet pods (terminal pods not counted), and its age, with upstream's labels; the
// cluster's utilization is requests over allocatable; a node that goes loses its series.
func TestNodeGauges(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	a, b := node("a", "general", 4, 100, now.Add(-time.Hour)), node("b", "", 4, 0, now.Add(-time.Minute))
	m := &model{objs: &snapshot.Objects{
		Nodes:      []*corev1.Node{a, b},
		NodeClaims: []*karpv1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: karpv1.NodeClaimStatus{NodeName: "a"}}},
		Pods: []*corev1.Pod{
			pod("web", "a", "1", "2", false, corev1.PodRunning),
			pod("agent", "a", "250m", "500m", true, corev1.PodRunning),
			pod("done", "a", "2", "", false, corev1.PodSucceeded),
			pod("other", "b", "500m", "", false, corev1.PodRunning),
			pod("pending", "", "3", "", false, corev1.PodPending),
		}}}
	c := NewController(m, clk)
	c.Pass()
	for _, tc := range []struct {
		g          *prometheus.GaugeVec
		node, rt   string
		want       float64
		wantAbsent bool
		what       string
	}{
		{g: metrics.NodesAllocatable, node: "a", rt: "cpu", want: 3.9, what: "allocatable"},
		{g: metrics.NodesSystemOverhead, node: "a", rt: "cpu", want: 0.1, what: "overhead"},
		{g: metrics.NodesPodRequests, node: "a", rt: "cpu", want: 1.25, what: "pod requests (the succeeded pod not counted)"},
		{g: metrics.NodesPodRequests, node: "a", rt: "pods", wantAbsent: true, what: "pod count among requests"},
		{g: metrics.NodesPodLimits, node: "a", rt: "cpu", want: 2.5, what: "pod limits"},
		{g: metrics.NodesDaemonRequests, node: "a", rt: "cpu", want: 0.25, what: "daemon requests"},
		{g: metrics.NodesDaemonLimits, node: "a", rt: "cpu", want: 0.5, what: "daemon limits"},
		{g: metrics.NodesPodRequests, node: "b", rt: "cpu", want: 0.5, what: "requests on the unmanaged node"},
		{g: metrics.NodesAllocatable, node: "a", rt: "memory", want: 8 * 1024 * 1024 * 1024, what: "allocatable memory in bytes"},
	} {
		got, ok := value(t, tc.g, tc.node, tc.rt)
		switch {
		case tc.wantAbsent && ok:
			t.Errorf("%s: node %s %s is exported (%v)", tc.what, tc.node, tc.rt, got)
		case !tc.wantAbsent && !ok:
			t.Errorf("%s: node %s %s is not exported", tc.what, tc.node, tc.rt)
		case !tc.wantAbsent && (got < tc.want-1e-9 || got > tc.want+1e-9):
			t.Errorf("%s: node %s %s = %v, want %v", tc.what, tc.node, tc.rt, got, tc.want)
		}
	}
	for _, l := range seriesOf(t, metrics.NodesCurrentLifetime) {
		v := labels2value[key(l)]
		switch l["node_name"] {
		case "a":
			if v != 3600 || l["managed"] != "true" || l["nodepool"] != "general" || l["instance_type"] != "m5.xlarge" || l["capacity_type"] != "spot" || l["zone"] != "z-a" {
				t.Errorf("node a: lifetime %v, labels %v", v, l)
			}
		case "b":
			if v != 60 || l["managed"] != "false" || l["nodepool"] != "" {
				t.Errorf("node b: lifetime %v, labels %v", v, l)
			}
		}
	}
	// 1.75 of 7.9 CPUs requested by the pods bound and running.
	if got := testutil.ToFloat64(metrics.ClusterUtilization.WithLabelValues("cpu")); got < 100*1.75/7.9-1e-9 || got > 100*1.75/7.9+1e-9 {
		t.Errorf("cluster CPU utilization %v%%, want %v%%", got, 100*1.75/7.9)
	}

	m.objs.Nodes, m.objs.Pods = []*corev1.Node{a}, m.objs.Pods[:3]
	c.Pass()
	for _, g := range []*prometheus.GaugeVec{metrics.NodesAllocatable, metrics.NodesPodRequests, metrics.NodesCurrentLifetime} {
		for _, l := range seriesOf(t, g) {
			if l["node_name"] == "b" {
				t.Errorf("node b is gone but still has %v", l)
			}
		}
	}
	if _, ok := value(t, metrics.NodesAllocatable, "a", "cpu"); !ok {
		t.Error("node a lost its series when b went")
	}
}
