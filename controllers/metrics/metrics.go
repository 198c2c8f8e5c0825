// Package metrics declares the controllers' Prometheus metrics, with upstream Karpenter's
// names where they exist, registered on controller-runtime's registry (served at /metrics).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// NodeClaimsCreated counts NodeClaims the provisioner created.
	NodeClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_created_total", Help: "Number of NodeClaims created, by reason and NodePool.",
	}, []string{"reason", "nodepool"})
	// NodeClaimsTerminated counts NodeClaims whose instance was terminated.
	NodeClaimsTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_terminated_total", Help: "Number of NodeClaims terminated, by NodePool.",
	}, []string{"nodepool"})
	// SchedulingDuration is how long one solve of a batch took.
	SchedulingDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "karpenter_provisioner_scheduling_duration_seconds", Help: "Duration of a provisioning solve.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	// PodsStartupDuration is the time from a pod's creation to Running on a node Karpenter launched.
	PodsStartupDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "karpenter_pods_startup_duration_seconds", Help: "Time from a pod's creation until it runs.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 12),
	})
	// NodesAllocatable is the allocatable resources of the nodes Karpenter launched.
	NodesAllocatable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodes_allocatable", Help: "Allocatable resources of nodes, by node, NodePool and resource type.",
	}, []string{"node_name", "nodepool", "resource_type"})
	// NodePoolUsage is the resources a NodePool's NodeClaims hold.
	NodePoolUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_usage", Help: "Resources used by a NodePool's NodeClaims, by resource type.",
	}, []string{"nodepool", "resource_type"})
)

func init() {
	crmetrics.Registry.MustRegister(NodeClaimsCreated, NodeClaimsTerminated, SchedulingDuration, PodsStartupDuration, NodesAllocatable, NodePoolUsage)
}
