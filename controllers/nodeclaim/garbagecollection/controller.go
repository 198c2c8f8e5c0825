// Package garbagecollection reconciles the cloud with the NodeClaims: an instance that no
// NodeClaim accounts for is terminated, and a launched NodeClaim whose instance is gone is
// deleted (its pods are then provisioned again).
package garbagecollection

import (
	"context"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// MinAge is how old an instance must be before it counts as orphaned: its NodeClaim may not
// have recorded the provider ID yet.
const MinAge = 30 * time.Second

// Controller collects garbage every Interval.
type Controller struct {
	client client.Client
	// live reads the API server directly: an instance is terminated only if no NodeClaim
	// there has its provider ID, not merely none in the cache, which can trail the
	// NodeClaims' status patches by seconds on a busy control plane.
	live     client.Reader
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	Interval time.Duration
}

// NewController builds the garbage collector; live reads the API server, not the cache
// (the manager's APIReader).
func NewController(c client.Client, live client.Reader, cloud cloudprovider.CloudProvider, clk clock.Clock) *Controller {
	return &Controller{client: c, live: live, cloud: cloud, clock: clk, Interval: time.Minute}
}

// NeedLeaderElection is true: only the leader deletes.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start collects until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(c.Interval):
			if err := c.Collect(ctx); err != nil {
				log.FromContext(ctx).Error(err, "garbage collection")
			}
		}
	}
}

// Collect runs one pass.
func (c *Controller) Collect(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("garbagecollection")
	var claims karpv1.NodeClaimList
	if err := c.client.List(ctx, &claims); err != nil {
		return err
	}
	known := map[string]bool{}
	for _, nc := range claims.Items {
		if nc.Status.ProviderID != "" {
			known[nc.Status.ProviderID] = true
		}
	}
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return err
	}
	var orphans []*karpv1.NodeClaim
	for _, inst := range instances {
		if !known[inst.Status.ProviderID] && c.clock.Since(inst.CreationTimestamp.Time) >= MinAge {
			orphans = append(orphans, inst)
		}
	}
	if len(orphans) > 0 {
		var live karpv1.NodeClaimList
		if err := c.live.List(ctx, &live); err != nil {
			return err
		}
		for _, nc := range live.Items {
			if nc.Status.ProviderID != "" {
				known[nc.Status.ProviderID] = true
			}
		}
	}
	for _, inst := range orphans {
		if known[inst.Status.ProviderID] {
			continue
		}
		if err := c.cloud.Delete(ctx, inst); err != nil && !cloudprovider.IsNodeClaimNotFoundError(err) {
			return err
		}
		logger.Info("terminated an instance without a NodeClaim", "providerID", inst.Status.ProviderID)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.ProviderID == "" || nc.DeletionTimestamp != nil {
			continue
		}
		if _, err := c.cloud.Get(ctx, nc.Status.ProviderID); cloudprovider.IsNodeClaimNotFoundError(err) {
			if err := c.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				return err
			}
			logger.Info("deleted a NodeClaim whose instance is gone", "NodeClaim", nc.Name, "providerID", nc.Status.ProviderID)
		}
	}
	return nil
}
