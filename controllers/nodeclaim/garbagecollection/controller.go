// Package garbagecollection reconciles the cloud with the NodeClaims, once a minute, with one
// call to the provider's List: an instance that no NodeClaim accounts for is terminated, and a
// NodeClaim launched a while ago whose instance is not listed is deleted (its pods are then
// provisioned again). It reads the NodeClaims from the cluster model, and the API server only
// to confirm an orphan before terminating it; it never asks the provider per NodeClaim.
package garbagecollection

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/state"
)

// MinAge is how old an instance must be before it counts as orphaned: its NodeClaim may not
// have recorded the provider ID yet.
const MinAge = 30 * time.Second

// Controller collects garbage every Interval.
type Controller struct {
	client  client.Client
	cluster *state.Cluster
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
func NewController(c client.Client, cluster *state.Cluster, live client.Reader, cloud cloudprovider.CloudProvider, clk clock.Clock) *Controller {
	return &Controller{client: c, cluster: cluster, live: live, cloud: cloud, clock: clk, Interval: time.Minute}
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
	if !c.cluster.Synced() {
		return nil
	}
	logger := log.FromContext(ctx).WithName("garbagecollection")
	claims := c.cluster.NodeClaims()
	known := map[string]bool{}
	for _, nc := range claims {
		if nc.Status.ProviderID != "" {
			known[nc.Status.ProviderID] = true
		}
	}
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return err
	}
	listed := make(map[string]bool, len(instances))
	var orphans []*karpv1.NodeClaim
	for _, inst := range instances {
		listed[inst.Status.ProviderID] = true
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
	for _, nc := range claims {
		if nc.Status.ProviderID == "" || nc.DeletionTimestamp != nil || listed[nc.Status.ProviderID] {
			continue
		}
		// A NodeClaim launched a moment ago may be missing from a list the provider made from a
		// cache; one launched MinAge ago whose instance is not listed is gone.
		launched := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched)
		if launched == nil || launched.Status != metav1.ConditionTrue || c.clock.Since(launched.LastTransitionTime.Time) < MinAge {
			continue
		}
		if err := c.client.Delete(ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}}); client.IgnoreNotFound(err) != nil {
			return err
		}
		logger.Info("deleted a NodeClaim whose instance is gone", "NodeClaim", nc.Name, "providerID", nc.Status.ProviderID)
	}
	return nil
}
