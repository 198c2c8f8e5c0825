package disruption

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// nodeObject is the node as the cache holds it, so that its events carry its UID (kubectl
// describe node finds events by it); a node the cache lacks gets a reference by name.
func nodeObject(c client.Reader, name string) *corev1.Node {
	node := &corev1.Node{}
	if c != nil && c.Get(context.Background(), client.ObjectKey{Name: name}, node) == nil {
		return node
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// nodePoolObject is the NodePool as the cache holds it (for its UID), else a reference by name.
func nodePoolObject(c client.Reader, name string) *karpv1.NodePool {
	np := &karpv1.NodePool{}
	if c != nil && c.Get(context.Background(), client.ObjectKey{Name: name}, np) == nil {
		return np
	}
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// tell publishes an event about a candidate on its NodeClaim and on its Node, as upstream
// publishes its disruption events (docs/upstream.md, "Events").
func (c *Controller) tell(cand *methods.Candidate, kind, reason, format string, args ...any) {
	if cand.NodeClaim != nil {
		c.recorder.Eventf(cand.NodeClaim, nil, kind, reason, "Disruption", format, args...)
	}
	c.recorder.Eventf(nodeObject(c.Orchestrator.client, cand.Name()), nil, kind, reason, "Disruption", format, args...)
}

// BlockedPoolEvery is how often a NodePool is told again that its budget blocks a reason, as
// upstream's one-minute dedupe: a schedule can change the budget every minute.
const BlockedPoolEvery = time.Minute

// tellBlockedPool publishes upstream's DisruptionBlocked event on a NodePool whose budgets
// allow no node disrupted for the reason, at most once per BlockedPoolEvery.
func (c *Controller) tellBlockedPool(pool, reason string) {
	key, now := pool+"/"+reason, c.clock.Now()
	c.mu.Lock()
	last, seen := c.blocked[key]
	if seen && now.Sub(last) < BlockedPoolEvery {
		c.mu.Unlock()
		return
	}
	for k, at := range c.blocked {
		if now.Sub(at) >= BlockedPoolEvery {
			delete(c.blocked, k)
		}
	}
	c.blocked[key] = now
	c.mu.Unlock()
	c.recorder.Eventf(nodePoolObject(c.Orchestrator.client, pool), nil, corev1.EventTypeNormal, "DisruptionBlocked", "Disruption",
		"No allowed disruptions for disruption reason %s due to blocking budget", reason)
}

// noteInvalidEvictionCosts tells, for each candidate's pod whose karpenter.sh/disruption-cost
// (or, without one, pod-deletion-cost) is not an int32, that the value is counted as unset:
// an error in the log with upstream's words, and an InvalidDisruptionCost warning on the pod,
// so its owner sees it in kubectl describe. At most once per UnconsolidatableEvery for the
// same pod and value.
func (c *Controller) noteInvalidEvictionCosts(ctx context.Context, snap *methods.Cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for _, cand := range snap.Candidates {
		for _, p := range cand.Pods {
			key, value, why := methods.InvalidEvictionCost(p)
			if key == "" {
				continue
			}
			seen := "pod\x00" + string(p.UID) + "\x00" + key + "\x00" + value
			if _, ok := c.noted[seen]; ok {
				continue
			}
			c.noted[seen] = now
			what := "disruption cost"
			if key != karpv1.DisruptionCostAnnotationKey {
				what = "pod deletion cost"
			}
			log.FromContext(ctx).Error(errors.New(why), "failed parsing "+what,
				"annotation", key, "value", value, "pod", client.ObjectKeyFromObject(p))
			c.recorder.Eventf(p, nil, corev1.EventTypeWarning, "InvalidDisruptionCost", "Disruption",
				"%s %q is %s (an int32 is wanted): this pod's eviction cost counts it as unset", key, value, why)
		}
	}
}
