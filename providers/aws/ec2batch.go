package aws

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// maxInstanceIDs bounds the instance ids of one batched DescribeInstances or
// TerminateInstances (EC2 takes 1000; upstream sends 500).
const maxInstanceIDs = 500

// batches are the provider's batched EC2 calls (docs/aws.md, "Batching"): a scale-up of many
// NodeClaims asks EC2 for one fleet per distinct request, and a drain of many nodes terminates
// them in one call, which keeps the provider far from EC2's request rate limits.
type batches struct {
	fleets    *batcher[*fleetRequest, *fleetInstance]
	describe  *batcher[string, *ec2types.Instance]
	terminate *batcher[string, struct{}]
}

func (p *Provider) newBatches() *batches {
	return &batches{
		fleets:    newBatcher(0, p.runFleet, func(n int, d time.Duration) { p.Observe.batch("create_fleet")(n, d) }),
		describe:  newBatcher(maxInstanceIDs, p.runDescribe, func(n int, d time.Duration) { p.Observe.batch("describe_instances")(n, d) }),
		terminate: newBatcher(maxInstanceIDs, p.runTerminate, func(n int, d time.Duration) { p.Observe.batch("terminate_instances")(n, d) }),
	}
}

// fleetKey is what NodeClaims must share to launch in one CreateFleet: the whole request
// but the NodeClaim's own tags and the client token.
func fleetKey(in *ec2.CreateFleetInput) string {
	raw, _ := json.Marshal(in)
	sum := sha256.Sum256(raw)
	return fmt.Sprintf("%x", sum[:16])
}

// runFleet sends one CreateFleet for a batch of NodeClaims with the same request, for as many
// instances as the batch has NodeClaims, and hands each NodeClaim one instance. Offerings EC2
// reports without capacity are marked unavailable; NodeClaims left without an instance get an
// InsufficientCapacityError when that was the reason. A batch of one carries its NodeClaim's
// tags in the request; a larger batch tags each instance and its volumes after launch.
func (p *Provider) runFleet(ctx context.Context, reqs []*fleetRequest) []result[*fleetInstance] {
	results := make([]result[*fleetInstance], len(reqs))
	// Requests share a batch only when their inputs are the same (fleetKey): the first's is
	// the batch's.
	first := reqs[0]
	in, zoneOfSubnet := first.input, first.zoneOfSubnet
	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(int32(len(reqs)))
	names := make([]string, len(reqs))
	tokens := make([]string, len(reqs))
	for i, r := range reqs {
		names[i], tokens[i] = r.claim.Name, clientToken(r.claim)
	}
	if len(reqs) == 1 {
		in.TagSpecifications = p.tagSpecifications(first.claim, first.nodeClass, true)
		in.ClientToken = aws.String(tokens[0])
	} else {
		sort.Strings(tokens)
		sum := sha256.Sum256([]byte(strings.Join(tokens, ",")))
		in.ClientToken = aws.String(fmt.Sprintf("%x", sum[:16]))
	}
	who := strings.Join(names, ", ")
	out, err := p.clients.EC2.CreateFleet(ctx, in)
	if err != nil {
		for i := range results {
			results[i].err = fmt.Errorf("creating fleet for %s: %w", who, err)
		}
		return results
	}
	var ice []string
	for _, e := range out.Errors {
		code := aws.ToString(e.ErrorCode)
		if e.LaunchTemplateAndOverrides == nil || e.LaunchTemplateAndOverrides.Overrides == nil {
			continue
		}
		ov := e.LaunchTemplateAndOverrides.Overrides
		zone := aws.ToString(ov.AvailabilityZone)
		if zone == "" {
			zone = zoneOfSubnet[aws.ToString(ov.SubnetId)]
		}
		if f := p.Observe.LaunchFailure; f != nil {
			f(zone, zoneID(first.nodeClass, zone), first.capacityType, launchFailureReason(code, aws.ToString(e.ErrorMessage)))
		}
		if !iceCodes[code] {
			continue
		}
		p.Types.MarkUnavailable(string(ov.InstanceType), zone, first.capacityType)
		ice = append(ice, fmt.Sprintf("%s in %s: %s", ov.InstanceType, zone, code))
	}
	var launched []*fleetInstance
	for _, inst := range out.Instances {
		if inst.LaunchTemplateAndOverrides == nil || inst.LaunchTemplateAndOverrides.Overrides == nil {
			continue
		}
		ov := inst.LaunchTemplateAndOverrides.Overrides
		zone := aws.ToString(ov.AvailabilityZone)
		if zone == "" {
			zone = zoneOfSubnet[aws.ToString(ov.SubnetId)]
		}
		ct := first.capacityType
		if inst.Lifecycle == ec2types.InstanceLifecycleSpot {
			ct = karpv1.CapacityTypeSpot
		}
		for _, id := range inst.InstanceIds {
			launched = append(launched, &fleetInstance{id: id, instanceType: string(inst.InstanceType), zone: zone,
				subnet: aws.ToString(ov.SubnetId), imageID: aws.ToString(ov.ImageId), capacityType: ct})
		}
	}
	var tagErr map[string]error
	if len(reqs) > 1 && len(launched) > 0 {
		tagErr = p.tagLaunched(ctx, reqs, launched)
	}
	slices.Sort(ice)
	var errs []string
	for _, e := range out.Errors {
		errs = append(errs, aws.ToString(e.ErrorCode)+": "+aws.ToString(e.ErrorMessage))
	}
	for i, r := range reqs {
		switch {
		case i < len(launched) && tagErr[launched[i].id] != nil:
			results[i].err = tagErr[launched[i].id]
		case i < len(launched):
			results[i].out = launched[i]
		case len(ice) > 0:
			results[i].err = cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no capacity for %s (%s)", r.claim.Name, strings.Join(ice, "; ")))
		default:
			results[i].err = fmt.Errorf("creating fleet for %s launched %d of %d instances: %s", who, len(launched), len(reqs), strings.Join(errs, "; "))
		}
	}
	return results
}

// tagLaunched gives each instance of a batched fleet, and its volumes, the tags of the
// NodeClaim it went to; the errors are by instance id.
func (p *Provider) tagLaunched(ctx context.Context, reqs []*fleetRequest, launched []*fleetInstance) map[string]error {
	errs := map[string]error{}
	ids := make([]string, 0, len(launched))
	for i := range min(len(reqs), len(launched)) {
		ids = append(ids, launched[i].id)
	}
	volumes := map[string][]string{}
	if out, err := p.clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids}); err == nil {
		for _, r := range out.Reservations {
			for _, inst := range r.Instances {
				for _, b := range inst.BlockDeviceMappings {
					if b.Ebs != nil && b.Ebs.VolumeId != nil {
						volumes[aws.ToString(inst.InstanceId)] = append(volumes[aws.ToString(inst.InstanceId)], *b.Ebs.VolumeId)
					}
				}
			}
		}
	}
	for i, id := range ids {
		claim := reqs[i].claim
		// The cluster tag again, so that the IAM policy's condition on tags in the request
		// (docs/aws.md) allows the call.
		tags := []ec2types.Tag{{Key: aws.String(clusterTag(p.settings.ClusterName)), Value: aws.String("owned")},
			{Key: aws.String(TagNodeClaim), Value: aws.String(claim.Name)}}
		if _, ok := reqs[i].nodeClass.Spec.Tags[TagName]; !ok {
			tags = append(tags, ec2types.Tag{Key: aws.String(TagName), Value: aws.String(claim.Name)})
		}
		if _, err := p.clients.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: append([]string{id}, volumes[id]...), Tags: tags}); err != nil {
			errs[id] = fmt.Errorf("tagging instance %s for %s: %w", id, claim.Name, err)
		}
	}
	return errs
}

// runDescribe describes a batch of instances in one call (paged); an instance EC2 does not
// know is nil. EC2 refuses the whole call when one id is unknown, so then each is asked alone.
func (p *Provider) runDescribe(ctx context.Context, ids []string) []result[*ec2types.Instance] {
	results := make([]result[*ec2types.Instance], len(ids))
	found, err := p.describeInstances(ctx, slices.Compact(slices.Sorted(slices.Values(ids))))
	if isNotFound(err) && len(ids) > 1 {
		found, err = map[string]*ec2types.Instance{}, nil
		for _, id := range ids {
			one, oneErr := p.describeInstances(ctx, []string{id})
			switch {
			case isNotFound(oneErr):
			case oneErr != nil:
				err = oneErr
			default:
				found[id] = one[id]
			}
		}
	}
	for i, id := range ids {
		if err != nil && found[id] == nil {
			results[i].err = err
			continue
		}
		results[i].out = found[id]
	}
	return results
}

func (p *Provider) describeInstances(ctx context.Context, ids []string) (map[string]*ec2types.Instance, error) {
	found := map[string]*ec2types.Instance{}
	pages := ec2.NewDescribeInstancesPaginator(p.clients.EC2, &ec2.DescribeInstancesInput{InstanceIds: ids})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return found, err
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				found[aws.ToString(r.Instances[i].InstanceId)] = &r.Instances[i]
			}
		}
	}
	return found, nil
}

// runTerminate terminates a batch of instances in one call. An unknown id makes EC2 refuse
// the whole call, so then each is terminated alone and the unknown ones answer not found.
func (p *Provider) runTerminate(ctx context.Context, ids []string) []result[struct{}] {
	results := make([]result[struct{}], len(ids))
	_, err := p.clients.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: slices.Compact(slices.Sorted(slices.Values(ids)))})
	if err == nil {
		return results
	}
	if !isNotFound(err) || len(ids) == 1 {
		for i, id := range ids {
			results[i].err = terminateError(id, err)
		}
		return results
	}
	for i, id := range ids {
		if _, err := p.clients.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
			results[i].err = terminateError(id, err)
		}
	}
	return results
}

// zoneID is the ID of a zone the node class has subnets in ("" when it has none there).
func zoneID(nc *awsv1.EC2NodeClass, zone string) string {
	for _, s := range nc.Status.Subnets {
		if s.Zone == zone {
			return s.ZoneID
		}
	}
	return ""
}

func terminateError(id string, err error) error {
	if isNotFound(err) {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	return fmt.Errorf("terminating instance %s: %w", id, err)
}
