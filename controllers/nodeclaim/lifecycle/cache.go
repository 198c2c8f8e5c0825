package lifecycle

// What the controller remembers of its own writes, so that a reconcile that reads a NodeClaim
// older than its last write neither launches it again nor writes over it.

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// recent keeps a value per NodeClaim UID for ttl after it was put; the controller's mutex
// guards it.
type recent[T any] struct {
	ttl     time.Duration
	entries map[types.UID]recentEntry[T]
}

type recentEntry[T any] struct {
	v  T
	at time.Time
}

func newRecent[T any](ttl time.Duration) recent[T] {
	return recent[T]{ttl: ttl, entries: map[types.UID]recentEntry[T]{}}
}

// put records v now and forgets the entries older than ttl.
func (r recent[T]) put(uid types.UID, v T, now time.Time) {
	for k, e := range r.entries {
		if now.Sub(e.at) > r.ttl {
			delete(r.entries, k)
		}
	}
	r.entries[uid] = recentEntry[T]{v: v, at: now}
}

// get returns the value put for uid within ttl of now.
func (r recent[T]) get(uid types.UID, now time.Time) (T, bool) {
	e, ok := r.entries[uid]
	if !ok || now.Sub(e.at) > r.ttl {
		var zero T
		return zero, false
	}
	return e.v, true
}

// cacheLag bounds how long a reconcile waits for the cache to show our last write of a
// NodeClaim; past it (another writer changed it since), the reconcile goes ahead, and a
// stale write fails on its resourceVersion.
const cacheLag = 5 * time.Second

// remembered is what an earlier launch of the NodeClaim returned, if any.
func (c *Controller) remembered(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	launched, _ := c.launched.get(nc.UID, c.clock.Now())
	return launched
}

// remember records a launch.
func (c *Controller) remember(nc, launched *karpv1.NodeClaim) {
	launched = launched.DeepCopy()
	launched.Name = nc.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	c.launched.put(nc.UID, launched, c.clock.Now())
}

// launchedAs names the NodeClaim a remembered launch gave the provider ID.
func (c *Controller) launchedAs(providerID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for uid := range c.launched.entries {
		if launched, ok := c.launched.get(uid, now); ok && launched.Status.ProviderID == providerID {
			return launched.Name, true
		}
	}
	return "", false
}

// wrote records the resourceVersion a write of the NodeClaim returned.
func (c *Controller) wrote(nc *karpv1.NodeClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes.put(nc.UID, nc.ResourceVersion, c.clock.Now())
}

// behind reports whether the cache's copy of the NodeClaim is not the one our last write
// returned, within cacheLag of that write.
func (c *Controller) behind(nc *karpv1.NodeClaim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	rv, ok := c.writes.get(nc.UID, c.clock.Now())
	return ok && rv != nc.ResourceVersion
}
