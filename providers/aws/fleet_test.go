package aws_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/test/awsemu"
)

// faultyProvider is a provider whose every AWS call goes through a fault-injecting proxy
// that records it, with the node class name resolved and Ready.
func faultyProvider(t *testing.T, nodeClass string) (*aws.Provider, *awsemu.Faults, *aws.Clients, string) {
	t.Helper()
	e := emulator
	faults := awsemu.NewFaults(t, e)
	s := aws.Settings{ClusterName: "local", ClusterEndpoint: "https://10.0.0.1:6443", Region: e.Region, Endpoint: faults.URL, KubernetesVersion: "1.37"}
	clients, err := aws.NewClients(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	nc := readyNodeClass(t, &aws.Resolver{Clients: clients, Settings: s}, nodeClass)
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).Build()
	pricing := aws.NewPricing(clients, true)
	return aws.NewProvider(kube, s, clients, aws.NewInstanceTypes(clients, pricing, time.Hour), pricing), faults, clients, nc.Name
}

// overrideTypes are the distinct instance types a CreateFleet form names, and how many
// overrides it has.
func overrideTypes(form url.Values) (types []string, overrides int) {
	seen := map[string]bool{}
	for k, vs := range form {
		if strings.HasPrefix(k, "LaunchTemplateConfigs.") && strings.HasSuffix(k, ".InstanceType") {
			overrides++
			if !seen[vs[0]] {
				seen[vs[0]] = true
				types = append(types, vs[0])
			}
		}
	}
	sort.Strings(types)
	return types, overrides
}

// A NodeClaim any type fits asks CreateFleet for the 60 cheapest types, each in the subnets of
// its zones, with the allocation strategy of its capacity type and the tags of docs/aws.md.
func TestCreateFleetRequest(t *testing.T) {
	ctx := context.Background()
	p, faults, _, nc := faultyProvider(t, "fleet-03")
	if err := p.Pricing.UpdateSpot(ctx); err != nil {
		t.Fatal(err)
	}
	onDemand := claimFor(nc, in(karpv1.CapacityTypeLabelKey, "on-demand"))
	if _, err := p.Create(ctx, onDemand); err != nil {
		t.Fatal(err)
	}
	forms := faults.Requests("CreateFleet")
	if len(forms) != 1 {
		t.Fatalf("%d CreateFleet calls; want 1", len(forms))
	}
	form := forms[0]
	for k, want := range map[string]string{"Type": "instant", "OnDemandOptions.AllocationStrategy": "lowest-price",
		"TargetCapacitySpecification.TotalTargetCapacity": "1", "TargetCapacitySpecification.DefaultTargetCapacityType": "on-demand"} {
		if got := form.Get(k); got != want {
			t.Errorf("CreateFleet %s = %q, want %q", k, got, want)
		}
	}
	if form.Get("ClientToken") == "" {
		t.Error("CreateFleet has no client token")
	}
	types, overrides := overrideTypes(form)
	if len(types) != aws.MaxFleetTypes {
		t.Fatalf("CreateFleet names %d instance types; want the %d cheapest", len(types), aws.MaxFleetTypes)
	}
	if overrides <= len(types) {
		t.Errorf("%d overrides for %d types; want each type in the subnets of each of its zones", overrides, len(types))
	}

	// The 60 cheapest on-demand types that fit the NodeClaim, by the provider's own prices.
	its, err := p.GetInstanceTypes(ctx, &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{NodeClassRef: onDemand.Spec.NodeClassRef}}}})
	if err != nil {
		t.Fatal(err)
	}
	type priced struct {
		name  string
		price float64
	}
	var fit []priced
	for _, it := range its {
		if ok, _ := scheduling.Fits(onDemand.Spec.Resources.Requests, it.Allocatable()); !ok {
			continue
		}
		best := -1.0
		for _, o := range it.Offerings {
			if o.CapacityType == karpv1.CapacityTypeOnDemand && o.Available && (best < 0 || o.Price < best) {
				best = o.Price
			}
		}
		if best >= 0 {
			fit = append(fit, priced{it.Name, best})
		}
	}
	sort.Slice(fit, func(i, j int) bool {
		if fit[i].price != fit[j].price {
			return fit[i].price < fit[j].price
		}
		return fit[i].name < fit[j].name
	})
	var want []string
	for _, f := range fit[:aws.MaxFleetTypes] {
		want = append(want, f.name)
	}
	sort.Strings(want)
	if !slices.Equal(types, want) {
		t.Errorf("CreateFleet types %v\nwant the %d cheapest %v", types, aws.MaxFleetTypes, want)
	}
	resources := map[string]bool{}
	for k, vs := range form {
		if strings.HasPrefix(k, "TagSpecification.") && strings.HasSuffix(k, ".ResourceType") {
			resources[vs[0]] = true
		}
	}
	if !resources["instance"] || !resources["volume"] || !resources["fleet"] {
		t.Errorf("CreateFleet tags %v; want instance, volume and fleet", resources)
	}

	if _, err := p.Create(ctx, claimFor(nc, in(karpv1.LabelInstanceType, "m5.large", "c5.large"))); err != nil {
		t.Fatal(err)
	}
	spot := faults.Requests("CreateFleet")[1]
	if spot.Get("SpotOptions.AllocationStrategy") != "price-capacity-optimized" || spot.Get("TargetCapacitySpecification.DefaultTargetCapacityType") != "spot" {
		t.Errorf("spot CreateFleet: strategy %q, capacity type %q", spot.Get("SpotOptions.AllocationStrategy"), spot.Get("TargetCapacitySpecification.DefaultTargetCapacityType"))
	}
}

// NodeClaims launched together with the same request share one CreateFleet, each gets its own
// instance tagged with its name, and deleting them together is one DescribeInstances and one
// TerminateInstances.
func TestBatchedLaunchAndTermination(t *testing.T) {
	ctx := context.Background()
	p, faults, clients, nc := faultyProvider(t, "batch-04")
	aws.SetBatchWindows(p, time.Second, 10*time.Second)
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{in(karpv1.LabelInstanceType, "c5.large", "m5.large"), in(karpv1.CapacityTypeLabelKey, "on-demand")}
	// The first launch fills the caches (instance types, launch template), so that the
	// five below reach the batch together.
	warm, err := p.Create(ctx, claimFor(nc, reqs...))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	claims := make([]*karpv1.NodeClaim, n)
	errs := make([]error, n)
	before := len(faults.Requests("CreateFleet"))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { claims[i], errs[i] = p.Create(ctx, claimFor(nc, reqs...)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	fleets := faults.Requests("CreateFleet")[before:]
	if len(fleets) != 1 || fleets[0].Get("TargetCapacitySpecification.TotalTargetCapacity") != fmt.Sprint(n) {
		t.Fatalf("%d CreateFleet calls for %d NodeClaims launched together; want one for %d instances", len(fleets), n, n)
	}
	ids := map[string]string{} // instance id -> NodeClaim
	for _, c := range claims {
		id := c.Status.ProviderID[strings.LastIndex(c.Status.ProviderID, "/")+1:]
		if _, dup := ids[id]; dup {
			t.Fatalf("two NodeClaims got instance %s", id)
		}
		ids[id] = c.Name
	}
	out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: slices.Collect(func(yield func(string) bool) {
		for id := range ids {
			if !yield(id) {
				return
			}
		}
	})})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			tags := map[string]string{}
			for _, tag := range i.Tags {
				tags[*tag.Key] = *tag.Value
			}
			if name := ids[*i.InstanceId]; tags["karpenter.sh/nodeclaim"] != name || tags["Name"] != name || tags["karpenter.sh/nodepool"] != "default" || tags["kubernetes.io/cluster/local"] != "owned" {
				t.Errorf("instance %s of NodeClaim %s tagged %v", *i.InstanceId, name, tags)
			}
		}
	}

	describes, terminates := faults.Calls("DescribeInstances"), faults.Calls("TerminateInstances")
	for i := range n {
		wg.Go(func() { errs[i] = p.Delete(ctx, claims[i]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if d, term := faults.Calls("DescribeInstances")-describes, faults.Calls("TerminateInstances")-terminates; d != 1 || term != 1 {
		t.Errorf("deleting %d NodeClaims together: %d DescribeInstances, %d TerminateInstances; want one of each", n, d, term)
	}
	// A batch with an unknown instance: EC2 refuses the call, each is asked alone.
	gone := warm.DeepCopy()
	gone.Status.ProviderID = "aws:///us-west-2a/i-0000000000000dead"
	for i, c := range []*karpv1.NodeClaim{warm, gone} {
		wg.Go(func() { errs[i] = p.Delete(ctx, c) })
	}
	wg.Wait()
	if errs[0] != nil || !cloudprovider.IsNodeClaimNotFoundError(errs[1]) {
		t.Errorf("deleting a live and an unknown instance together: %v, %v; want nil and not found", errs[0], errs[1])
	}
	for _, c := range append(claims, warm) {
		if _, err := p.Get(ctx, c.Status.ProviderID); !cloudprovider.IsNodeClaimNotFoundError(err) {
			t.Errorf("Get %s after Delete: %v", c.Name, err)
		}
	}

	// The node class's finalizer deletes its launch templates; a node class of the same name
	// made again launches from templates made again, not from the provider's memory of them.
	templates := func() int {
		out, err := clients.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
			{Name: awssdk.String("tag:karpenter.k8s.aws/ec2nodeclass"), Values: []string{nc}}}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.LaunchTemplates)
	}
	if templates() == 0 {
		t.Fatal("no launch template is tagged with the node class")
	}
	if err := p.Resolver.DeleteLaunchTemplates(ctx, readyNodeClass(t, p.Resolver, nc)); err != nil {
		t.Fatal(err)
	}
	if n := templates(); n != 0 {
		t.Errorf("%d launch templates of the node class left after DeleteLaunchTemplates", n)
	}
	again, err := p.Create(ctx, claimFor(nc, reqs...))
	if err != nil {
		t.Fatalf("launching after the templates were deleted: %v", err)
	}
	if templates() == 0 {
		t.Error("the launch after the templates were deleted made none")
	}
	if err := p.Delete(ctx, again); err != nil {
		t.Fatal(err)
	}
}
