package state

import (
	"sort"
	"sync"
	"time"

	"github.com/karpenter-policy/karpenter/scheduling/audit"
)

// PolicyDecisions are the policy decisions the controllers took (pods a policy held, launches
// and disruptions a policy refused, exceptions applied), the newest per report, policy, rule
// and subject (audit.Result.Key), so that the audit's reports stay bounded whatever the
// cluster's size. The audit controller writes them into the reports beside what it finds,
// and restores them from the reports when it starts, so that a new leader reports what the
// last one did.
type PolicyDecisions struct {
	mu   sync.Mutex
	byID map[string]policyDecision
}

type policyDecision struct {
	result audit.Result
	at     time.Time
}

// Record keeps a decision taken at at, replacing an older one of the same key. The same
// decision taken again (audit.Result.Same) keeps the time it was first taken: pods held
// batch after batch are held since then, and a new leader that decides again what the last
// one restored reports it as the last one did.
func (d *PolicyDecisions) Record(r audit.Result, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byID == nil {
		d.byID = map[string]policyDecision{}
	}
	k := r.Key()
	if prev, ok := d.byID[k]; ok && (prev.at.After(at) || prev.result.Same(r)) {
		if prev.result.Same(r) && at.Before(prev.at) {
			d.byID[k] = policyDecision{result: r, at: at}
		}
		return
	}
	d.byID[k] = policyDecision{result: r, at: at}
}

// Forget drops the decisions f picks.
func (d *PolicyDecisions) Forget(f func(r audit.Result, at time.Time) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, x := range d.byID {
		if f(x.result, x.at) {
			delete(d.byID, k)
		}
	}
}

// List are the decisions with when each was taken, by key.
func (d *PolicyDecisions) List() (results []audit.Result, at []time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make([]string, 0, len(d.byID))
	for k := range d.byID {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		results = append(results, d.byID[k].result)
		at = append(at, d.byID[k].at)
	}
	return results, at
}
