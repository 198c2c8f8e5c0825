package metrics

import (
	"sync/atomic"

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
