package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// karpenter_policy_blocked_pods is counted when scraped, not set by the batch: the pods a
// policy kept pending in the last provisioning batch that are pending still, by namespace, so
// the figure returns to zero when they are deleted or bind, whether or not another batch runs.
var (
	policyBlockedDesc = prometheus.NewDesc("karpenter_policy_blocked_pods",
		"Pods a policy kept pending in the last provisioning batch that are still pending, by namespace.", []string{"namespace"}, nil)
	policyBlockedSource atomic.Pointer[func() map[string]int]
	policyBlockedPods   prometheus.Collector = blockedCollector{}
)

// SetPolicyBlockedSource sets what karpenter_policy_blocked_pods reports: the cluster model's
// count by namespace (state.Cluster.PolicyBlockedByNamespace).
func SetPolicyBlockedSource(f func() map[string]int) { policyBlockedSource.Store(&f) }

// PolicyBlocked is what karpenter_policy_blocked_pods reports now.
func PolicyBlocked() map[string]int {
	if f := policyBlockedSource.Load(); f != nil {
		return (*f)()
	}
	return nil
}

type blockedCollector struct{}

func (blockedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- policyBlockedDesc }

func (blockedCollector) Collect(ch chan<- prometheus.Metric) {
	for ns, n := range PolicyBlocked() {
		ch <- prometheus.MustNewConstMetric(policyBlockedDesc, prometheus.GaugeValue, float64(n), ns)
	}
}

// karpenter_cluster_state_node_count and karpenter_cluster_state_synced, as upstream's, are
// read from the cluster model when scraped.
var (
	clusterStateNodeCountDesc = prometheus.NewDesc("karpenter_cluster_state_node_count", "Current count of nodes in cluster state.", nil, nil)
	clusterStateSyncedDesc    = prometheus.NewDesc("karpenter_cluster_state_synced",
		"1 when the cluster model has been given everything the API server held when its informers started, 0 before.", nil, nil)
	clusterStateUnsyncedDesc = prometheus.NewDesc("karpenter_cluster_state_unsynced_time_seconds",
		"The time for which cluster state is not synced: since the manager started, or since it last saw the model unsynced; 0 while synced.", nil, nil)
	clusterStateSource atomic.Pointer[ClusterStateSource]
	// unsyncedSince is when the model was first seen unsynced since it last was synced (unix
	// nanoseconds; 0 while synced).
	unsyncedSince atomic.Int64
	// now is the clock of the unsynced time (a test sets it).
	now                               = time.Now
	clusterState prometheus.Collector = clusterStateCollector{}
)

// ClusterStateSource is what the cluster-state gauges read.
type ClusterStateSource struct {
	NodeCount func() int
	Synced    func() bool
}

// SetClusterStateSource sets what the cluster-state gauges report (state.Cluster).
func SetClusterStateSource(s ClusterStateSource) {
	unsyncedSince.Store(now().UnixNano())
	clusterStateSource.Store(&s)
}

type clusterStateCollector struct{}

func (clusterStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clusterStateNodeCountDesc
	ch <- clusterStateSyncedDesc
	ch <- clusterStateUnsyncedDesc
}

func (clusterStateCollector) Collect(ch chan<- prometheus.Metric) {
	s := clusterStateSource.Load()
	if s == nil {
		return
	}
	synced, unsynced := 0.0, 0.0
	if s.Synced() {
		synced = 1
		unsyncedSince.Store(0)
	} else {
		unsyncedSince.CompareAndSwap(0, now().UnixNano())
		unsynced = now().Sub(time.Unix(0, unsyncedSince.Load())).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(clusterStateNodeCountDesc, prometheus.GaugeValue, float64(s.NodeCount()))
	ch <- prometheus.MustNewConstMetric(clusterStateSyncedDesc, prometheus.GaugeValue, synced)
	ch <- prometheus.MustNewConstMetric(clusterStateUnsyncedDesc, prometheus.GaugeValue, unsynced)
}
