package disruption

import (
	"strings"
	"time"
	"unicode"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
)

// disrupted counts a candidate a command removed, with the pods it had to move, as upstream's
// karpenter_nodeclaims_disrupted_total and karpenter_pods_disruption_initiated_total. A
// command adopted after a restart knows neither its candidates' policy nor their pods.
func disrupted(cmd *command, c candidateRef) {
	mode := c.terminationMode
	if mode == "" {
		mode = "graceful"
	}
	labels := []string{strings.ToLower(string(cmd.reason)), c.nodePool, c.capacityType, c.consolidationPolicy, mode}
	metrics.NodeClaimsDisrupted.WithLabelValues(labels...).Inc()
	metrics.PodsDisruptionInitiated.WithLabelValues(labels...).Add(float64(c.pods))
}

// terminationMode is how a NodeClaim's drain ends, as upstream labels it
// (metrics.TerminationMode); repair's drain bound, when it sets one, decides instead
// (0: forceful, else eventual).
func terminationMode(nc *karpv1.NodeClaim, drainBound *time.Duration) string {
	switch {
	case drainBound != nil && *drainBound <= 0:
		return "forceful"
	case drainBound != nil:
		return "eventual"
	}
	return metrics.TerminationMode(nc)
}

// snakeCase is a consolidation policy or a node condition as upstream's metrics spell it:
// WhenEmptyOrUnderutilized is when_empty_or_underutilized, NetworkUnavailable
// network_unavailable.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
