package disruption

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// A terminate-first command counts as upstream's: decision terminate-first, and once in
// karpenter_voluntary_disruption_terminate_first_decisions_total with why; a delete does not.
func TestTerminateFirstIsCountedAsUpstream(t *testing.T) {
	tf := func() float64 {
		return testutil.ToFloat64(metrics.DisruptionTerminateFirstDecisions.WithLabelValues("reserved", "drifted", methods.TerminateFirstNoReservedCapacity))
	}
	decided := func(decision string) float64 {
		return testutil.ToFloat64(metrics.DisruptionDecisionsByNodePool.WithLabelValues("reserved", decision, "drifted", ""))
	}
	tfBefore, firstBefore, deleteBefore := tf(), decided(methods.TerminateFirstDecision), decided("delete")
	recordDecision(&command{reason: methods.ReasonDrifted, decision: methods.DecisionDelete, terminateFirst: methods.TerminateFirstNoReservedCapacity,
		candidates: []candidateRef{{node: "a", nodePool: "reserved"}}})
	recordDecision(&command{reason: methods.ReasonDrifted, decision: methods.DecisionDelete, candidates: []candidateRef{{node: "b", nodePool: "reserved"}}})
	if d := tf() - tfBefore; d != 1 {
		t.Errorf("terminate_first_decisions_total went up by %v, want 1", d)
	}
	if d := decided(methods.TerminateFirstDecision) - firstBefore; d != 1 {
		t.Errorf("decisions_by_nodepool_total{decision=terminate-first} went up by %v, want 1", d)
	}
	if d := decided("delete") - deleteBefore; d != 1 {
		t.Errorf("decisions_by_nodepool_total{decision=delete} went up by %v, want 1 (the plain delete)", d)
	}
}
