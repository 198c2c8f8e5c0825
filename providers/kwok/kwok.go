// Package kwok is the simulated cloud provider: Create makes a Node object for a NodeClaim
// from an instance-type catalog, and the kwok controller (sigs.k8s.io/kwok) plays its
// kubelet. It launches the cheapest available offering the NodeClaim allows, and injects the
// launch delays, insufficient-capacity errors and Spot interruptions its KWOKNodeClass asks
// for. It is the provider of `make run`, the e2e suites and scale tests.
package kwok

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/catalog"
	"github.com/karpenter-policy/karpenter/scheduling"
)

const (
	// Name of the provider.
	Name = "kwok"
	// ProviderIDPrefix starts every provider ID: kwok://<node name>.
	ProviderIDPrefix = "kwok://"
	// NodeAnnotation marks the nodes the kwok controller manages.
	NodeAnnotation = "kwok.x-k8s.io/node"
	// NodeClassAnnotation names the KWOKNodeClass a node was launched from.
	NodeClassAnnotation = "karpenter.kwok.sh/nodeclass"
	// NodeClassHashAnnotation records the node class settings a node was launched with.
	NodeClassHashAnnotation = "karpenter.kwok.sh/nodeclass-hash"
	// UnavailableFor is how long an offering that failed with insufficient capacity is skipped.
	UnavailableFor = 3 * time.Minute
)

// Provider implements cloudprovider.CloudProvider over Node objects.
type Provider struct {
	client client.Client
	clock  clock.Clock
	// overlays, when set, prices a NodeClaim's instance types as the solver did.
	overlays cloudprovider.LaunchOverlays

	mu          sync.Mutex
	catalogs    map[string][]*cloudprovider.InstanceType
	unavailable map[string]time.Time // offering key -> until
	rand        *rand.Rand
	// memo holds each node class's instance types, by name and resourceVersion, built at
	// generation gen (which moves when an offering becomes unavailable) and good until valid
	// (when the first unavailable offering becomes available again).
	memo  map[string][]*cloudprovider.InstanceType
	gen   uint64
	memoG uint64
	valid time.Time
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// New returns a provider; seed makes its failure injection repeatable.
func New(c client.Client, clk clock.Clock, seed int64) *Provider {
	return &Provider{client: c, clock: clk, catalogs: map[string][]*cloudprovider.InstanceType{}, memo: map[string][]*cloudprovider.InstanceType{},
		unavailable: map[string]time.Time{}, rand: rand.New(rand.NewSource(seed))} //nolint:gosec // simulation, not security
}

// MarkUnavailable implements cloudprovider.CapacityReporter: the offering is skipped for
// UnavailableFor, as after an insufficient-capacity error.
func (p *Provider) MarkUnavailable(instanceType, zone, capacityType string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unavailable[offeringKey(instanceType, cloudprovider.Offering{Zone: zone, CapacityType: capacityType})] = p.clock.Now().Add(UnavailableFor)
	p.gen++
}

// RepairPolicies are upstream kwok's (a node Ready False or Unknown for 10 minutes: replace
// forcefully) and the node class's repairPolicies (forceful unless they set a
// terminationGracePeriod).
func (p *Provider) RepairPolicies(ctx context.Context, np *karpv1.NodePool) ([]cloudprovider.RepairPolicy, error) {
	out := []cloudprovider.RepairPolicy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute, TerminationGracePeriod: new(time.Duration(0)),
			Action: cloudprovider.RepairReplace},
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 10 * time.Minute, TerminationGracePeriod: new(time.Duration(0)),
			Action: cloudprovider.RepairReplace},
	}
	nc, err := p.nodeClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return out, err
	}
	for _, rp := range nc.Spec.RepairPolicies {
		policy := cloudprovider.RepairPolicy{ConditionType: corev1.NodeConditionType(rp.ConditionType),
			ConditionStatus: corev1.ConditionStatus(rp.ConditionStatus), TolerationDuration: rp.Toleration.Duration,
			Action: cloudprovider.RepairReplace}
		if rp.Action == string(cloudprovider.RepairReboot) {
			policy.Action = cloudprovider.RepairReboot
		}
		if rp.RebootDrain != nil {
			policy.RebootDrain = &rp.RebootDrain.Duration
		}
		policy.TerminationGracePeriod = new(time.Duration(0))
		if rp.TerminationGracePeriod != nil {
			policy.TerminationGracePeriod = &rp.TerminationGracePeriod.Duration
		}
		out = append(out, policy)
	}
	return out, nil
}

// Name is "kwok".
func (p *Provider) Name() string { return Name }

// GetSupportedNodeClasses is KWOKNodeClass.
func (p *Provider) GetSupportedNodeClasses() []cloudprovider.NodeClass {
	return []cloudprovider.NodeClass{&kwokv1alpha1.KWOKNodeClass{}}
}

func offeringKey(instanceType string, o cloudprovider.Offering) string {
	return instanceType + "/" + o.Zone + "/" + o.CapacityType
}

func (p *Provider) nodeClass(ctx context.Context, ref *karpv1.NodeClassReference) (*kwokv1alpha1.KWOKNodeClass, error) {
	if ref == nil || ref.Kind != "KWOKNodeClass" {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("nodeClassRef %v is not a KWOKNodeClass", ref))
	}
	nc := &kwokv1alpha1.KWOKNodeClass{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("KWOKNodeClass %s not found", ref.Name))
		}
		return nil, err
	}
	return nc, nil
}

// instanceTypes are the node class's catalog, limited to its zones, with offerings that
// recently failed marked unavailable. They are memoized per node class (name and
// resourceVersion) and availability generation: the scheduling of an idle cluster asks for
// them every few seconds, and they change only when the node class or an offering's
// availability does. Callers share the slices and must not modify them.
func (p *Provider) instanceTypes(nc *kwokv1alpha1.KWOKNodeClass) ([]*cloudprovider.InstanceType, error) {
	name := nc.Spec.Catalog
	if name == "" {
		name = "embedded"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if p.memoG != p.gen || (!p.valid.IsZero() && !now.Before(p.valid)) {
		p.memo, p.memoG, p.valid = map[string][]*cloudprovider.InstanceType{}, p.gen, time.Time{}
		for _, until := range p.unavailable {
			if now.Before(until) && (p.valid.IsZero() || until.Before(p.valid)) {
				p.valid = until
			}
		}
	}
	key := nc.Name + "/" + nc.ResourceVersion
	if its, ok := p.memo[key]; ok && nc.ResourceVersion != "" {
		return its, nil
	}
	base, ok := p.catalogs[name]
	if !ok {
		f := catalog.Embedded()
		if name == catalog.UpstreamKWOKName {
			f = catalog.UpstreamKWOK()
		} else if name != "embedded" {
			var err error
			if f, err = catalog.Load(name); err != nil {
				return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("KWOKNodeClass %s: %w", nc.Name, err))
			}
		}
		base = f.ForProvider()
		p.catalogs[name] = base
	}
	zones := sets.New(nc.Spec.Zones...)
	out := make([]*cloudprovider.InstanceType, 0, len(base))
	for _, it := range base {
		c := *it
		c.Offerings = nil
		for _, o := range it.Offerings {
			if zones.Len() > 0 && !zones.Has(o.Zone) {
				continue
			}
			if until, ok := p.unavailable[offeringKey(it.Name, o)]; ok && now.Before(until) {
				o.Available = false
			}
			c.Offerings = append(c.Offerings, o)
		}
		out = append(out, &c)
	}
	p.memo[key] = out
	return out, nil
}

// GetInstanceTypes returns the instance types of the NodePool's KWOKNodeClass.
func (p *Provider) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	nc, err := p.nodeClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	return p.instanceTypes(nc)
}

// WithOverlays makes Create launch the cheapest offering at the prices NodeOverlays give
// (the NodeOverlay feature gate).
func (p *Provider) WithOverlays(o cloudprovider.LaunchOverlays) *Provider {
	p.overlays = o
	return p
}

// Create launches the cheapest available offering that the NodeClaim's requirements allow
// (at the overlaid prices, WithOverlays), as a Node object.
func (p *Provider) Create(ctx context.Context, claim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	nc, err := p.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	// As upstream's kwok provider: a node class whose Ready condition is False launches
	// nothing (the lifecycle then deletes the NodeClaim with NodeClassNotReady). One not
	// reconciled yet (no condition) is not refused.
	if cond := meta.FindStatusCondition(nc.Status.Conditions, "Ready"); cond != nil && cond.Status == metav1.ConditionFalse {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("KWOKNodeClass %s is not ready: %s", nc.Name, cond.Message))
	}
	if d := nc.Spec.LaunchDelay; d != nil && d.Duration > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.clock.After(d.Duration):
		}
	}
	types, err := p.instanceTypes(nc)
	if err != nil {
		return nil, err
	}
	if pool := claim.Labels[karpv1.NodePoolLabelKey]; p.overlays != nil && pool != "" {
		types = p.overlays(pool, types)
	}
	offers, priced := scheduling.LaunchOffers(types, claim, scheduling.Available)
	var failed []string
	for _, c := range offers {
		if p.injectInsufficientCapacity(nc, c) {
			failed = append(failed, offeringKey(c.InstanceType.Name, c.Offering))
			continue
		}
		why := "the priced offering is not available or not in the catalog"
		if priced {
			why = "no capacity for " + strings.Join(failed, ", ")
		}
		return p.launch(ctx, claim, nc, c, scheduling.Deviation(claim, c, why))
	}
	if len(failed) > 0 {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no capacity for %s", strings.Join(failed, ", ")))
	}
	return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no available offering matches the NodeClaim's requirements and requests"))
}

// injectInsufficientCapacity decides whether this launch attempt fails as the node class asks;
// a failed offering is unavailable for UnavailableFor.
func (p *Provider) injectInsufficientCapacity(nc *kwokv1alpha1.KWOKNodeClass, c scheduling.Launchable) bool {
	ic := nc.Spec.InsufficientCapacity
	if ic == nil || ic.Percent <= 0 {
		return false
	}
	matched := len(ic.Offerings) == 0
	for _, sel := range ic.Offerings {
		if (sel.InstanceType == "" || sel.InstanceType == c.InstanceType.Name) && (sel.Zone == "" || sel.Zone == c.Offering.Zone) &&
			(sel.CapacityType == "" || sel.CapacityType == c.Offering.CapacityType) {
			matched = true
			break
		}
	}
	if !matched {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rand.Int31n(100) >= ic.Percent {
		return false
	}
	p.unavailable[offeringKey(c.InstanceType.Name, c.Offering)] = p.clock.Now().Add(UnavailableFor)
	p.gen++
	return true
}

// launch makes the instance of offering c for claim and returns the NodeClaim as launched.
func (p *Provider) launch(ctx context.Context, claim *karpv1.NodeClaim, nc *kwokv1alpha1.KWOKNodeClass, c scheduling.Launchable, deviation string) (*karpv1.NodeClaim, error) {
	hash := nodeClassHash(nc)
	node := nodeFor(claim, c.InstanceType.Labels, c.Offering.Zone, c.Offering.CapacityType, nc.Name, hash)
	capacity, allocatable := c.InstanceType.Capacity.DeepCopy(), c.InstanceType.Allocatable()
	out := claim.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for _, k := range []string{karpv1.LabelInstanceType, karpv1.LabelTopologyZone, karpv1.CapacityTypeLabelKey, karpv1.LabelArch, karpv1.LabelOS} {
		if v, ok := node.Labels[k]; ok {
			out.Labels[k] = v
		}
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[NodeClassHashAnnotation] = hash
	if deviation != "" {
		out.Annotations[cloudprovider.LaunchDeviationAnnotation] = deviation
	}
	out.Status.ProviderID = node.Spec.ProviderID
	out.Status.ImageID = "kwok"
	out.Status.Capacity = capacity
	out.Status.Allocatable = allocatable
	// With a registration delay the instance exists from now on, and the Registrar creates its
	// Node when the delay has run (docs/architecture.md, "Simulated provider").
	if d := nc.Spec.RegistrationDelay; d != nil && d.Duration > 0 {
		out.Annotations[RegistersAtAnnotation] = p.clock.Now().Add(d.Duration).UTC().Format(time.RFC3339Nano)
		return out, nil
	}
	if err := p.createNode(ctx, node, nc, bootID(claim), capacity, allocatable); err != nil {
		return nil, err
	}
	return out, nil
}

// nodeFor is the Node object the instance of claim registers as: the instance type's labels
// (typeLabels), the NodeClaim's, and its offering's zone and capacity type.
func nodeFor(claim *karpv1.NodeClaim, typeLabels map[string]string, zone, capacityType, nodeClass, hash string) *corev1.Node {
	labels := map[string]string{}
	for k, v := range typeLabels {
		labels[k] = v
	}
	for k, v := range claim.Labels {
		labels[k] = v
	}
	labels[karpv1.LabelTopologyZone] = zone
	labels[karpv1.CapacityTypeLabelKey] = capacityType
	labels[corev1.LabelHostname] = claim.Name
	// Single-valued requirements become labels, as they do on a real node.
	for _, r := range claim.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			if _, ok := labels[r.Key]; !ok {
				labels[r.Key] = r.Values[0]
			}
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        claim.Name,
			Labels:      labels,
			Annotations: map[string]string{NodeAnnotation: "fake", NodeClassHashAnnotation: hash, NodeClassAnnotation: nodeClass},
		},
		Spec: corev1.NodeSpec{
			ProviderID: ProviderIDPrefix + claim.Name,
			Taints:     append(append([]corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, claim.Spec.Taints...), claim.Spec.StartupTaints...),
		},
	}
}

// bootID is the boot ID a NodeClaim's node first reports, as a kubelet does, so that a reboot
// (Reboot) can be told by a new one.
func bootID(claim *karpv1.NodeClaim) string { return "kwok-" + string(claim.UID) }

// createNode registers an instance: its Node object, its CSINode, and the capacity its kubelet
// reports.
func (p *Provider) createNode(ctx context.Context, node *corev1.Node, nc *kwokv1alpha1.KWOKNodeClass, boot string, capacity, allocatable corev1.ResourceList) error {
	if err := p.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", node.Name, err)
	}
	if err := p.registerCSIDrivers(ctx, node, nc); err != nil {
		return err
	}
	// A merge patch: the kwok controller may already be updating the node's status.
	base := node.DeepCopy()
	base.Status = corev1.NodeStatus{}
	node.Status.Capacity = capacity.DeepCopy()
	node.Status.Allocatable = allocatable.DeepCopy()
	node.Status.NodeInfo.BootID = boot
	if err := p.client.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("setting the capacity of node %s: %w", node.Name, err)
	}
	return nil
}

// nodeClassHash covers the settings that change what a node would be launched as.
func nodeClassHash(nc *kwokv1alpha1.KWOKNodeClass) string {
	b, _ := json.Marshal(struct {
		Catalog string   `json:"catalog"`
		Zones   []string `json:"zones"`
	}{nc.Spec.Catalog, nc.Spec.Zones})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func nodeName(providerID string) (string, error) {
	if !strings.HasPrefix(providerID, ProviderIDPrefix) {
		return "", fmt.Errorf("provider ID %q is not a kwok one", providerID)
	}
	return strings.TrimPrefix(providerID, ProviderIDPrefix), nil
}

// Delete deletes the NodeClaim's Node; once it is gone it returns NodeClaimNotFoundError.
func (p *Provider) Delete(ctx context.Context, claim *karpv1.NodeClaim) error {
	name, err := nodeName(claim.Status.ProviderID)
	if err != nil {
		return cloudprovider.NewNodeClaimNotFoundError(err)
	}
	node := &corev1.Node{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("node %s is gone", name))
		}
		return err
	}
	if terminated(node) {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("the instance of node %s is terminated", name))
	}
	return p.terminate(ctx, node)
}

// Get returns the NodeClaim for a provider ID.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	name, err := nodeName(providerID)
	if err != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	node := &corev1.Node{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		// An instance launched with a registration delay exists before its Node does.
		if pending, perr := p.pendingInstance(ctx, name); perr != nil || pending != nil {
			return pending, perr
		}
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("node %s not found", name))
	}
	if terminated(node) {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("the instance of node %s is terminated", name))
	}
	return toNodeClaim(node), nil
}

// List returns a NodeClaim for every instance this provider launched: every node it
// manages, and every instance whose Node has not appeared yet (a registration delay).
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	var nodes corev1.NodeList
	if err := p.client.List(ctx, &nodes); err != nil {
		return nil, err
	}
	var out []*karpv1.NodeClaim
	names := make(map[string]bool, len(nodes.Items))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		names[n.Name] = true
		if n.Annotations[NodeAnnotation] == "fake" && strings.HasPrefix(n.Spec.ProviderID, ProviderIDPrefix) {
			out = append(out, toNodeClaim(n))
		}
	}
	pending, err := p.pendingInstances(ctx)
	if err != nil {
		return nil, err
	}
	for _, inst := range pending {
		if !names[inst.Name] {
			out = append(out, inst)
		}
	}
	return out, nil
}

func toNodeClaim(n *corev1.Node) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: map[string]string{NodeClassHashAnnotation: n.Annotations[NodeClassHashAnnotation]},
			CreationTimestamp: n.CreationTimestamp},
		Status: karpv1.NodeClaimStatus{ProviderID: n.Spec.ProviderID, NodeName: n.Name, ImageID: "kwok", Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable},
	}
}

// IsDrifted reports "NodeClassDrift" when the node class's catalog or zones changed since
// the NodeClaim launched.
func (p *Provider) IsDrifted(ctx context.Context, claim *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	nc, err := p.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return "", err
	}
	if launched, ok := claim.Annotations[NodeClassHashAnnotation]; ok && launched != nodeClassHash(nc) {
		return "NodeClassDrift", nil
	}
	return "", nil
}
