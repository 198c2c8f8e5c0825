package disruption

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// The Unconsolidatable event is told once per node and reason within UnconsolidatableEvery:
// the same reason again waits, a new reason is told at once, and after the interval the old
// one is told again.
func TestUnconsolidatableEventsAreRateLimitedPerReason(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	clk := clocktesting.NewFakeClock(now)
	ctl := NewController(nil, nil, nil, rec, clk, nil, Options{})
	snap := func(reason string) *Cluster {
		return &Cluster{Candidates: []*Candidate{{Node: &scheduling.Node{Name: "a"}, NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}},
			Unconsolidatable: []Unconsolidatable{{Node: "a", Reason: reason}}}
	}
	told := func() int {
		n := 0
		for {
			select {
			case <-rec.Events:
				n++
			default:
				return n
			}
		}
	}
	for i, step := range []struct {
		advance time.Duration
		reason  string
		want    int
	}{
		{0, "pods are nominated to it", 1},
		{10 * time.Second, "pods are nominated to it", 0},
		{10 * time.Second, "denied by policy: office hours", 1},
		{10 * time.Second, "denied by policy: office hours", 0},
		{UnconsolidatableEvery, "denied by policy: office hours", 1},
	} {
		clk.Step(step.advance)
		ctl.noteUnconsolidatable(snap(step.reason))
		if got := told(); got != step.want {
			t.Errorf("step %d (%q): %d events, want %d", i, step.reason, got, step.want)
		}
	}
	if len(ctl.noted) != 1 {
		t.Errorf("%d reasons remembered, want 1 (the old ones forgotten)", len(ctl.noted))
	}
}
