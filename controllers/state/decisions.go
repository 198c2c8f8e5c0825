package state

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Decisions are the provisioner's decisions per pod (placed or not, and when first), which the
// pod metrics read.
type Decisions struct{ c *Cluster }

// Decisions is the model's record of the provisioner's decisions per pod.
func (c *Cluster) Decisions() Decisions { return Decisions{c} }

// Scheduling decisions are remembered per pod for upstream's provisioning-latency metrics
// (controllers/metrics/pod): when the provisioner first saw a pending pod, when a batch first
// decided on it (placed or not), and since when it has a place. They live in memory, by pod
// UID, on the manager whose provisioner made them, and go when the pod does or when the pod
// metrics are done with it (ForgetDecision).
type decisions struct {
	mu   sync.Mutex
	pods map[types.UID]*PodDecision
}

// PodDecision is what the provisioner decided about a pod, and when.
type PodDecision struct {
	// Seen is when the provisioner first saw the pod pending.
	Seen time.Time
	// Decided is when a batch first placed it or found it no place; zero until then.
	Decided time.Time
	// Schedulable is since when a batch has placed it (a batch that finds it no place resets
	// it); zero when none has.
	Schedulable time.Time
}

// AckPods records when the provisioner first saw each pending pod.
func (ds Decisions) AckPods(pods ...*corev1.Pod) {
	c := ds.c
	now := c.clock.Now()
	c.decisions.mu.Lock()
	defer c.decisions.mu.Unlock()
	for _, p := range pods {
		if c.decisions.pods == nil {
			c.decisions.pods = map[types.UID]*PodDecision{}
		}
		if _, ok := c.decisions.pods[p.UID]; !ok {
			c.decisions.pods[p.UID] = &PodDecision{Seen: now}
		}
	}
}

// MarkDecisions records a batch's decisions: the pods it placed have a place from now on
// (unless they had one already), those it could not place none. It returns, for each pod
// decided for the first time, how long it waited since it was seen (upstream's
// karpenter_pods_scheduling_decision_duration_seconds). Pods already bound are left alone.
func (ds Decisions) MarkDecisions(placed, unplaced []*corev1.Pod) []time.Duration {
	c := ds.c
	now := c.clock.Now()
	c.decisions.mu.Lock()
	defer c.decisions.mu.Unlock()
	if c.decisions.pods == nil {
		c.decisions.pods = map[types.UID]*PodDecision{}
	}
	var waited []time.Duration
	mark := func(p *corev1.Pod, has bool) {
		if p.Spec.NodeName != "" {
			return
		}
		d, ok := c.decisions.pods[p.UID]
		if !ok {
			d = &PodDecision{Seen: now}
			c.decisions.pods[p.UID] = d
		}
		if d.Decided.IsZero() {
			d.Decided = now
			waited = append(waited, now.Sub(d.Seen))
		}
		switch {
		case !has:
			d.Schedulable = time.Time{}
		case d.Schedulable.IsZero():
			d.Schedulable = now
		}
	}
	for _, p := range placed {
		mark(p, true)
	}
	for _, p := range unplaced {
		mark(p, false)
	}
	return waited
}

// Decision is what the provisioner decided about the pod, if it saw it.
func (ds Decisions) Decision(uid types.UID) (PodDecision, bool) {
	c := ds.c
	c.decisions.mu.Lock()
	defer c.decisions.mu.Unlock()
	d, ok := c.decisions.pods[uid]
	if !ok {
		return PodDecision{}, false
	}
	return *d, true
}

// ForgetDecision drops what was recorded about the pod.
func (ds Decisions) ForgetDecision(uid types.UID) {
	c := ds.c
	c.decisions.mu.Lock()
	defer c.decisions.mu.Unlock()
	delete(c.decisions.pods, uid)
}
