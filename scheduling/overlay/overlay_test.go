package overlay

import (
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

func smallCatalog() []*cloudprovider.InstanceType {
	mk := func(name, family, cpu string, od, spot float64) *cloudprovider.InstanceType {
		return &cloudprovider.InstanceType{Name: name,
			Labels:   map[string]string{"karpenter.k8s.aws/instance-family": family, "karpenter.k8s.aws/instance-cpu": cpu, corev1.LabelArchStable: "amd64"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			Offerings: cloudprovider.Offerings{
				{Zone: "zone-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: od, Available: true},
				{Zone: "zone-b", CapacityType: karpv1.CapacityTypeOnDemand, Price: od, Available: true},
				{Zone: "zone-a", CapacityType: karpv1.CapacityTypeSpot, Price: spot, Available: true},
			}}
	}
	return []*cloudprovider.InstanceType{mk("m5.large", "m5", "2", 0.096, 0.04), mk("c5.xlarge", "c5", "4", 0.17, 0.07), mk("r5.2xlarge", "r5", "8", 0.504, 0.2)}
}

func pool(name string, labels map[string]string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = labels
	return np
}

type ov struct {
	name, price, adjustment string
	weight                  int32
	reqs                    []karpv1alpha1.NodeSelectorRequirement
	capacity                corev1.ResourceList
}

func (o ov) object() *karpv1alpha1.NodeOverlay {
	no := &karpv1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: o.name}}
	no.Spec.Requirements, no.Spec.Capacity = o.reqs, o.capacity
	if o.price != "" {
		no.Spec.Price = &o.price
	}
	if o.adjustment != "" {
		no.Spec.PriceAdjustment = &o.adjustment
	}
	if o.weight != 0 {
		no.Spec.Weight = &o.weight
	}
	return no
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1alpha1.NodeSelectorRequirement {
	return karpv1alpha1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func typeNamed(its []*cloudprovider.InstanceType, name string) *cloudprovider.InstanceType {
	for _, it := range its {
		if it.Name == name {
			return it
		}
	}
	return nil
}

// prices lists an instance type's offering prices in catalog order (zone-a od, zone-b od,
// zone-a spot), rounded to a tenth of a cent's hundredth.
func prices(it *cloudprovider.InstanceType) []float64 {
	var out []float64
	for _, o := range it.Offerings {
		out = append(out, math.Round(o.Price*1e5)/1e5)
	}
	return out
}

func TestApplyRules(t *testing.T) {
	gpu := corev1.ResourceName("example.com/gpu")
	tests := []struct {
		name     string
		overlays []ov
		pool     *karpv1.NodePool
		// want are the prices of each named type after the overlays; a type not named keeps
		// its catalog prices.
		want         map[string][]float64
		wantCapacity map[string]corev1.ResourceList
		problems     map[string]string
	}{
		{name: "a percentage lowers the selected type only",
			overlays: []ov{{name: "sp", adjustment: "-30%", reqs: []karpv1alpha1.NodeSelectorRequirement{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "c5.xlarge")}}},
			want:     map[string][]float64{"c5.xlarge": {0.119, 0.119, 0.049}}},
		{name: "a percentage raises",
			overlays: []ov{{name: "up", adjustment: "+10%", reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")}}},
			want:     map[string][]float64{"m5.large": {0.1056, 0.1056, 0.044}}},
		{name: "an amount is added, and a price never goes below zero",
			overlays: []ov{{name: "minus", adjustment: "-0.05", reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")}}},
			want:     map[string][]float64{"m5.large": {0.046, 0.046, 0}}},
		{name: "-100% makes it free",
			overlays: []ov{{name: "free", adjustment: "-100%", reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "r5")}}},
			want:     map[string][]float64{"r5.2xlarge": {0, 0, 0}}},
		{name: "a price replaces",
			overlays: []ov{{name: "ri", price: "0.05", reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "r5")}}},
			want:     map[string][]float64{"r5.2xlarge": {0.05, 0.05, 0.05}}},
		{name: "zone and capacity type select offerings, not the whole type",
			overlays: []ov{{name: "odb", adjustment: "-50%", reqs: []karpv1alpha1.NodeSelectorRequirement{
				req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"), req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "zone-b")}}},
			want: map[string][]float64{"m5.large": {0.096, 0.048, 0.04}, "c5.xlarge": {0.17, 0.085, 0.07}, "r5.2xlarge": {0.504, 0.252, 0.2}}},
		{name: "Gt on an integer label",
			overlays: []ov{{name: "big", price: "1", reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpGt, "2")}}},
			want:     map[string][]float64{"c5.xlarge": {1, 1, 1}, "r5.2xlarge": {1, 1, 1}}},
		{name: "the NodePool's name and template labels select",
			pool: pool("gpu-pool", map[string]string{"team": "ml"}),
			overlays: []ov{
				{name: "by-pool", price: "2", reqs: []karpv1alpha1.NodeSelectorRequirement{req(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "gpu-pool"), req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")}},
				{name: "by-label", price: "3", reqs: []karpv1alpha1.NodeSelectorRequirement{req("team", corev1.NodeSelectorOpIn, "ml"), req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "c5")}},
				{name: "other-pool", price: "4", reqs: []karpv1alpha1.NodeSelectorRequirement{req(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "default")}}},
			want: map[string][]float64{"m5.large": {2, 2, 2}, "c5.xlarge": {3, 3, 3}}},
		{name: "a label no node carries matches only NotIn and DoesNotExist",
			overlays: []ov{
				{name: "absent-in", price: "5", reqs: []karpv1alpha1.NodeSelectorRequirement{req("nothing", corev1.NodeSelectorOpIn, "x")}},
				{name: "absent-notin", adjustment: "+1", weight: 2, reqs: []karpv1alpha1.NodeSelectorRequirement{req("nothing", corev1.NodeSelectorOpNotIn, "x"), req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")}}},
			want: map[string][]float64{"m5.large": {1.096, 1.096, 1.04}}},
		{name: "the higher weight wins an offering; the lower applies where the higher does not",
			overlays: []ov{
				{name: "a-low", adjustment: "-10%", weight: 1},
				{name: "z-high", price: "0.01", weight: 50, reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")}}},
			want: map[string][]float64{"m5.large": {0.01, 0.01, 0.01}, "c5.xlarge": {0.153, 0.153, 0.063}, "r5.2xlarge": {0.4536, 0.4536, 0.18}}},
		{name: "same weight on the same offering: the name that sorts last applies, the other not at all",
			overlays: []ov{
				{name: "alpha", price: "9", weight: 5},
				{name: "beta", price: "0.5", weight: 5, reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")}}},
			want:     map[string][]float64{"m5.large": {0.5, 0.5, 0.5}},
			problems: map[string]string{"alpha": ReasonConflict}},
		{name: "same weight on different offerings does not conflict",
			overlays: []ov{
				{name: "alpha", price: "9", weight: 5, reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "c5")}},
				{name: "beta", price: "0.5", weight: 5, reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")}}},
			want: map[string][]float64{"m5.large": {0.5, 0.5, 0.5}, "c5.xlarge": {9, 9, 9}}},
		{name: "capacity adds extended resources; the higher weight wins a resource",
			overlays: []ov{
				{name: "low", weight: 1, capacity: corev1.ResourceList{gpu: resource.MustParse("1"), "example.com/fpga": resource.MustParse("2")}},
				{name: "high", weight: 9, capacity: corev1.ResourceList{gpu: resource.MustParse("4")}, reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "r5")}}},
			wantCapacity: map[string]corev1.ResourceList{
				"m5.large":   {corev1.ResourceCPU: resource.MustParse("2"), gpu: resource.MustParse("1"), "example.com/fpga": resource.MustParse("2")},
				"r5.2xlarge": {corev1.ResourceCPU: resource.MustParse("8"), gpu: resource.MustParse("4"), "example.com/fpga": resource.MustParse("2")}}},
		{name: "capacity of the same resource at the same weight conflicts",
			overlays: []ov{
				{name: "one", capacity: corev1.ResourceList{gpu: resource.MustParse("1")}},
				{name: "two", capacity: corev1.ResourceList{gpu: resource.MustParse("2")}}},
			wantCapacity: map[string]corev1.ResourceList{"m5.large": {corev1.ResourceCPU: resource.MustParse("2"), gpu: resource.MustParse("2")}},
			problems:     map[string]string{"one": ReasonConflict}},
		{name: "cpu cannot be overlaid, and an invalid overlay is not applied",
			overlays: []ov{
				{name: "cpu", capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}},
				{name: "gt", price: "1", reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-cpu", corev1.NodeSelectorOpGt, "two")}},
				{name: "both", price: "1", adjustment: "+1"}},
			problems: map[string]string{"cpu": ReasonRuntimeValidation, "gt": ReasonRuntimeValidation, "both": ReasonRuntimeValidation}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := tc.pool
			if np == nil {
				np = pool("default", nil)
			}
			its := smallCatalog()
			var objs []*karpv1alpha1.NodeOverlay
			for _, o := range tc.overlays {
				objs = append(objs, o.object())
			}
			set := Resolve(objs, []Pool{{NodePool: np, InstanceTypes: its}})
			got := set.Apply(np, its)
			for _, orig := range smallCatalog() {
				it := typeNamed(got, orig.Name)
				want, changed := tc.want[orig.Name]
				if !changed {
					want = prices(orig)
				}
				if g := prices(it); !slicesEqual(g, want) {
					t.Errorf("%s prices = %v, want %v", orig.Name, g, want)
				}
				if it.PriceOverlaid != changed {
					t.Errorf("%s PriceOverlaid = %v, want %v", orig.Name, it.PriceOverlaid, changed)
				}
				if wc, ok := tc.wantCapacity[orig.Name]; ok {
					if !it.CapacityOverlaid || len(it.Capacity) != len(wc) {
						t.Errorf("%s capacity = %v (overlaid %v), want %v", orig.Name, it.Capacity, it.CapacityOverlaid, wc)
					}
					for name, q := range wc {
						if g := it.Capacity[name]; g.Cmp(q) != 0 {
							t.Errorf("%s capacity %s = %s, want %s", orig.Name, name, g.String(), q.String())
						}
					}
				}
			}
			// The catalog given is never changed.
			for i, orig := range smallCatalog() {
				if !slicesEqual(prices(its[i]), prices(orig)) || len(its[i].Capacity) != 1 || its[i].PriceOverlaid || its[i].CapacityOverlaid {
					t.Errorf("Apply changed its input %s", orig.Name)
				}
			}
			if len(set.Problems) != len(tc.problems) {
				t.Errorf("problems = %v, want reasons %v", set.Problems, tc.problems)
			}
			for name, reason := range tc.problems {
				if p := set.Problems[name]; p.Reason != reason || p.Message == "" {
					t.Errorf("problem of %s = %+v, want reason %s", name, p, reason)
				}
			}
		})
	}
}

func TestApplyWithoutMatchReturnsTheSameSlice(t *testing.T) {
	its := smallCatalog()
	np := pool("default", nil)
	o := ov{name: "none", price: "1", reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "p5")}}.object()
	if got := Resolve([]*karpv1alpha1.NodeOverlay{o}, nil).Apply(np, its); &got[0] != &its[0] {
		t.Error("an overlay that matches nothing copied the instance types")
	}
}

func TestConflictIsAcrossPools(t *testing.T) {
	// alpha and beta (same weight) both price m5 in pool "b" only: alpha conflicts there, and
	// so is not applied in pool "a" either.
	a, b := pool("a", nil), pool("b", map[string]string{"tier": "b"})
	objs := []*karpv1alpha1.NodeOverlay{
		ov{name: "alpha", price: "1", weight: 3, reqs: []karpv1alpha1.NodeSelectorRequirement{req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpIn, "m5")}}.object(),
		ov{name: "beta", price: "2", weight: 3, reqs: []karpv1alpha1.NodeSelectorRequirement{req("tier", corev1.NodeSelectorOpIn, "b")}}.object(),
	}
	set := Resolve(objs, []Pool{{NodePool: a, InstanceTypes: smallCatalog()}, {NodePool: b, InstanceTypes: smallCatalog()}})
	if p := set.Problems["alpha"]; p.Reason != ReasonConflict || !strings.Contains(p.Message, "NodePool b") {
		t.Fatalf("alpha's problem = %+v, want a conflict in NodePool b", p)
	}
	if got := typeNamed(set.Apply(a, smallCatalog()), "m5.large"); got.PriceOverlaid {
		t.Errorf("the conflicting overlay was applied in pool a: %v", prices(got))
	}
}

func TestAdjustmentParsing(t *testing.T) {
	for s, want := range map[string]float64{"+10%": 1.1, "-25%": 0.75, "+0.5": 1.5, "-0.25": 0.75, "-2": 0, "-100%": 0} {
		f, err := Adjustment(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if g := f(1); math.Abs(g-want) > 1e-9 {
			t.Errorf("%s of 1 = %v, want %v", s, g, want)
		}
	}
	for _, s := range []string{"10%", "", "-101%", "+x", "1.5"} {
		if _, err := Adjustment(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func slicesEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

func TestMemoReusesUntilASpecChanges(t *testing.T) {
	its := smallCatalog()
	np := pool("default", nil)
	np.Generation = 1
	o := ov{name: "sp", adjustment: "-50%"}.object()
	o.Generation, o.UID = 1, "u1"
	var m Memo
	_, first := m.Apply([]*karpv1alpha1.NodeOverlay{o}, []Pool{{NodePool: np, InstanceTypes: its}})
	np.ResourceVersion = "999" // a status write
	if _, again := m.Apply([]*karpv1alpha1.NodeOverlay{o}, []Pool{{NodePool: np, InstanceTypes: its}}); &again["default"][0] != &first["default"][0] {
		t.Error("a status write resolved the overlays again")
	}
	changed := o.DeepCopy()
	changed.Generation, changed.Spec.PriceAdjustment = 2, ptrTo("+100%")
	_, second := m.Apply([]*karpv1alpha1.NodeOverlay{changed}, []Pool{{NodePool: np, InstanceTypes: its}})
	if got := second["default"][0].Offerings[0].Price; math.Abs(got-2*its[0].Offerings[0].Price) > 1e-9 {
		t.Errorf("after the spec changed: price %v, want double %v", got, its[0].Offerings[0].Price)
	}
}

func ptrTo(s string) *string { return &s }
