package budget

import (
	"context"
	"time"

	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/scheduling/showback"
)

// Label values of the showback gauges for what has no name of its own.
const (
	// OtherNamespaces sums the namespaces past the cardinality bound.
	OtherNamespaces = "(other)"
	// NoNodePool stands for nodes no NodePool launched.
	NoNodePool = "(none)"
)

// ShowbackFigures are the showback gauges' values (controllers/metrics.Showback): each
// namespace's cost, the costliest max of them by name and the rest summed under
// OtherNamespaces; each team's (the value of the namespace label teamLabel; none when it is
// empty); each NodePool's price and idle cost.
func ShowbackFigures(s *showback.Showback, labels map[string]map[string]string, teamLabel string, maxNamespaces int) metrics.Showback {
	out := metrics.Showback{Namespaces: map[string]float64{}, Teams: map[string]float64{}, NodePools: map[string]float64{}, Idle: map[string]float64{}}
	for i, ns := range s.SortedNamespaces() {
		cost := s.Namespaces[ns].Cost
		if i < maxNamespaces {
			out.Namespaces[ns] = cost
		} else {
			out.Namespaces[OtherNamespaces] += cost
		}
		if team := labels[ns][teamLabel]; teamLabel != "" && team != "" {
			out.Teams[team] += cost
		}
	}
	for pool, price := range s.NodePoolPrices() {
		out.NodePools[poolLabel(pool)] = price
	}
	for pool, idle := range s.Idle() {
		out.Idle[poolLabel(pool)] = idle
	}
	return out
}

func poolLabel(pool string) string {
	if pool == "" {
		return NoNodePool
	}
	return pool
}

// ShowbackSource is what the showback gauges report when scraped: the usage's showback,
// while this replica leads (elected is closed) and the cluster model has synced.
func ShowbackSource(u *state.Attribution, elected <-chan struct{}, teamLabel string, maxNamespaces int) func() (metrics.Showback, bool) {
	return func() (metrics.Showback, bool) {
		select {
		case <-elected:
		default:
			return metrics.Showback{}, false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, labels, err := u.Showback(ctx)
		if err != nil {
			return metrics.Showback{}, false
		}
		return ShowbackFigures(s, labels, teamLabel, maxNamespaces), true
	}
}
