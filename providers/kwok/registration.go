package kwok

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// A KWOKNodeClass's registrationDelay separates an instance's launch from its registration,
// as a real node's boot does. The instance exists from launch: Create returns the NodeClaim
// with its provider ID and capacity and marks it with RegistersAtAnnotation, and Get and List
// answer for it. Its Node object appears when the delay has run: the Registrar creates it.
// The NodeClaim is the record, so a manager that restarts (or a new leader) creates the Nodes
// the last one had not yet created (docs/architecture.md, "Simulated provider").
const (
	// RegistersAtAnnotation is when the Node of a NodeClaim launched with a registration
	// delay appears (RFC 3339).
	RegistersAtAnnotation = "karpenter.kwok.sh/registers-at"
	// RegistrationTick is how often the Registrar looks for Nodes that are due: a Node
	// appears at most this late.
	RegistrationTick = 250 * time.Millisecond
)

// Registrar creates the Nodes of instances launched with a registration delay once it has
// run; add it to the manager.
type Registrar struct {
	p    *Provider
	tick time.Duration
}

// Registrar returns the provider's registrar.
func (p *Provider) Registrar() *Registrar {
	return &Registrar{p: p, tick: RegistrationTick}
}

// NeedLeaderElection is true: one replica plays the cloud.
func (r *Registrar) NeedLeaderElection() bool { return true }

// Start steps every tick until ctx ends.
func (r *Registrar) Start(ctx context.Context) error {
	return every(ctx, r.p.clock, r.tick, "kwok node registration", r.Step)
}

// Step creates the Node of every pending instance that is due and whose NodeClaim is not being
// deleted. An instance whose node class or instance type cannot be read is left for the next
// step (the NodeClaim's registration timeout ends it if that lasts); the others go on.
func (r *Registrar) Step(ctx context.Context) error {
	// Not copied: this runs four times a second over every NodeClaim, and few are due. The
	// list shares the cache's objects; one is copied before anything reads it further.
	var claims karpv1.NodeClaimList
	if err := r.p.client.List(ctx, &claims, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	now := r.p.clock.Now()
	var errs []string
	for i := range claims.Items {
		at, ok := registersAt(&claims.Items[i])
		if !ok || claims.Items[i].DeletionTimestamp != nil || at.After(now) {
			continue
		}
		if err := r.p.register(ctx, claims.Items[i].DeepCopy()); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("registering %d node(s): %s", len(errs), strings.Join(errs, "; "))
	}
	return nil
}

// registersAt is when claim's Node appears, if claim is an instance of this provider launched
// with a registration delay that has not registered yet.
func registersAt(claim *karpv1.NodeClaim) (time.Time, bool) {
	v, ok := claim.Annotations[RegistersAtAnnotation]
	if !ok || !strings.HasPrefix(claim.Status.ProviderID, ProviderIDPrefix) ||
		meta.IsStatusConditionTrue(claim.Status.Conditions, karpv1.ConditionTypeRegistered) {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		// Not one this provider wrote: register at once rather than never.
		return time.Time{}, true
	}
	return at, true
}

// register creates claim's Node, unless it exists: the instance type's labels come from the
// node class's catalog, the offering and capacity from what launch recorded on the NodeClaim.
func (p *Provider) register(ctx context.Context, claim *karpv1.NodeClaim) error {
	name, err := nodeName(claim.Status.ProviderID)
	if err != nil {
		return err
	}
	if err := p.client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	nc, err := p.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return fmt.Errorf("NodeClaim %s: %w", claim.Name, err)
	}
	types, err := p.instanceTypes(nc)
	if err != nil {
		return fmt.Errorf("NodeClaim %s: %w", claim.Name, err)
	}
	var typeLabels map[string]string
	for _, it := range types {
		if it.Name == claim.Labels[karpv1.LabelInstanceType] {
			typeLabels = it.Labels
		}
	}
	if typeLabels == nil {
		return fmt.Errorf("NodeClaim %s: instance type %q is not in KWOKNodeClass %s's catalog", claim.Name, claim.Labels[karpv1.LabelInstanceType], nc.Name)
	}
	node := nodeFor(claim, typeLabels, claim.Labels[karpv1.LabelTopologyZone], claim.Labels[karpv1.CapacityTypeLabelKey], nc.Name, claim.Annotations[NodeClassHashAnnotation])
	if err := p.createNode(ctx, node, nc, bootID(claim), claim.Status.Capacity, claim.Status.Allocatable); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("registered the node of a delayed instance", "NodeClaim", claim.Name, "node", name)
	return nil
}

// pendingInstances are the instances launched with a registration delay whose NodeClaim has
// not registered: their Nodes may not exist yet.
func (p *Provider) pendingInstances(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	var claims karpv1.NodeClaimList
	if err := p.client.List(ctx, &claims, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []*karpv1.NodeClaim
	for i := range claims.Items {
		if _, ok := registersAt(&claims.Items[i]); ok {
			out = append(out, asInstance(claims.Items[i].DeepCopy()))
		}
	}
	return out, nil
}

// pendingInstance is the instance of the node name, if it is launched and waiting for its
// registration delay; nil if there is none.
func (p *Provider) pendingInstance(ctx context.Context, name string) (*karpv1.NodeClaim, error) {
	claim := &karpv1.NodeClaim{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: name}, claim); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if _, ok := registersAt(claim); !ok || claim.Status.ProviderID != ProviderIDPrefix+name {
		return nil, nil
	}
	return asInstance(claim), nil
}

// asInstance is what Get and List say of an instance whose Node has not appeared.
func asInstance(claim *karpv1.NodeClaim) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Labels: claim.Labels, CreationTimestamp: claim.CreationTimestamp,
			Annotations: map[string]string{NodeClassHashAnnotation: claim.Annotations[NodeClassHashAnnotation]}},
		Status: karpv1.NodeClaimStatus{ProviderID: claim.Status.ProviderID, ImageID: "kwok", Capacity: claim.Status.Capacity, Allocatable: claim.Status.Allocatable},
	}
}
