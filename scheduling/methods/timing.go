package methods

import (
	"time"

	"github.com/robfig/cron/v3"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// NextChange is the first moment after c.Now when time alone can change what a pass decides:
// a candidate's consolidateAfter running out, a pod's karpenter.sh/do-not-disrupt
// duration ending, or a NodePool budget's schedule opening or closing a window. Zero when
// nothing is due. A pass that found nothing to do need not run again before it, unless the
// cluster changes.
func (c *Cluster) NextChange() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(c.Now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, cand := range c.Candidates {
		if after := cand.NodePool.Spec.Disruption.ConsolidateAfter.Duration; after != nil && !cand.LastPodEvent.IsZero() {
			consider(cand.LastPodEvent.Add(*after))
		}
		for _, p := range cand.Pods {
			if holds, until := scheduling.DoNotDisrupt(p, c.Now); holds && !until.IsZero() {
				consider(until)
			}
		}
	}
	for _, until := range c.held {
		// A hold after a rolled-back command ending.
		consider(until)
	}
	for _, u := range c.Unhealthy {
		// A repair policy's toleration running out.
		consider(u.EligibleAt)
	}
	for _, np := range c.NodePools {
		for _, b := range np.NodePool.Spec.Disruption.Budgets {
			if b.Schedule == nil || b.Duration == nil {
				continue
			}
			sched, err := cron.ParseStandard(*b.Schedule)
			if err != nil {
				continue
			}
			now := c.Now.UTC()
			consider(sched.Next(now))
			if start := sched.Next(now.Add(-b.Duration.Duration)); !start.After(now) {
				consider(start.Add(b.Duration.Duration))
			}
		}
	}
	return next
}
