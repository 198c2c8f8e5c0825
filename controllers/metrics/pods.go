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

// The provisioning-latency pod metrics, as upstream's: the same waits, counted from when the
// provisioner first placed the pod (state.PodDecision.Schedulable) rather than from its
// creation, and the provisioner's own delay before it decided.
var (
	// PodsProvisioningBoundDuration is the time from a pod's first placement until it was
	// bound.
	PodsProvisioningBoundDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_pods_provisioning_bound_duration_seconds", Help: "The time from when Karpenter first thinks the pod can schedule until it binds. Note: this calculated from a point in memory, not by the pod creation timestamp.",
		Buckets: DurationBuckets,
	}, []string{"dynamic_resources"})
	// PodsProvisioningUnboundTime is how long a placed pod has waited to be bound since its
	// first placement, refreshed every 30 s while it waits.
	PodsProvisioningUnboundTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_pods_provisioning_unbound_time_seconds", Help: "The time from when Karpenter first thinks the pod can schedule until it binds. Note: this calculated from a point in memory, not by the pod creation timestamp.",
	}, []string{"name", "namespace", "dynamic_resources"})
	// PodsProvisioningStartupDuration is the time from a pod's first placement until it was
	// ready.
	PodsProvisioningStartupDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "karpenter_pods_provisioning_startup_duration_seconds", Help: "The time from when Karpenter first thinks the pod can schedule until the pod is running. Note: this calculated from a point in memory, not by the pod creation timestamp.",
		Buckets: DurationBuckets,
	})
	// PodsProvisioningUnstartedTime is how long a placed pod has waited to be ready since its
	// first placement, refreshed every 30 s while it waits.
	PodsProvisioningUnstartedTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_pods_provisioning_unstarted_time_seconds", Help: "The time from when Karpenter first thinks the pod can schedule until the pod is running. Note: this calculated from a point in memory, not by the pod creation timestamp.",
	}, []string{"name", "namespace"})
	// PodsSchedulingUndecidedTime is how long a pod the provisioner saw pending has waited for
	// a batch to decide on it; gone once one did, or once the pod is bound.
	PodsSchedulingUndecidedTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_pods_provisioning_scheduling_undecided_time_seconds", Help: "The time from when Karpenter has seen a pod without making a scheduling decision for the pod. Note: this calculated from a point in memory, not by the pod creation timestamp.",
	}, []string{"name", "namespace"})
	// PodsSchedulingDecisionDuration is how long the provisioner took to decide on a pod
	// (placed or not) after it first saw it pending.
	PodsSchedulingDecisionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "karpenter_pods_scheduling_decision_duration_seconds", Help: "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
		Buckets: DurationBuckets,
	})
)
