package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// upstreamObjectives are upstream's summary quantiles, each within 0.01.
var upstreamObjectives = map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.99: 0.01, 1: 0.01}

const day = 24 * time.Hour

// lifetimeBuckets are upstream's for a node's lifetime: 15 minutes to 30 days.
var lifetimeBuckets = func() []float64 {
	var out []float64
	for _, d := range []time.Duration{15 * time.Minute, 30 * time.Minute, 45 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 6 * time.Hour,
		8 * time.Hour, 10 * time.Hour, 12 * time.Hour, 16 * time.Hour, 20 * time.Hour, day, 2 * day, 3 * day, 5 * day, 10 * day, 15 * day, 20 * day, 25 * day, 30 * day} {
		out = append(out, d.Seconds())
	}
	return out
}()

// The termination metrics, as upstream's.
var (
	// NodesTerminationDuration is the time from a node's deletion until its finalizer was
	// removed (drained, volumes detached, instance gone), by NodePool.
	NodesTerminationDuration = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Name: "karpenter_nodes_termination_duration_seconds", Help: "The time taken between a node's deletion request and the removal of its finalizer",
		Objectives: upstreamObjectives,
	}, []string{"nodepool"})
	// NodesLifetimeDuration is how long a node lived, observed when its termination ends.
	NodesLifetimeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_nodes_lifetime_duration_seconds", Help: "The lifetime duration of the nodes since creation.",
		Buckets: lifetimeBuckets,
	}, []string{"nodepool"})
	// NodeClaimsTerminationDuration is the time from a NodeClaim's deletion until its
	// finalizer was removed.
	NodeClaimsTerminationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_nodeclaims_termination_duration_seconds", Help: "Duration of NodeClaim termination in seconds.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{"nodepool"})
	// NodeClaimsInstanceTerminationDuration is the time from the provider's first terminate
	// call for a drained node's instance until the provider no longer had it.
	NodeClaimsInstanceTerminationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_nodeclaims_instance_termination_duration_seconds", Help: "Duration of CloudProvider Instance termination in seconds.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	}, []string{"nodepool"})
	// PodsDrained counts the pods evicted from draining nodes, by the NodeClaim's disruption
	// reason, or "Forceful Termination" for a NodeClaim deleted otherwise, as upstream's.
	PodsDrained = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_pods_drained_total", Help: "The total number of pods drained during node termination by Karpenter, labeled by reason",
	}, []string{"reason"})
)

// ForcefulTermination is the karpenter_pods_drained_total reason of a pod drained from a node
// whose NodeClaim no disruption command deleted (a user, an interruption, expiration).
const ForcefulTermination = "Forceful Termination"
