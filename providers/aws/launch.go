package aws

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// MaxFleetTypes is how many instance types one CreateFleet request may name.
const MaxFleetTypes = 60

// Tag keys the provider puts on what it launches.
const (
	TagNodePool  = karpv1.NodePoolLabelKey
	TagNodeClaim = "karpenter.sh/nodeclaim"
	TagNodeClass = karpv1.LabelEC2NodeClass
	TagName      = "Name"
)

// clusterTag is kubernetes.io/cluster/<name>, owned.
func clusterTag(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// iceCodes are the CreateFleet error codes that mean an offering has no capacity now.
var iceCodes = map[string]bool{
	"InsufficientInstanceCapacity": true, "MaxSpotInstanceCountExceeded": true, "UnfulfillableCapacity": true,
	"Unsupported": true, "ReservationCapacityExceeded": true, "InsufficientFreeAddressesInSubnet": true,
}

// launchTemplates creates and remembers the launch templates of node classes.
type launchTemplates struct {
	clients *Clients
	cluster string
	known   sync.Map // name -> struct{}
}

// templateSpec is what a launch template holds; its hash names the template, so a change to
// any of it is a new template and nothing is ever updated in place.
type templateSpec struct {
	NodeClass       string                      `json:"nodeClass"`
	ImageID         string                      `json:"imageID"`
	UserData        string                      `json:"userData"`
	SecurityGroups  []string                    `json:"securityGroups"`
	InstanceProfile string                      `json:"instanceProfile"`
	Metadata        *awsv1.MetadataOptions      `json:"metadata,omitempty"`
	BlockDevices    []*awsv1.BlockDeviceMapping `json:"blockDevices,omitempty"`
	Monitoring      bool                        `json:"monitoring,omitempty"`
	Tags            map[string]string           `json:"tags,omitempty"`
}

func (s templateSpec) name() string {
	raw, _ := json.Marshal(s)
	sum := sha256.Sum256(raw)
	return fmt.Sprintf("karpenter.k8s.aws/%x", sum[:10])
}

// ensure returns the name of the launch template for spec, creating it if EC2 has none.
func (l *launchTemplates) ensure(ctx context.Context, spec templateSpec) (string, error) {
	name := spec.name()
	if _, ok := l.known.Load(name); ok {
		return name, nil
	}
	data := &ec2types.RequestLaunchTemplateData{
		ImageId: aws.String(spec.ImageID), UserData: aws.String(spec.UserData), SecurityGroupIds: spec.SecurityGroups,
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(spec.InstanceProfile)},
		Monitoring:         &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(spec.Monitoring)},
	}
	if m := spec.Metadata; m != nil { // each option only when set: EC2 takes its own default otherwise
		o := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:     ec2types.LaunchTemplateInstanceMetadataEndpointState(aws.ToString(m.HTTPEndpoint)),
			HttpProtocolIpv6: ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(aws.ToString(m.HTTPProtocolIPv6)),
			HttpTokens:       ec2types.LaunchTemplateHttpTokensState(aws.ToString(m.HTTPTokens)),
		}
		if m.HTTPPutResponseHopLimit != nil {
			o.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
		}
		data.MetadataOptions = o
	}
	for _, b := range spec.BlockDevices {
		if b == nil || b.EBS == nil {
			continue
		}
		ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
			DeleteOnTermination: b.EBS.DeleteOnTermination, Encrypted: b.EBS.Encrypted, Iops: int32Ptr(b.EBS.IOPS),
			KmsKeyId: b.EBS.KMSKeyID, SnapshotId: b.EBS.SnapshotID, Throughput: int32Ptr(b.EBS.Throughput),
			VolumeType: ec2types.VolumeType(aws.ToString(b.EBS.VolumeType)),
		}
		if b.EBS.VolumeSize != nil {
			ebs.VolumeSize = aws.Int32(int32((b.EBS.VolumeSize.Value() + 1<<30 - 1) >> 30)) // GiB, rounded up
		}
		data.BlockDeviceMappings = append(data.BlockDeviceMappings, ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: b.DeviceName, Ebs: ebs})
	}
	tags := []ec2types.Tag{{Key: aws.String(clusterTag(l.cluster)), Value: aws.String("owned")}, {Key: aws.String(TagNodeClass), Value: aws.String(spec.NodeClass)}}
	_, err := l.clients.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name), LaunchTemplateData: data,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}},
	})
	var api smithy.APIError
	exists := errors.As(err, &api) && api.ErrorCode() == "InvalidLaunchTemplateName.AlreadyExistsException"
	if err != nil && !exists {
		return "", fmt.Errorf("creating launch template %s: %w", name, err)
	}
	l.known.Store(name, struct{}{})
	return name, nil
}

func int32Ptr(v *int64) *int32 {
	if v == nil {
		return nil
	}
	return aws.Int32(int32(*v))
}

// candidate is one instance type with the offerings of the chosen capacity type it may launch in.
type candidate struct {
	it        *cloudprovider.InstanceType
	offerings []cloudprovider.Offering
	imageID   string
}

// fleetRequest is one CreateFleet: the candidates cheapest first, crossed with the subnets of
// their zones, in one capacity type.
type fleetRequest struct {
	claim        *karpv1.NodeClaim
	nodeClass    *awsv1.EC2NodeClass
	capacityType string
	candidates   []candidate
	templates    map[string]string // image id -> launch template name
	// input is the CreateFleet all the batch's requests share (fleetInput), and the zone of
	// each subnet it names; set by createFleet.
	input        *ec2.CreateFleetInput
	zoneOfSubnet map[string]string
}

// fleetInstance is what CreateFleet launched.
type fleetInstance struct {
	id, instanceType, zone, subnet, imageID, capacityType string
}

// createFleet launches one instance for the request, in a CreateFleet it may share with
// other NodeClaims asking for the same (runFleet). With nothing launched for it because EC2
// had no capacity, the error is an InsufficientCapacityError.
func (p *Provider) createFleet(ctx context.Context, req *fleetRequest) (*fleetInstance, error) {
	req.input, req.zoneOfSubnet = p.fleetInput(req)
	return p.batches.fleets.add(ctx, fleetKey(req.input), req)
}

// fleetInput is the CreateFleet of a request without what is the NodeClaim's own (its tags,
// the client token, the count), and the zone of each subnet it names.
func (p *Provider) fleetInput(req *fleetRequest) (*ec2.CreateFleetInput, map[string]string) {
	subnetsByZone := map[string][]string{}
	for _, s := range req.nodeClass.Status.Subnets {
		subnetsByZone[s.Zone] = append(subnetsByZone[s.Zone], s.ID)
	}
	zoneOfSubnet := map[string]string{}
	configs := map[string]*ec2types.FleetLaunchTemplateConfigRequest{}
	var order []string
	for _, c := range req.candidates {
		lt := req.templates[c.imageID]
		cfg, ok := configs[lt]
		if !ok {
			cfg = &ec2types.FleetLaunchTemplateConfigRequest{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")}}
			configs[lt] = cfg
			order = append(order, lt)
		}
		for _, o := range c.offerings {
			for _, subnet := range subnetsByZone[o.Zone] {
				zoneOfSubnet[subnet] = o.Zone
				ov := ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(c.it.Name), SubnetId: aws.String(subnet),
					AvailabilityZone: aws.String(o.Zone), ImageId: aws.String(c.imageID)}
				if req.capacityType == karpv1.CapacityTypeOnDemand || req.capacityType == karpv1.CapacityTypeReserved {
					ov.Priority = aws.Float64(float64(len(cfg.Overrides)))
				}
				cfg.Overrides = append(cfg.Overrides, ov)
			}
		}
	}
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(fleetCapacityType(req.capacityType))},
		TagSpecifications: p.tagSpecifications(req.claim, req.nodeClass, false),
	}
	for _, lt := range order {
		in.LaunchTemplateConfigs = append(in.LaunchTemplateConfigs, *configs[lt])
	}
	switch req.capacityType {
	case karpv1.CapacityTypeSpot:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case karpv1.CapacityTypeReserved:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyPrioritized,
			CapacityReservationOptions: &ec2types.CapacityReservationOptionsRequest{UsageStrategy: ec2types.FleetCapacityReservationUsageStrategyUseCapacityReservationsFirst}}
	default:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in, zoneOfSubnet
}

// allocation names the allocation strategy fleetInput gives a capacity type's CreateFleet.
func allocation(capacityType string) string {
	switch capacityType {
	case karpv1.CapacityTypeSpot:
		return string(ec2types.SpotAllocationStrategyPriceCapacityOptimized)
	case karpv1.CapacityTypeReserved:
		return string(ec2types.FleetOnDemandAllocationStrategyPrioritized)
	}
	return string(ec2types.FleetOnDemandAllocationStrategyLowestPrice)
}

func fleetCapacityType(ct string) string {
	if ct == karpv1.CapacityTypeSpot {
		return string(ec2types.DefaultTargetCapacityTypeSpot)
	}
	return string(ec2types.DefaultTargetCapacityTypeOnDemand)
}

// clientToken makes a NodeClaim's launch idempotent: a retried CreateFleet for the same
// NodeClaim returns what the first launched instead of a second instance.
func clientToken(claim *karpv1.NodeClaim) string {
	sum := sha256.Sum256([]byte(claim.Name + "/" + string(claim.UID)))
	return fmt.Sprintf("%x", sum[:16])
}

// tagSpecifications tag the instance, its volumes and the fleet with the cluster, the
// NodePool and the node class, and the node class's tags; withClaim adds the NodeClaim's
// name (and Name, unless the node class sets it), which a batched fleet tags after launch.
func (p *Provider) tagSpecifications(claim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, withClaim bool) []ec2types.TagSpecification {
	tags := map[string]string{}
	for k, v := range nc.Spec.Tags {
		tags[k] = v
	}
	tags[clusterTag(p.settings.ClusterName)] = "owned"
	tags[TagNodePool] = claim.Labels[karpv1.NodePoolLabelKey]
	tags[TagNodeClass] = nc.Name
	if withClaim {
		tags[TagNodeClaim] = claim.Name
		if _, ok := tags[TagName]; !ok {
			tags[TagName] = claim.Name
		}
	}
	var list []ec2types.Tag
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		list = append(list, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	var out []ec2types.TagSpecification
	for _, rt := range []ec2types.ResourceType{ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume, ec2types.ResourceTypeFleet} {
		out = append(out, ec2types.TagSpecification{ResourceType: rt, Tags: list})
	}
	return out
}
