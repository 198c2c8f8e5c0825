package disruption

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// A pass's scored moves become upstream's metrics and events: every policy's move is counted
// by its decision; a Balanced pool's score is observed; an approved Balanced single-node move
// is ConsolidationApproved on the NodeClaim, a multi-node one on the NodePool, and a refused
// one is not told.
func TestScoredMovesAreCountedAndTold(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	ctl := NewController(nil, nil, nil, rec, clocktesting.NewFakeClock(now), nil, methods.Options{})
	pool := func(name string, policy karpv1.ConsolidationPolicy) *karpv1.NodePool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
		np.Spec.Disruption.ConsolidationPolicy = policy
		return np
	}
	bal, plain := pool("score-bal", karpv1.ConsolidationPolicyBalanced), pool("score-plain", karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized)
	cand := func(name string, np *karpv1.NodePool) *methods.Candidate {
		return &methods.Candidate{Node: &scheduling.Node{Name: name}, NodePool: np, NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	}
	balanced := func(approved bool, score float64) methods.PoolScore {
		return methods.PoolScore{NodePool: bal.Name, Policy: karpv1.ConsolidationPolicyBalanced, Approved: approved, Scored: true,
			Score: score, SavedShare: score / 4, DisruptedShare: 0.25}
	}
	ctl.noteScores(&methods.Cluster{Scores: []methods.MoveScore{
		{Candidates: []*methods.Candidate{cand("a", bal)}, Approved: true, Pools: []methods.PoolScore{balanced(true, 1)}},
		{Candidates: []*methods.Candidate{cand("b", bal)}, Approved: false, Pools: []methods.PoolScore{balanced(false, 0.42)}},
		{Candidates: []*methods.Candidate{cand("c", plain)}, Approved: true,
			Pools: []methods.PoolScore{{NodePool: plain.Name, Policy: plain.Spec.Disruption.ConsolidationPolicy, Approved: true}}},
		{Candidates: []*methods.Candidate{cand("d", bal), cand("e", bal)}, Multi: true, Approved: true, Pools: []methods.PoolScore{balanced(true, 0.75)}},
	}})
	for _, tc := range []struct {
		decision, pool, policy string
		want                   float64
	}{
		{"approved", bal.Name, "Balanced", 2}, {"rejected", bal.Name, "Balanced", 1},
		{"approved", plain.Name, "WhenEmptyOrUnderutilized", 1}, {"rejected", plain.Name, "WhenEmptyOrUnderutilized", 0},
	} {
		if got := testutil.ToFloat64(metrics.ConsolidationMoves.WithLabelValues(tc.decision, tc.pool, tc.policy)); got != tc.want {
			t.Errorf("karpenter_consolidation_moves_total{decision=%s,nodepool=%s,policy=%s} = %v, want %v", tc.decision, tc.pool, tc.policy, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(metrics.ConsolidationScore); n != 2 {
		t.Errorf("karpenter_consolidation_score has %d series, want 2 (the Balanced pool's approved and rejected)", n)
	}
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	want := []string{
		"Normal ConsolidationApproved score 1.00 >= threshold 0.50 (k: 2, savings 25.0%, disruption 25.0%)",
		"Normal ConsolidationApproved score 0.75 >= threshold 0.50 (k: 2, savings 18.8%, disruption 25.0%)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// A consolidation command found is ConsolidationCandidate on each candidate's NodeClaim, and
// one validation drops is ConsolidationRejected with why, in upstream's words.
func TestConsolidationCandidateAndRejectedEvents(t *testing.T) {
	rec := &objectRecorder{}
	ctl := NewController(nil, nil, nil, rec, clocktesting.NewFakeClock(now), nil, methods.Options{})
	c := func(name string) *methods.Candidate {
		return &methods.Candidate{Node: &scheduling.Node{Name: name}, PricePerHour: 0.2, NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	}
	single := &methods.Command{Reason: methods.ReasonUnderutilized, Decision: methods.DecisionDelete, Candidates: []*methods.Candidate{c("a")}}
	multi := &methods.Command{Reason: methods.ReasonUnderutilized, Decision: methods.DecisionDelete, Candidates: []*methods.Candidate{c("b"), c("d")}, ConsolidationType: "multi"}
	failed := testutil.ToFloat64(metrics.DisruptionFailedValidations.WithLabelValues("multi"))
	ctl.noteCandidate(single)
	ctl.noteRejected(multi, "a pod would not schedule")
	if n := testutil.ToFloat64(metrics.DisruptionFailedValidations.WithLabelValues("multi")) - failed; n != 2 {
		t.Errorf("karpenter_voluntary_disruption_failed_validations_total{multi} rose by %v, want 2 (the command's candidates)", n)
	}
	got := rec.take()
	want := []string{
		"NodeClaim/a Normal ConsolidationCandidate Consolidation candidate: delete: [a] (savings: $0.20)",
		"Node/a Normal ConsolidationCandidate Consolidation candidate: delete: [a] (savings: $0.20)",
		"NodeClaim/b Normal ConsolidationRejected Consolidation rejected: delete: [b] (part of 2-node consolidation), reason: a pod would not schedule (savings: $0.40)",
		"Node/b Normal ConsolidationRejected Consolidation rejected: delete: [b] (part of 2-node consolidation), reason: a pod would not schedule (savings: $0.40)",
		"NodeClaim/d Normal ConsolidationRejected Consolidation rejected: delete: [d] (part of 2-node consolidation), reason: a pod would not schedule (savings: $0.40)",
		"Node/d Normal ConsolidationRejected Consolidation rejected: delete: [d] (part of 2-node consolidation), reason: a pod would not schedule (savings: $0.40)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// The disrupted metrics take upstream's label values: the policy in snake case, the
// termination mode from repair's drain bound, else the NodeClaim's terminationGracePeriod.
func TestDisruptedLabels(t *testing.T) {
	for in, want := range map[string]string{"WhenEmptyOrUnderutilized": "when_empty_or_underutilized", "WhenEmpty": "when_empty", "Balanced": "balanced"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
	period := func(d time.Duration) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{TerminationGracePeriod: &metav1.Duration{Duration: d}}}
	}
	bound := func(d time.Duration) *time.Duration { return &d }
	for _, tc := range []struct {
		nc    *karpv1.NodeClaim
		bound *time.Duration
		want  string
	}{{nil, nil, "graceful"}, {&karpv1.NodeClaim{}, nil, "graceful"}, {period(0), nil, "forceful"}, {period(time.Hour), nil, "eventual"},
		{&karpv1.NodeClaim{}, bound(0), "forceful"}, {period(time.Hour), bound(0), "forceful"}, {&karpv1.NodeClaim{}, bound(time.Minute), "eventual"}} {
		if got := terminationMode(tc.nc, tc.bound); got != tc.want {
			t.Errorf("terminationMode(%+v, %v) = %q, want %q", tc.nc, tc.bound, got, tc.want)
		}
	}
}
