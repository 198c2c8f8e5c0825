// Package fake is an in-memory cloud provider for unit tests of controllers: instances are
// entries in a map, launched by Create and gone after Delete (at once, or after DeleteCalls
// calls when a test wants to see termination in progress). It must not be used outside tests.
package fake

import (
	"context"
	"fmt"
	"sync"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// Provider is the fake cloud.
type Provider struct {
	mu        sync.Mutex
	instances map[string]*karpv1.NodeClaim
	deletes   map[string]int
	// DeleteCalls is how many Delete calls an instance takes to be gone (0 and 1: the first).
	DeleteCalls int
	// Repair are what RepairPolicies returns for every NodePool.
	Repair []cloudprovider.RepairPolicy
	// InstanceTypes are what GetInstanceTypes returns for every NodePool.
	InstanceTypes []*cloudprovider.InstanceType
	// GetErr, when set, is what Get returns; CreateErr, what Create returns.
	GetErr, CreateErr error
	// Reboots are the operation IDs of the Reboot calls; RebootErr, when set, is what Reboot
	// returns.
	Reboots   []string
	RebootErr error
}

var (
	_ cloudprovider.CloudProvider = (*Provider)(nil)
	_ cloudprovider.Rebooter      = (*Provider)(nil)
)

// Reboot records the call and returns RebootErr.
func (p *Provider) Reboot(_ context.Context, _ *karpv1.NodeClaim, operationID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Reboots = append(p.Reboots, operationID)
	return p.RebootErr
}

// New returns an empty fake cloud.
func New() *Provider {
	return &Provider{instances: map[string]*karpv1.NodeClaim{}, deletes: map[string]int{}}
}

// Add makes an instance exist for the provider ID.
func (p *Provider) Add(providerID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instances[providerID] = &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
}

// Has reports whether the instance exists.
func (p *Provider) Has(providerID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.instances[providerID]
	return ok
}

// Create launches an instance named after the NodeClaim.
func (p *Provider) Create(_ context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if p.CreateErr != nil {
		return nil, p.CreateErr
	}
	out := nc.DeepCopy()
	out.Status.ProviderID = "fake://" + nc.Name
	p.Add(out.Status.ProviderID)
	return out, nil
}

// Delete terminates the instance; it is gone after DeleteCalls calls.
func (p *Provider) Delete(_ context.Context, nc *karpv1.NodeClaim) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := nc.Status.ProviderID
	if _, ok := p.instances[id]; !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	p.deletes[id]++
	if p.deletes[id] >= p.DeleteCalls {
		delete(p.instances, id)
	}
	return nil
}

// Get returns the instance, or GetErr.
func (p *Provider) Get(_ context.Context, providerID string) (*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.GetErr != nil {
		return nil, p.GetErr
	}
	nc, ok := p.instances[providerID]
	if !ok {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", providerID))
	}
	return nc.DeepCopy(), nil
}

// List returns every instance.
func (p *Provider) List(context.Context) ([]*karpv1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*karpv1.NodeClaim, 0, len(p.instances))
	for _, nc := range p.instances {
		out = append(out, nc.DeepCopy())
	}
	return out, nil
}

// GetInstanceTypes returns InstanceTypes.
func (p *Provider) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return p.InstanceTypes, nil
}

// IsDrifted reports no drift.
func (p *Provider) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

// Name is "fake".
func (p *Provider) Name() string { return "fake" }

// RepairPolicies returns Repair.
func (p *Provider) RepairPolicies(context.Context, *karpv1.NodePool) ([]cloudprovider.RepairPolicy, error) {
	return p.Repair, nil
}

// GetSupportedNodeClasses returns none.
func (p *Provider) GetSupportedNodeClasses() []cloudprovider.NodeClass { return nil }
