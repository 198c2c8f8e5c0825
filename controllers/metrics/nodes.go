package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// NodeWellKnownLabels are the node labels upstream's per-node gauges carry, by the metric
// label each becomes: upstream's core WellKnownLabels, the part after the slash in snake case.
var NodeWellKnownLabels = map[string]string{
	karpv1.NodePoolLabelKey:        "nodepool",
	corev1.LabelTopologyZone:       "zone",
	corev1.LabelTopologyRegion:     "region",
	corev1.LabelInstanceTypeStable: "instance_type",
	corev1.LabelArchStable:         "arch",
	corev1.LabelOSStable:           "os",
	karpv1.CapacityTypeLabelKey:    "capacity_type",
	corev1.LabelWindowsBuild:       "windows_build",
}

// NodeLabels are the label names of the per-node gauges (without resource_type), sorted.
var NodeLabels = func() []string {
	out := []string{"node_name", "node_phase", "managed"}
	for _, l := range NodeWellKnownLabels {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}()

func nodeGauge(name, help string, resourceType bool) *prometheus.GaugeVec {
	labels := slices.Clone(NodeLabels)
	if resourceType {
		labels = append(labels, "resource_type")
	}
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// The per-node gauges, as upstream's node metrics controller exports them (controllers/metrics/node
// sets them from the cluster model): CPU in cores, other resources in their unit.
var (
	NodesAllocatable     = nodeGauge("karpenter_nodes_allocatable", "Node allocatable are the resources allocatable by nodes.", true)
	NodesSystemOverhead  = nodeGauge("karpenter_nodes_system_overhead", "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.", true)
	NodesPodRequests     = nodeGauge("karpenter_nodes_total_pod_requests", "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.", true)
	NodesPodLimits       = nodeGauge("karpenter_nodes_total_pod_limits", "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.", true)
	NodesDaemonRequests  = nodeGauge("karpenter_nodes_total_daemon_requests", "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.", true)
	NodesDaemonLimits    = nodeGauge("karpenter_nodes_total_daemon_limits", "Node total daemon limits are the resources specified by DaemonSet pod limits.", true)
	NodesCurrentLifetime = nodeGauge("karpenter_nodes_current_lifetime_seconds", "Node age in seconds.", false)
	// ClusterUtilization is the share of the nodes' allocatable that bound pods request, in
	// percent, by resource type.
	ClusterUtilization = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_cluster_utilization_percent", Help: "Utilization of allocatable resources by pod requests.",
	}, []string{"resource_type"})
)
