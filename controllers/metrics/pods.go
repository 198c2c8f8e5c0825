package metrics

import "github.com/prometheus/client_golang/prometheus"

// The pod metrics, as upstream's (controllers/metrics/pod sets them).
var (
	// PodsState is 1 for every pod, labelled with where it runs and how it is.
	PodsState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_pods_state", Help: "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, whether the pod is scheduled, nodepool name, zone, architecture, capacity type, instance type, pod phase, pod readiness, and whether the node is Karpenter-managed.",
	}, []string{"name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase", "ready", "managed"})
	// PodsStartupDuration is the time from a pod's creation until it is ready, for pods this
	// process saw pending; a summary with upstream's objectives.
	PodsStartupDuration = prometheus.NewSummary(prometheus.SummaryOpts{
		Name: "karpenter_pods_startup_duration_seconds", Help: "The time from pod creation until the pod is running.",
		Objectives: upstreamObjectives,
	})
	// PodsUnstartedTime is how long a pod seen pending has waited to be ready, refreshed
	// every 30 s while it waits.
	PodsUnstartedTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_pods_unstarted_time_seconds", Help: "The time from pod creation until the pod is running.",
	}, []string{"name", "namespace"})
	// PodsBoundDuration is the time from a pod's creation until kube-scheduler bound it, for
	// pods this process saw unbound.
	PodsBoundDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_pods_bound_duration_seconds", Help: "The time from pod creation until the pod is bound.",
		Buckets: DurationBuckets,
	}, []string{"dynamic_resources"})
	// PodsUnboundTime is how long a pending pod has waited to be bound, refreshed every 30 s
	// while it waits.
	PodsUnboundTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_pods_unbound_time_seconds", Help: "The time from pod creation until the pod is bound.",
	}, []string{"name", "namespace", "dynamic_resources"})
)
