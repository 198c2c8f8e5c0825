package state

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/scheduling/showback"
)

// Attribution attributes the cluster's cost to namespaces over the one snapshot of the cluster
// model, again only when the model changed (or usageTTL passed: nominations expire with time):
// the budget status controller and the admission review share it.
type Attribution struct {
	cluster *Cluster
	cloud   cloudprovider.CloudProvider
	clock   clock.Clock

	mu       sync.Mutex
	usage    map[string]policies.Usage
	showback *showback.Showback
	labels   map[string]map[string]string
	at       time.Time
	revision uint64
}

// errNotSynced is the usage's answer until the cluster model has synced.
var errNotSynced = errors.New("the cluster model has not synced yet")

// NewAttribution returns the shared attribution.
func NewAttribution(cluster *Cluster, cloud cloudprovider.CloudProvider, clk clock.Clock) *Attribution {
	return &Attribution{cluster: cluster, cloud: cloud, clock: clk}
}

// ByNamespace is each namespace's usage, at most usageTTL old.
func (u *Attribution) ByNamespace(ctx context.Context) (map[string]policies.Usage, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.refresh(ctx); err != nil {
		return nil, err
	}
	return u.usage, nil
}

// Showback is the cost of every node split between the namespaces and idle room
// (scheduling/showback), from the same snapshot as ByNamespace, with the namespaces' labels.
// The result is shared and must not be modified.
func (u *Attribution) Showback(ctx context.Context) (*showback.Showback, map[string]map[string]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.refresh(ctx); err != nil {
		return nil, nil, err
	}
	return u.showback, u.labels, nil
}

// refresh attributes the cluster again when it changed (or usageTTL passed), at most once a
// usageMinInterval. The caller holds mu.
func (u *Attribution) refresh(ctx context.Context) error {
	if !u.cluster.Synced() {
		// Attributed over part of the cluster, a budget would look under-used for a moment.
		return errNotSynced
	}
	rev := u.cluster.Revision()
	if u.usage != nil && (rev == u.revision && u.clock.Since(u.at) < usageTTL || u.clock.Since(u.at) < usageMinInterval) {
		return nil
	}
	snap, err := u.cluster.Placed(ctx, u.cloud)
	if err != nil {
		return err
	}
	u.usage, u.at, u.revision = planner.UsageOf(snap.NodesWithBufferRoom(), planner.NewPriceBook(snap.InstanceTypes()...)), u.clock.Now(), rev
	u.showback, u.labels = showback.Of(snap), snap.Namespaces()
	return nil
}

// usageTTL is how long one attribution of an unchanged cluster serves every budget, and
// usageMinInterval how long one serves them while the cluster changes: a scale-out changes it
// with every pod bound, and every budget is reconciled on every NodeClaim's update.
const (
	usageTTL         = 30 * time.Second
	usageMinInterval = 2 * time.Second
)
