package state

import (
	"context"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// instanceTypes are a NodePool's instance types, as the provider gives them. Providers
// memoize them per node class and price or availability generation (the kwok provider: per
// KWOKNodeClass resourceVersion and offering availability; the AWS provider: per
// EC2NodeClass resourceVersion, the instance types described, the prices and the offerings'
// availability, adding only the reserved offerings afresh), so a snapshot taken every few
// seconds does not rebuild the catalog.
func (c *Cluster) instanceTypes(ctx context.Context, cp cloudprovider.CloudProvider, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return cp.GetInstanceTypes(ctx, np)
}
