package aws_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/providers/aws/pricelist"
	"github.com/karpenter-policy/karpenter/test/awsemu"
)

func providers(t *testing.T, e *awsemu.Emulator) (*aws.Clients, *aws.Pricing, *aws.InstanceTypes) {
	t.Helper()
	c, err := aws.NewClients(context.Background(), aws.Settings{ClusterName: "local", Region: e.Region, Endpoint: e.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	p := aws.NewPricing(c, false)
	return c, p, aws.NewInstanceTypes(c, p, 12*time.Hour)
}

func nodeClassIn(zones ...string) *awsv1.EC2NodeClass {
	nc := discovered("local", nil)
	for _, z := range zones {
		nc.Status.Subnets = append(nc.Status.Subnets, awsv1.Subnet{ID: "subnet-" + z, Zone: z})
	}
	return nc
}

func byName(types []*cloudprovider.InstanceType) map[string]*cloudprovider.InstanceType {
	out := map[string]*cloudprovider.InstanceType{}
	for _, it := range types {
		out[it.Name] = it
	}
	return out
}

func TestInstanceTypesAndOfferings(t *testing.T) {
	e := emulator
	_, pricing, types := providers(t, e)
	ctx := context.Background()
	if err := pricing.UpdateSpot(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := types.List(ctx, nodeClassIn("us-west-2a", "us-west-2b"), func(string) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 500 {
		t.Fatalf("%d instance types; EC2 has over 500 hvm types in us-west-2", len(list))
	}
	m5 := byName(list)["m5.large"]
	if m5 == nil {
		t.Fatal("no m5.large")
	}
	want := map[string]string{karpv1.LabelInstanceFamily: "m5", karpv1.LabelInstanceCategory: "m", karpv1.LabelInstanceGeneration: "5",
		karpv1.LabelInstanceSize: "large", karpv1.LabelInstanceCPU: "2", karpv1.LabelInstanceMemory: "8192", karpv1.LabelArch: "amd64",
		karpv1.LabelInstanceCPUManufacturer: "intel", karpv1.LabelInstanceHypervisor: "nitro", karpv1.LabelInstanceNetworkBandwidth: "750",
		karpv1.LabelTopologyRegion: "us-west-2"}
	for k, v := range want {
		if m5.Labels[k] != v {
			t.Errorf("m5.large %s = %q, want %q", k, m5.Labels[k], v)
		}
	}
	zones, cts := map[string]bool{}, map[string]bool{}
	for _, o := range m5.Offerings {
		zones[o.Zone], cts[o.CapacityType] = true, true
		if o.CapacityType == karpv1.CapacityTypeOnDemand && o.Price != 0.096 {
			t.Errorf("m5.large on-demand at %v, want the built-in table's 0.096", o.Price)
		}
	}
	if len(zones) != 2 || zones["us-west-2c"] || !cts[karpv1.CapacityTypeOnDemand] || !cts[karpv1.CapacityTypeSpot] {
		t.Errorf("m5.large offerings %+v: want on-demand and spot in the node class's two zones only", m5.Offerings)
	}
	if g5 := byName(list)["g5.xlarge"]; g5 == nil || g5.Labels[karpv1.LabelInstanceGPUName] != "a10g" || g5.Capacity.Name("nvidia.com/gpu", resource.DecimalSI).Value() != 1 {
		t.Errorf("g5.xlarge: %+v", g5)
	}

	// Memoized per node class (name and resourceVersion) and generation: the same list again,
	// a new one once an offering is marked unavailable.
	stored := nodeClassIn("us-west-2a", "us-west-2b")
	stored.ResourceVersion = "1"
	first, _ := types.List(ctx, stored, func(string) int { return 0 })
	second, _ := types.List(ctx, stored, func(string) int { return 0 })
	if byName(first)["m5.large"] != byName(second)["m5.large"] {
		t.Error("listed again with nothing changed, the instance types are described again")
	}

	types.MarkUnavailable("m5.large", "us-west-2a", karpv1.CapacityTypeSpot)
	for _, nc := range []*awsv1.EC2NodeClass{nodeClassIn("us-west-2a", "us-west-2b"), stored} {
		again, _ := types.List(ctx, nc, func(string) int { return 0 })
		for _, o := range byName(again)["m5.large"].Offerings {
			if (o.Zone == "us-west-2a" && o.CapacityType == karpv1.CapacityTypeSpot) == o.Available {
				t.Errorf("after MarkUnavailable (resourceVersion %q): %+v", nc.ResourceVersion, o)
			}
		}
	}
	for _, o := range byName(first)["m5.large"].Offerings {
		if !o.Available {
			t.Errorf("a list handed out before MarkUnavailable changed: %+v", o)
		}
	}
	// The node class changes: its new subnets show.
	moved := nodeClassIn("us-west-2c")
	moved.ResourceVersion = "2"
	list, _ = types.List(ctx, moved, func(string) int { return 0 })
	for _, o := range byName(list)["m5.large"].Offerings {
		if o.Zone != "us-west-2c" {
			t.Errorf("a changed node class lists the old zones: %+v", o)
		}
	}
}

// TestAllocatableMatchesTheCatalog compares what the provider computes a node can allocate
// with the repository's catalog of real EKS nodes (testdata/, AL2023, default kubelet).
func TestAllocatableMatchesTheCatalog(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "aws-instance-types.json"))
	if err != nil {
		t.Fatalf("the EC2 catalog in testdata/: %v", err)
	}
	var catalog struct {
		InstanceTypes []struct {
			Name        string            `json:"name"`
			Allocatable map[string]string `json:"allocatable"`
		} `json:"instanceTypes"`
	}
	if err := json.Unmarshal(raw, &catalog); err != nil {
		t.Fatal(err)
	}
	e := emulator
	_, _, types := providers(t, e)
	list, err := types.List(context.Background(), nodeClassIn("us-west-2a"), func(string) int { return 0 })
	if err != nil {
		t.Fatal(err)
	}
	ours := byName(list)
	compared, same := 0, 0
	var examples []string
	for _, c := range catalog.InstanceTypes {
		it := ours[c.Name]
		if it == nil {
			continue
		}
		compared++
		alloc := it.Allocatable()
		match := true
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
			want := resource.MustParse(c.Allocatable[string(r)])
			got := alloc[r]
			if got.Cmp(want) != 0 {
				match = false
				if len(examples) < 8 {
					examples = append(examples, c.Name+" "+string(r)+": "+got.String()+" want "+want.String())
				}
			}
		}
		if match {
			same++
		}
	}
	t.Logf("%d of %d types allocate exactly what the catalog says; e.g. %v", same, compared, examples)
	if compared < 1000 || same != compared {
		t.Fatalf("only %d of %d instance types match the catalog's allocatable: %v", same, compared, examples)
	}
}

func TestPricingFallsBackToTheBuiltInTable(t *testing.T) {
	e := emulator
	c, pricing, _ := providers(t, e)
	ctx := context.Background()
	if od, ok := pricing.OnDemand("m5.large"); !ok || od != 0.096 {
		t.Fatalf("built-in m5.large price %v %v", od, ok)
	}
	// The emulator has no Pricing API (it answers 500): the update fails and the table stays.
	if err := pricing.UpdateOnDemand(ctx); err == nil {
		t.Fatal("UpdateOnDemand against an endpoint with no Pricing API succeeded")
	}
	if od, ok := pricing.OnDemand("m5.large"); !ok || od != 0.096 {
		t.Errorf("after a failed update m5.large is %v %v", od, ok)
	}
	if updated, _ := pricing.Updated(); !updated.IsZero() {
		t.Errorf("on-demand prices marked updated at %v after a failure", updated)
	}
	// An isolated VPC does not call the API at all.
	if err := aws.NewPricing(c, true).UpdateOnDemand(ctx); err != nil {
		t.Errorf("isolated: %v", err)
	}
	if err := pricing.UpdateSpot(ctx); err != nil {
		t.Fatal(err)
	}
	if sp, ok := pricing.Spot("m5.large", "us-west-2a"); !ok || sp <= 0 {
		t.Errorf("spot m5.large in us-west-2a: %v %v", sp, ok)
	}
}

func TestParseOnDemandPrice(t *testing.T) {
	item := `{"product":{"attributes":{"instanceType":"m5.large","operatingSystem":"Linux"}},"terms":{"OnDemand":{"X.JRTCKXETXF":{"priceDimensions":{"X.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":"0.0960000000"}}}}}}}`
	name, price, err := pricelist.ParseOnDemandPrice(item)
	if err != nil || name != "m5.large" || price != 0.096 {
		t.Fatalf("%q %v %v", name, price, err)
	}
	if _, _, err := pricelist.ParseOnDemandPrice(`{"product":`); err == nil {
		t.Error("a truncated entry parsed")
	}
}
