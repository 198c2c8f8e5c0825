package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The showback (docs/policies.md, "Showback") is read when scraped, from the leader only, so
// that two replicas do not both report the cluster's cost.
var (
	namespaceCostDesc = prometheus.NewDesc("karpenter_policy_namespace_cost_per_hour",
		"What a namespace's pods cost, USD per hour, by the cost attribution of the budgets; the namespaces past the cardinality bound are summed under namespace=\"(other)\".", []string{"namespace"}, nil)
	teamCostDesc = prometheus.NewDesc("karpenter_policy_team_cost_per_hour",
		"What the namespaces of a team (the value of the namespace label --showback-team-label) cost, USD per hour.", []string{"team"}, nil)
	nodePoolCostDesc = prometheus.NewDesc("karpenter_policy_nodepool_cost_per_hour",
		"The sum of the prices of a NodePool's nodes and NodeClaims in flight, USD per hour; nodepool=\"(none)\" for nodes of no NodePool.", []string{"nodepool"}, nil)
	nodePoolIdleDesc = prometheus.NewDesc("karpenter_policy_nodepool_idle_cost_per_hour",
		"What a NodePool's nodes cost beyond what their pods are charged, USD per hour; nodepool=\"(none)\" for nodes of no NodePool.", []string{"nodepool"}, nil)
	showbackSource atomic.Pointer[func() (Showback, bool)]
	showbackCosts  prometheus.Collector = showbackCollector{}
)

// Showback are the figures the showback gauges report, already bounded in cardinality.
type Showback struct {
	Namespaces, Teams, NodePools, Idle map[string]float64
}

// SetShowbackSource sets what the showback gauges report; f says false when there is nothing
// to report (not the leader, the cluster model not synced).
func SetShowbackSource(f func() (Showback, bool)) { showbackSource.Store(&f) }

type showbackCollector struct{}

func (showbackCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- namespaceCostDesc
	ch <- teamCostDesc
	ch <- nodePoolCostDesc
	ch <- nodePoolIdleDesc
}

func (showbackCollector) Collect(ch chan<- prometheus.Metric) {
	f := showbackSource.Load()
	if f == nil {
		return
	}
	s, ok := (*f)()
	if !ok {
		return
	}
	for desc, values := range map[*prometheus.Desc]map[string]float64{namespaceCostDesc: s.Namespaces, teamCostDesc: s.Teams, nodePoolCostDesc: s.NodePools, nodePoolIdleDesc: s.Idle} {
		for label, v := range values {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, label)
		}
	}
}
