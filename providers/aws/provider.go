package aws

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// ProviderIDPrefix starts an EC2 instance's provider ID: aws:///<zone>/<instance-id>.
const ProviderIDPrefix = "aws:///"

// Provider is the AWS cloud provider: it launches EC2 instances for NodeClaims of
// EC2NodeClasses and answers for them.
type Provider struct {
	client    client.Reader
	settings  Settings
	clients   *Clients
	Resolver  *Resolver
	Pricing   *Pricing
	Types     *InstanceTypes
	templates *launchTemplates
	batches   *batches
	// ReservationRoom says how many more instances a capacity reservation takes; nil: none.
	ReservationRoom func(id string) int
	// Overlays, when set, prices a NodeClaim's instance types as the solver did (the
	// NodeOverlay feature gate), so the fleet's types are ordered by those prices.
	Overlays cloudprovider.LaunchOverlays
	// Observe receives the provider's measurements for the manager's metrics.
	Observe Observer
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)
var _ cloudprovider.CapacityReporter = (*Provider)(nil)

// NewProvider builds the provider from its parts; c reads EC2NodeClasses.
func NewProvider(c client.Reader, s Settings, clients *Clients, types *InstanceTypes, pricing *Pricing) *Provider {
	p := &Provider{client: c, settings: s, clients: clients, Resolver: &Resolver{Clients: clients, Settings: s}, Pricing: pricing, Types: types,
		templates: &launchTemplates{clients: clients, cluster: s.ClusterName}}
	p.batches = p.newBatches()
	p.Resolver.forget = func(name string) { p.templates.known.Delete(name) }
	p.Resolver.gone = func(nodeClass string) {
		if p.Observe.NodeClassGone != nil {
			p.Observe.NodeClassGone(nodeClass)
		}
	}
	return p
}

// Name is "aws".
func (p *Provider) Name() string { return "aws" }

// RepairPolicies are upstream's AWS provider's: a node NotReady (False or Unknown) for 30
// minutes; the node monitoring agent's AcceleratedHardwareReady False for 10 minutes, and its
// StorageReady, NetworkingReady, KernelReady and ContainerRuntimeReady False for 30. Each
// replaces the node forcefully (a drain bound of 0): its pods are deleted at once.
func (p *Provider) RepairPolicies(context.Context, *karpv1.NodePool) ([]cloudprovider.RepairPolicy, error) {
	policy := func(t string, s corev1.ConditionStatus, d time.Duration) cloudprovider.RepairPolicy {
		return cloudprovider.RepairPolicy{ConditionType: corev1.NodeConditionType(t), ConditionStatus: s, TolerationDuration: d,
			TerminationGracePeriod: new(time.Duration(0)), Action: cloudprovider.RepairReplace}
	}
	return []cloudprovider.RepairPolicy{
		policy("Ready", corev1.ConditionFalse, 30*time.Minute),
		policy("Ready", corev1.ConditionUnknown, 30*time.Minute),
		policy("AcceleratedHardwareReady", corev1.ConditionFalse, 10*time.Minute),
		policy("StorageReady", corev1.ConditionFalse, 30*time.Minute),
		policy("NetworkingReady", corev1.ConditionFalse, 30*time.Minute),
		policy("KernelReady", corev1.ConditionFalse, 30*time.Minute),
		policy("ContainerRuntimeReady", corev1.ConditionFalse, 30*time.Minute),
	}, nil
}

// GetSupportedNodeClasses is EC2NodeClass.
func (p *Provider) GetSupportedNodeClasses() []cloudprovider.NodeClass {
	return []cloudprovider.NodeClass{&awsv1.EC2NodeClass{}}
}

// MarkUnavailable leaves an offering out for a while (a Spot interruption).
func (p *Provider) MarkUnavailable(instanceType, zone, capacityType string) {
	p.Types.MarkUnavailable(instanceType, zone, capacityType)
}

// MarkReservationUnavailable leaves a capacity reservation's offerings out for
// UnavailableFor (an interruptible reservation taking its instances back).
func (p *Provider) MarkReservationUnavailable(id string) {
	p.Types.MarkReservationUnavailable(id)
}

func (p *Provider) room(id string) int {
	if p.Types.unavailable(reservationKey, id, "") {
		return 0
	}
	if p.ReservationRoom == nil {
		return 0
	}
	return p.ReservationRoom(id)
}

// nodeClass reads a ready EC2NodeClass; one missing or not ready is a NodeClassNotReadyError.
func (p *Provider) nodeClass(ctx context.Context, ref *karpv1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	if ref == nil || ref.Kind != "EC2NodeClass" || ref.Group != awsv1.SchemeGroupVersion.Group {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("nodeClassRef %v is not an EC2NodeClass", ref))
	}
	nc := &awsv1.EC2NodeClass{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %s not found", ref.Name))
		}
		return nil, err
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady); c == nil || c.Status != metav1.ConditionTrue {
		msg := "not resolved yet"
		if c != nil && c.Message != "" {
			msg = c.Message
		}
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %s is not ready: %s", nc.Name, msg))
	}
	return nc, nil
}

// GetInstanceTypes lists the instance types the NodePool's EC2NodeClass can launch.
func (p *Provider) GetInstanceTypes(ctx context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	nc, err := p.nodeClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	return p.Types.List(ctx, nc, p.room)
}

// Create launches the cheapest instance the NodeClaim's requirements allow: reserved capacity
// when it is pinned to a reservation, spot when spot is allowed and offered, on-demand
// otherwise; at most MaxFleetTypes types, cheapest first, each in the subnets of its zones.
func (p *Provider) Create(ctx context.Context, claim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	nc, err := p.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	types, err := p.Types.List(ctx, nc, p.room)
	if err != nil {
		return nil, err
	}
	if pool := claim.Labels[karpv1.NodePoolLabelKey]; p.Overlays != nil && pool != "" {
		types = p.Overlays(pool, types)
	}
	// The launchable offerings in launch order (scheduling.LaunchOffers: the priced one first,
	// then cheapest first), grouped by capacity type and instance type in that order.
	byCT := map[string][]candidate{}
	at := map[string]map[string]int{}
	offers, priced := scheduling.LaunchOffers(types, claim, scheduling.Available)
	for _, l := range offers {
		image := imageFor(nc, l.InstanceType.Labels)
		if image == "" {
			continue
		}
		ct := l.Offering.CapacityType
		if at[ct] == nil {
			at[ct] = map[string]int{}
		}
		i, ok := at[ct][l.InstanceType.Name]
		if !ok {
			i = len(byCT[ct])
			at[ct][l.InstanceType.Name] = i
			byCT[ct] = append(byCT[ct], candidate{it: l.InstanceType, imageID: image})
		}
		byCT[ct][i].offerings = append(byCT[ct][i].offerings, l.Offering)
	}
	// The priced offering's capacity type first; without one (a NodeClaim not made by the
	// solver), reserved, Spot, then on-demand, as upstream.
	prefer := []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}
	if priced && imageFor(nc, offers[0].InstanceType.Labels) != "" {
		prefer = append([]string{offers[0].Offering.CapacityType}, prefer...)
	}
	ct := ""
	for _, want := range prefer {
		if len(byCT[want]) > 0 {
			ct = want
			break
		}
	}
	if ct == "" {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no instance type of EC2NodeClass %s has an available offering the requirements of %s allow", nc.Name, claim.Name))
	}
	cands := byCT[ct] // cheapest first, as their first offerings came
	if len(cands) > MaxFleetTypes {
		cands = cands[:MaxFleetTypes]
	}
	templates, err := p.ensureTemplates(ctx, claim, nc, cands)
	if err != nil {
		return nil, err
	}
	inst, err := p.createFleet(ctx, &fleetRequest{claim: claim, nodeClass: nc, capacityType: ct, candidates: cands, templates: templates})
	if err != nil {
		return nil, err
	}
	var it *cloudprovider.InstanceType
	for _, c := range cands {
		if c.it.Name == inst.instanceType {
			it = c.it
		}
	}
	if it == nil {
		return nil, fmt.Errorf("CreateFleet launched %s, which was not asked for", inst.instanceType)
	}
	out := launched(claim, it, inst)
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[NodeClassHashAnnotation] = NodeClassHash(nc)
	// Which offering it is: the zone and capacity type CreateFleet launched in (a reserved
	// launch goes into the first reservation of that zone the candidates offered).
	launchedAs := scheduling.Launchable{InstanceType: it, Offering: cloudprovider.Offering{Zone: inst.zone, CapacityType: inst.capacityType}}
	for _, c := range cands {
		if c.it != it {
			continue
		}
		for _, o := range c.offerings {
			if o.Zone == inst.zone && o.CapacityType == inst.capacityType {
				launchedAs.Offering = o
				break
			}
		}
	}
	why := fmt.Sprintf("CreateFleet (%s allocation) chose it among %d instance types", allocation(ct), len(cands))
	if !priced {
		why = "the priced offering is not available, not in the catalog, or has no AMI"
	}
	if d := scheduling.Deviation(claim, launchedAs, why); d != "" {
		out.Annotations[cloudprovider.LaunchDeviationAnnotation] = d
	}
	return out, nil
}

// imageFor is the node class's AMI for an instance type (by its labels): the first whose
// requirements the type meets (its architecture, and for an alias's variants, whether it has
// NVIDIA GPUs or Neuron accelerators), "" if none.
func imageFor(nc *awsv1.EC2NodeClass, labels map[string]string) string {
	have := scheduling.LabelRequirements(labels)
	for _, a := range nc.Status.AMIs {
		want := scheduling.Requirements{}
		for _, r := range a.Requirements {
			want.Add(scheduling.NewRequirement(r.Key, r.Operator, r.Values...))
		}
		if have.Compatible(want) == nil {
			return a.ID
		}
	}
	return ""
}

// ensureTemplates makes a launch template for each AMI the candidates use.
func (p *Provider) ensureTemplates(ctx context.Context, claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, cands []candidate) (map[string]string, error) {
	family := awsv1.AMIFamilyAL2023
	if nc.Spec.AMIFamily != nil && *nc.Spec.AMIFamily != "" {
		family = *nc.Spec.AMIFamily
	} else if len(nc.Spec.AMISelectorTerms) > 0 && nc.Spec.AMISelectorTerms[0].Alias != "" {
		switch strings.SplitN(nc.Spec.AMISelectorTerms[0].Alias, "@", 2)[0] {
		case "al2":
			family = awsv1.AMIFamilyAL2
		case "bottlerocket":
			family = awsv1.AMIFamilyBottlerocket
		}
	}
	labels := map[string]string{}
	for k, v := range claim.Labels {
		labels[k] = v
	}
	for _, r := range claim.Spec.Requirements { // single-valued requirements become labels
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 && !karpv1.WellKnownLabels.Has(r.Key) {
			labels[r.Key] = r.Values[0]
		}
	}
	taints := append([]corev1.Taint{karpv1.UnregisteredNoExecuteTaint}, claim.Spec.Taints...)
	taints = append(taints, claim.Spec.StartupTaints...)
	userData, err := UserData(family, Bootstrap{ClusterName: p.settings.ClusterName, ClusterEndpoint: p.settings.ClusterEndpoint,
		CABundle: p.settings.ClusterCABundle, Labels: labels, Taints: taints, Kubelet: nc.Spec.Kubelet, Custom: aws.ToString(nc.Spec.UserData)})
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	p.observeUserData(ctx, nc.Name, userData)
	var groups []string
	for _, g := range nc.Status.SecurityGroups {
		groups = append(groups, g.ID)
	}
	out := map[string]string{}
	for _, c := range cands {
		if _, ok := out[c.imageID]; ok {
			continue
		}
		name, err := p.templates.ensure(ctx, templateSpec{NodeClass: nc.Name, ImageID: c.imageID, UserData: userData, SecurityGroups: groups,
			InstanceProfile: nc.Status.InstanceProfile, Metadata: nc.Spec.MetadataOptions, BlockDevices: nc.Spec.BlockDeviceMappings,
			Monitoring: aws.ToBool(nc.Spec.DetailedMonitoring), Tags: nc.Spec.Tags})
		if err != nil {
			return nil, err
		}
		out[c.imageID] = name
	}
	return out, nil
}

// launched is the NodeClaim as launched on the instance.
func launched(claim *karpv1.NodeClaim, it *cloudprovider.InstanceType, inst *fleetInstance) *karpv1.NodeClaim {
	out := claim.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range it.Labels {
		out.Labels[k] = v
	}
	out.Labels[karpv1.LabelTopologyZone] = inst.zone
	out.Labels[karpv1.CapacityTypeLabelKey] = inst.capacityType
	out.Status.ProviderID = ProviderIDPrefix + inst.zone + "/" + inst.id
	out.Status.ImageID = inst.imageID
	out.Status.Capacity = it.Capacity.DeepCopy()
	out.Status.Allocatable = it.Allocatable()
	return out
}

// instanceID reads the instance id of an aws:///<zone>/<id> provider ID.
func instanceID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return "", fmt.Errorf("provider ID %q is not aws:///<zone>/<instance-id>", providerID)
	}
	_, id, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("provider ID %q is not aws:///<zone>/<instance-id>", providerID)
	}
	return id, nil
}

// liveStates are the instance states of an instance that still exists.
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// Get returns the NodeClaim of an instance; a terminated or unknown one is not found. The
// lookups of many NodeClaims at once go to EC2 as one DescribeInstances.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	i, err := p.instance(ctx, providerID)
	if err != nil {
		return nil, err
	}
	return fromInstance(i), nil
}

// instance describes the live instance of a provider ID (batched); a terminated or unknown
// one is a NodeClaimNotFoundError.
func (p *Provider) instance(ctx context.Context, providerID string) (*ec2types.Instance, error) {
	id, err := instanceID(providerID)
	if err != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	i, err := p.batches.describe.add(ctx, "", id)
	if err != nil {
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	if i == nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	if i.State != nil && i.State.Name == ec2types.InstanceStateNameTerminated {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminated", id))
	}
	return i, nil
}

// List returns a NodeClaim for every live instance tagged for the cluster and a NodePool.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	pages := ec2.NewDescribeInstancesPaginator(p.clients.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + clusterTag(p.settings.ClusterName)), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{TagNodePool}},
		{Name: aws.String("instance-state-name"), Values: liveStates},
	}})
	var out []*karpv1.NodeClaim
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the cluster's instances: %w", err)
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				out = append(out, fromInstance(&r.Instances[i]))
			}
		}
	}
	return out, nil
}

// fromInstance is a NodeClaim as EC2 describes its instance: name and NodePool from its tags,
// provider ID, type, zone, capacity type, image.
func fromInstance(i *ec2types.Instance) *karpv1.NodeClaim {
	tags := map[string]string{}
	for _, t := range i.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	zone := ""
	if i.Placement != nil {
		zone = aws.ToString(i.Placement.AvailabilityZone)
	}
	ct := karpv1.CapacityTypeOnDemand
	if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		ct = karpv1.CapacityTypeSpot
	} else if i.CapacityReservationId != nil {
		ct = karpv1.CapacityTypeReserved
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: tags[TagNodeClaim], Labels: map[string]string{
		karpv1.NodePoolLabelKey: tags[TagNodePool], karpv1.LabelInstanceType: string(i.InstanceType),
		karpv1.LabelTopologyZone: zone, karpv1.CapacityTypeLabelKey: ct,
	}}}
	if i.LaunchTime != nil {
		nc.CreationTimestamp = metav1.NewTime(*i.LaunchTime)
	}
	nc.Status.ProviderID = ProviderIDPrefix + zone + "/" + aws.ToString(i.InstanceId)
	nc.Status.ImageID = aws.ToString(i.ImageId)
	return nc
}

// Delete terminates the NodeClaim's instance; once it is terminated, or unknown, the answer
// is a NodeClaimNotFoundError. The terminations of many NodeClaims at once go to EC2 as one
// TerminateInstances.
//
// An instance already shutting down is not asked again (as upstream: it saves EC2 calls while
// the termination controller waits). A failed termination is reported to the Observer with
// the instance's zone.
func (p *Provider) Delete(ctx context.Context, claim *karpv1.NodeClaim) error {
	i, err := p.instance(ctx, claim.Status.ProviderID)
	if err != nil {
		return err
	}
	if i.State != nil && i.State.Name == ec2types.InstanceStateNameShuttingDown {
		return nil
	}
	id, _ := instanceID(claim.Status.ProviderID)
	_, err = p.batches.terminate.add(ctx, "", id)
	if err != nil && !cloudprovider.IsNodeClaimNotFoundError(err) && p.Observe.TerminationFailure != nil {
		zone, zid := "", ""
		if i.Placement != nil {
			zone, zid = aws.ToString(i.Placement.AvailabilityZone), aws.ToString(i.Placement.AvailabilityZoneId)
		}
		if zid == "" && zone != "" {
			if nc, err := p.nodeClass(ctx, claim.Spec.NodeClassRef); err == nil {
				zid = zoneID(nc, zone)
			}
		}
		p.Observe.TerminationFailure(zone, zid)
	}
	return err
}

// Drift reasons.
const (
	AMIDrift           cloudprovider.DriftReason = "AMIDrift"
	SubnetDrift        cloudprovider.DriftReason = "SubnetDrift"
	SecurityGroupDrift cloudprovider.DriftReason = "SecurityGroupDrift"
	NodeClassDrift     cloudprovider.DriftReason = "NodeClassDrift"
)

// NodeClassHashAnnotation records, on a NodeClaim, the hash of the node class settings its
// instance was launched with (NodeClassHash).
const NodeClassHashAnnotation = "karpenter.k8s.aws/ec2nodeclass-hash"

// NodeClassHash hashes what an EC2NodeClass sets on an instance once, at launch, and cannot
// change on it afterwards: user data, tags, metadata options, block devices, monitoring,
// public IP, instance store policy, kubelet, context. Selector terms are not in it: what they
// resolve to is compared instead (AMI and subnet drift), so that a term rewritten to select
// the same things does not roll the nodes.
func NodeClassHash(nc *awsv1.EC2NodeClass) string {
	raw, _ := json.Marshal(struct {
		UserData, Context, InstanceStorePolicy *string
		Tags                                   map[string]string
		Metadata                               *awsv1.MetadataOptions
		BlockDevices                           []*awsv1.BlockDeviceMapping
		Monitoring, PublicIP                   *bool
		Kubelet                                awsv1.KubeletConfiguration
	}{nc.Spec.UserData, nc.Spec.Context, (*string)(nc.Spec.InstanceStorePolicy), nc.Spec.Tags, nc.Spec.MetadataOptions, nc.Spec.BlockDeviceMappings,
		nc.Spec.DetailedMonitoring, nc.Spec.AssociatePublicIPAddress, nc.Spec.Kubelet})
	sum := sha256.Sum256(raw)
	return fmt.Sprintf("%x", sum[:8])
}

// IsDrifted says whether the node class's launch-time settings changed since the NodeClaim's
// instance launched (NodeClassDrift), or the instance runs an AMI, sits in a subnet, or has
// security groups, its node class no longer resolves to.
func (p *Provider) IsDrifted(ctx context.Context, claim *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	nc, err := p.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return "", err
	}
	if h, ok := claim.Annotations[NodeClassHashAnnotation]; ok && h != NodeClassHash(nc) {
		return NodeClassDrift, nil
	}
	i, err := p.instance(ctx, claim.Status.ProviderID)
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(nc.Status.AMIs, func(a awsv1.AMI) bool { return a.ID == aws.ToString(i.ImageId) }) {
		return AMIDrift, nil
	}
	if i.SubnetId != nil && !slices.ContainsFunc(nc.Status.Subnets, func(s awsv1.Subnet) bool { return s.ID == *i.SubnetId }) {
		return SubnetDrift, nil
	}
	// The instance's security groups must be exactly the node class's: one added to the node
	// class is as much a drift as one removed. An instance that reports none is not judged.
	if len(i.SecurityGroups) > 0 {
		have := make([]string, 0, len(i.SecurityGroups))
		for _, g := range i.SecurityGroups {
			have = append(have, aws.ToString(g.GroupId))
		}
		want := make([]string, 0, len(nc.Status.SecurityGroups))
		for _, g := range nc.Status.SecurityGroups {
			want = append(want, g.ID)
		}
		slices.Sort(have)
		slices.Sort(want)
		if !slices.Equal(slices.Compact(have), slices.Compact(want)) {
			return SecurityGroupDrift, nil
		}
	}
	return "", nil
}
