package aws_test

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/awsemu"
)

// readyNodeClass resolves a node class against the emulator as the node class controller
// would, and marks it Ready.
func readyNodeClass(t *testing.T, r *aws.Resolver, name string) *awsv1.EC2NodeClass {
	t.Helper()
	ctx := context.Background()
	nc := discovered("local", func(nc *awsv1.EC2NodeClass) {
		nc.Name, nc.UID = name, types.UID("6f1c1a8e-0000-4000-8000-0000000000"+name[len(name)-2:])
		nc.Spec.Tags = map[string]string{"team": "platform"}
	})
	var err error
	if nc.Status.Subnets, err = r.Subnets(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if nc.Status.SecurityGroups, err = r.SecurityGroups(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if nc.Status.AMIs, err = r.AMIs(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if nc.Status.InstanceProfile, err = r.InstanceProfile(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	return nc
}

func claimFor(nodeClass string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	return test.NodeClaim(func(c *karpv1.NodeClaim) {
		c.Labels = map[string]string{karpv1.NodePoolLabelKey: "default"}
		c.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: nodeClass}
		c.Spec.Requirements = reqs
		c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	})
}

func in(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func TestCreateGetListDriftDelete(t *testing.T) {
	e := emulator
	ctx := context.Background()
	r := resolver(t, e, "local")
	nc := readyNodeClass(t, r, "launch-01")
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).Build()
	clients, pricing, types := providers(t, e)
	if err := pricing.UpdateSpot(ctx); err != nil {
		t.Fatal(err)
	}
	p := aws.NewProvider(kube, aws.Settings{ClusterName: "local", ClusterEndpoint: "https://10.0.0.1:6443", Region: e.Region, KubernetesVersion: "1.37"}, clients, types, pricing)
	userData := map[string]int{} // by node class, as karpenter_ec2nodeclasses_userdata_bytes
	p.Observe = aws.Observer{
		UserData:      func(nodeClass string, bytes int) { userData[nodeClass] = bytes },
		NodeClassGone: func(nodeClass string) { delete(userData, nodeClass) },
	}

	claim := claimFor(nc.Name, in(karpv1.LabelInstanceType, "m5.large", "c5.large", "m5.xlarge"), in(karpv1.CapacityTypeLabelKey, "on-demand"))
	got, err := p.Create(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[karpv1.LabelInstanceType] != "c5.large" || got.Labels[karpv1.CapacityTypeLabelKey] != "on-demand" {
		t.Errorf("launched %s %s; want the cheapest allowed, c5.large on-demand", got.Labels[karpv1.LabelInstanceType], got.Labels[karpv1.CapacityTypeLabelKey])
	}
	zone := got.Labels[karpv1.LabelTopologyZone]
	if !strings.HasPrefix(got.Status.ProviderID, "aws:///"+zone+"/i-") || got.Status.Allocatable.Cpu().MilliValue() != 1930 {
		t.Errorf("providerID %q, allocatable %v", got.Status.ProviderID, got.Status.Allocatable)
	}
	id := got.Status.ProviderID[strings.LastIndex(got.Status.ProviderID, "/")+1:]
	out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	inst := out.Reservations[0].Instances[0]
	tags := map[string]string{}
	for _, tag := range inst.Tags {
		tags[*tag.Key] = *tag.Value
	}
	for k, v := range map[string]string{"kubernetes.io/cluster/local": "owned", "karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": claim.Name,
		"karpenter.k8s.aws/ec2nodeclass": nc.Name, "team": "platform"} {
		if tags[k] != v {
			t.Errorf("instance tag %s = %q, want %q (tags %v)", k, tags[k], v, tags)
		}
	}
	amd64 := "" // the standard build: the instance type has no accelerator
	for _, a := range nc.Status.AMIs {
		if a.Requirements[0].Values[0] == "amd64" && variantOf(a) == "standard" {
			amd64 = a.ID
		}
	}
	if awssdk.ToString(inst.ImageId) != amd64 || got.Status.ImageID != amd64 {
		t.Errorf("instance runs %s (NodeClaim says %s); the node class resolved %s", awssdk.ToString(inst.ImageId), got.Status.ImageID, amd64)
	}
	inSubnets := false
	for _, s := range nc.Status.Subnets {
		inSubnets = inSubnets || s.ID == awssdk.ToString(inst.SubnetId)
	}
	if !inSubnets {
		t.Errorf("instance in subnet %s, not one the node class resolved", awssdk.ToString(inst.SubnetId))
	}
	lts, err := clients.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil || len(lts.LaunchTemplates) == 0 || !strings.HasPrefix(awssdk.ToString(lts.LaunchTemplates[0].LaunchTemplateName), "karpenter.k8s.aws/") {
		t.Errorf("launch templates %+v (%v)", lts, err)
	}
	// The user data's size is reported before base64, as EC2 limits it.
	version, err := clients.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: awssdk.String(onlyLaunchTemplate(t, clients, nc.Name))})
	if err != nil || len(version.LaunchTemplateVersions) == 0 {
		t.Fatalf("the instance's launch template: %+v (%v)", version, err)
	}
	raw, err := base64.StdEncoding.DecodeString(awssdk.ToString(version.LaunchTemplateVersions[0].LaunchTemplateData.UserData))
	if err != nil || len(raw) == 0 || userData[nc.Name] != len(raw) {
		t.Errorf("user data reported for %s: %v; the launch template's is %d bytes (%v)", nc.Name, userData, len(raw), err)
	}

	spot, err := p.Create(ctx, claimFor(nc.Name, in(karpv1.LabelInstanceType, "m5.large", "c5.large")))
	if err != nil || spot.Labels[karpv1.CapacityTypeLabelKey] != "spot" {
		t.Errorf("with spot allowed: %v (%v)", spot.Labels, err)
	}

	if g, err := p.Get(ctx, got.Status.ProviderID); err != nil || g.Name != claim.Name || g.Labels[karpv1.LabelInstanceType] != "c5.large" {
		t.Errorf("Get: %+v (%v)", g, err)
	}
	list, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, c := range list {
		listed[c.Status.ProviderID] = true
	}
	if !listed[got.Status.ProviderID] || !listed[spot.Status.ProviderID] {
		t.Errorf("List %v misses the instances launched", listed)
	}

	got.Spec.NodeClassRef = claim.Spec.NodeClassRef
	if got.Annotations[aws.NodeClassHashAnnotation] != aws.NodeClassHash(nc) {
		t.Errorf("launched NodeClaim's node class hash %q, want %q", got.Annotations[aws.NodeClassHashAnnotation], aws.NodeClassHash(nc))
	}
	if reason, err := p.IsDrifted(ctx, got); err != nil || reason != "" {
		t.Errorf("drift before any change: %q (%v)", reason, err)
	}
	// A launch-time setting changed (tags): the node class drifted.
	nc.Spec.Tags = map[string]string{"team": "data"}
	if err := kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if reason, err := p.IsDrifted(ctx, got); err != nil || reason != aws.NodeClassDrift {
		t.Errorf("drift after the tags changed: %q (%v)", reason, err)
	}
	nc.Spec.Tags = map[string]string{"team": "platform"}
	if err := kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.AMIs = []awsv1.AMI{{ID: "ami-0newrelease", Requirements: nc.Status.AMIs[0].Requirements}}
	if err := kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if reason, err := p.IsDrifted(ctx, got); err != nil || reason != aws.AMIDrift {
		t.Errorf("drift after a new AMI: %q (%v)", reason, err)
	}

	if err := p.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, got.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Get after Delete: %v", err)
	}
	if err := p.Delete(ctx, got); !cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Errorf("Delete again: %v", err)
	}
	if _, err := p.Create(ctx, claimFor(nc.Name, in(karpv1.LabelInstanceType, "no-such.type"))); !cloudprovider.IsInsufficientCapacityError(err) {
		t.Errorf("nothing compatible: %v", err)
	}
	// The node class's launch templates deleted (it is being deleted): its series goes.
	if err := p.Resolver.DeleteLaunchTemplates(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if _, ok := userData[nc.Name]; ok {
		t.Errorf("user data of %s still reported after its launch templates were deleted", nc.Name)
	}
}

// onlyLaunchTemplate is the name of the one launch template made for a node class.
func onlyLaunchTemplate(t *testing.T, clients *aws.Clients, nodeClass string) string {
	t.Helper()
	out, err := clients.EC2.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: awssdk.String("tag:" + aws.TagNodeClass), Values: []string{nodeClass}}}})
	if err != nil || len(out.LaunchTemplates) != 1 {
		t.Fatalf("launch templates of %s: %+v (%v); want one", nodeClass, out, err)
	}
	return awssdk.ToString(out.LaunchTemplates[0].LaunchTemplateName)
}

// TestLaunchThroughFaults puts a fault-injecting proxy between the provider and the emulator:
// CreateFleet with no capacity for the cheapest type marks its offerings unavailable and
// fails as insufficient capacity, and the retry launches the next type; throttling and 5xx
// answers are retried by the SDK.
func TestLaunchThroughFaults(t *testing.T) {
	e := emulator
	ctx := context.Background()
	faults := awsemu.NewFaults(t, e)
	s := aws.Settings{ClusterName: "local", ClusterEndpoint: "https://10.0.0.1:6443", Region: e.Region, Endpoint: faults.URL, KubernetesVersion: "1.37"}
	clients, err := aws.NewClients(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	r := &aws.Resolver{Clients: clients, Settings: s}
	nc := readyNodeClass(t, r, "faults-02")
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).Build()
	pricing := aws.NewPricing(clients, true)
	p := aws.NewProvider(kube, s, clients, aws.NewInstanceTypes(clients, pricing, time.Hour), pricing)
	var mu sync.Mutex
	var failures []string
	batches := map[string]int{}
	p.Observe = aws.Observer{
		LaunchFailure: func(zone, zoneID, capacityType, reason string) {
			mu.Lock()
			defer mu.Unlock()
			failures = append(failures, strings.Join([]string{zone, zoneID, capacityType, reason}, "/"))
		},
		Batch: func(name string, size int, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			batches[name] += size
		},
	}
	onDemand := in(karpv1.CapacityTypeLabelKey, "on-demand")

	// Partial results: EC2 launches the next type and reports the cheapest without capacity.
	faults.NoCapacity("c5.large", "c5.xlarge")
	got, err := p.Create(ctx, claimFor(nc.Name, in(karpv1.LabelInstanceType, "c5.large", "m5.large"), onDemand))
	if err != nil || got.Labels[karpv1.LabelInstanceType] != "m5.large" {
		t.Fatalf("with no c5.large capacity: %v (%v); want m5.large", got.Labels, err)
	}
	types, err := p.GetInstanceTypes(ctx, &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{NodeClassRef: claimFor(nc.Name).Spec.NodeClassRef}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range byName(types)["c5.large"].Offerings {
		if o.CapacityType == karpv1.CapacityTypeOnDemand && o.Available {
			t.Errorf("c5.large on-demand in %s still available after InsufficientInstanceCapacity", o.Zone)
		}
	}
	if _, err := p.Create(ctx, claimFor(nc.Name, in(karpv1.LabelInstanceType, "c5.large"), onDemand)); !cloudprovider.IsInsufficientCapacityError(err) {
		t.Errorf("c5.large only, its offerings unavailable: %v", err)
	}
	// Nothing launched: every override without capacity.
	_, err = p.Create(ctx, claimFor(nc.Name, in(karpv1.LabelInstanceType, "c5.xlarge"), onDemand))
	if !cloudprovider.IsInsufficientCapacityError(err) || !strings.Contains(err.Error(), "c5.xlarge in us-west-2a: InsufficientInstanceCapacity") {
		t.Fatalf("want insufficient capacity naming c5.xlarge, got %v", err)
	}
	// Each offering without capacity counts as a launch failure, in its zone and zone ID, as
	// upstream's karpenter_cloudprovider_instance_launch_failures_total; each CreateFleet
	// went out as a batch of one.
	mu.Lock()
	zoneIDs := map[string]string{}
	for _, sn := range nc.Status.Subnets {
		zoneIDs[sn.Zone] = sn.ZoneID
	}
	if len(failures) == 0 || zoneIDs["us-west-2a"] == "" {
		t.Errorf("launch failures observed: %v (zone IDs %v)", failures, zoneIDs)
	}
	for _, f := range failures {
		parts := strings.Split(f, "/")
		if parts[1] != zoneIDs[parts[0]] || parts[2] != "on-demand" || parts[3] != "LaunchFailed" {
			t.Errorf("launch failure %s: want the zone's ID, on-demand, LaunchFailed (insufficient capacity)", f)
		}
	}
	if batches["create_fleet"] != 2 {
		t.Errorf("batches observed %v; want the two CreateFleets (the c5.large-only launch had no offering left to ask for) in create_fleet", batches)
	}
	mu.Unlock()

	faults.Throttle("DescribeInstances", 2)
	before := faults.Calls("DescribeInstances")
	if _, err := p.Get(ctx, got.Status.ProviderID); err != nil {
		t.Fatalf("Get through two throttled answers: %v", err)
	}
	if n := faults.Calls("DescribeInstances") - before; n != 3 {
		t.Errorf("DescribeInstances reached EC2 %d times; want 3 (two throttled, one answered)", n)
	}
	// A termination that fails through the SDK's retries is reported with the instance's
	// zone, as upstream's karpenter_cloudprovider_instance_termination_failures_total; the
	// next Delete goes through.
	var terminations []string
	p.Observe.TerminationFailure = func(zone, zoneID string) {
		mu.Lock()
		defer mu.Unlock()
		terminations = append(terminations, zone+"/"+zoneID)
	}
	faults.Fail("TerminateInstances", 10)
	if err := p.Delete(ctx, got); err == nil || cloudprovider.IsNodeClaimNotFoundError(err) {
		t.Fatalf("Delete through ten 500s: %v; want the error", err)
	}
	faults.Fail("TerminateInstances", 0)
	zone := got.Labels[karpv1.LabelTopologyZone]
	mu.Lock()
	if len(terminations) != 1 || terminations[0] != zone+"/"+zoneIDs[zone] {
		t.Errorf("termination failures observed: %v; want one in %s/%s", terminations, zone, zoneIDs[zone])
	}
	mu.Unlock()
	faults.Fail("TerminateInstances", 1)
	if err := p.Delete(ctx, got); err != nil {
		t.Fatalf("Delete through a 500: %v", err)
	}
	if len(terminations) > 1 {
		t.Errorf("a termination through one retried 500 was reported as failed: %v", terminations)
	}
}
