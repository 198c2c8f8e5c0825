package state

import (
	"testing"
	"time"

	"github.com/karpenter-policy/karpenter/scheduling/audit"
)

// A decision taken again unchanged keeps the time it was first taken (a new leader deciding
// again what it restored reports what the last one did); a changed one replaces it when newer;
// an older one never replaces a newer.
func TestPolicyDecisionsKeepWhenADecisionWasFirstTaken(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	held := func(msg string) audit.Result {
		return audit.Result{Namespace: "team-a", Policy: "CapacityBudget/team-a/b", Rule: "provisioning", Outcome: audit.Fail, Message: msg,
			Subjects: []audit.Subject{{APIVersion: "v1", Kind: "Namespace", Name: "team-a"}}, Properties: map[string]string{"decision": "held"}}
	}
	at := func(d *PolicyDecisions) (string, time.Time) {
		rs, ats := d.List()
		if len(rs) != 1 {
			t.Fatalf("%d decisions, want 1", len(rs))
		}
		return rs[0].Message, ats[0]
	}
	var d PolicyDecisions
	d.Record(held("2 pods held back"), t0)
	d.Record(held("2 pods held back"), t0.Add(10*time.Second))
	if msg, when := at(&d); msg != "2 pods held back" || !when.Equal(t0) {
		t.Errorf("the same decision again: %q at %v, want it at %v", msg, when, t0)
	}
	d.Record(held("3 pods held back"), t0.Add(20*time.Second))
	if msg, when := at(&d); msg != "3 pods held back" || !when.Equal(t0.Add(20*time.Second)) {
		t.Errorf("a changed decision: %q at %v", msg, when)
	}
	d.Record(held("2 pods held back"), t0.Add(5*time.Second))
	if msg, _ := at(&d); msg != "3 pods held back" {
		t.Errorf("an older decision replaced a newer one: %q", msg)
	}
	// Restored from a report after the same decision was taken again by the new leader: the
	// earlier time wins.
	d.Record(held("3 pods held back"), t0.Add(15*time.Second))
	if _, when := at(&d); !when.Equal(t0.Add(15 * time.Second)) {
		t.Errorf("the same decision restored with an earlier time: at %v, want %v", when, t0.Add(15*time.Second))
	}
}
