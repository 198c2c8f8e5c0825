package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func TestEmbeddedCatalogIsRealistic(t *testing.T) {
	f := Embedded()
	types := f.ForProvider()
	if len(types) < 150 {
		t.Fatalf("the embedded catalog has %d types; it should span families, sizes and GPUs", len(types))
	}
	byName := map[string]int{}
	archs, gpus := map[string]bool{}, 0
	for i, it := range types {
		byName[it.Name] = i
		archs[it.Labels[karpv1.LabelArch]] = true
		if _, ok := it.Capacity["nvidia.com/gpu"]; ok {
			gpus++
		}
		if it.Capacity.Cpu().Sign() <= 0 || it.Capacity.Memory().Sign() <= 0 {
			t.Errorf("%s has no allocatable cpu or memory", it.Name)
		}
		if len(it.Offerings) != 6 {
			t.Errorf("%s: want on-demand and spot in 3 zones, got %d offerings", it.Name, len(it.Offerings))
		}
	}
	if !archs["amd64"] || !archs["arm64"] || gpus < 10 {
		t.Errorf("want amd64, arm64 and GPU types; got archs %v and %d GPU types", archs, gpus)
	}
	m5 := types[byName["m5.large"]]
	if got := m5.Capacity.Cpu().MilliValue(); got != 1930 {
		t.Errorf("m5.large allocatable cpu = %dm, want 1930m", got)
	}
	if got := m5.Capacity.Memory().Value() >> 20; got < 6700 || got > 7000 {
		t.Errorf("m5.large allocatable memory = %dMi, want about 6.9Gi", got)
	}
	if o, _ := m5.Offerings.Cheapest(); o.CapacityType != karpv1.CapacityTypeSpot || o.Price >= 0.096*0.56 || o.Price <= 0.096*0.29 {
		t.Errorf("m5.large cheapest offering %+v: want spot at 30-55%% of $0.096", o)
	}
}

func TestLoadRoundTripsAndRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	b, _ := json.Marshal(Embedded())
	if err := os.WriteFile(good, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(good)
	if err != nil || len(f.InstanceTypes) != len(Embedded().InstanceTypes) {
		t.Fatalf("load: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"instanceTypes":[{"name":"x","onDemandPricePerHour":1,"zones":["a"],"allocatable":{"cpu":"lots"}}]}`), 0o600)
	if _, err := Load(bad); err == nil {
		t.Error("an unparsable quantity must be refused, naming the type")
	}
}
