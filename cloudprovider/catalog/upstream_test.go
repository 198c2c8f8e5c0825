package catalog

import (
	"testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// The upstream kwok catalog has upstream's 288 generated types, with its names, labels,
// capacity after kube-reserved, and prices.
func TestUpstreamKWOK(t *testing.T) {
	types := UpstreamKWOK().ForProvider()
	if len(types) != 12*3*2*2 {
		t.Fatalf("%d types, want 288", len(types))
	}
	byName := map[string]int{}
	for i, it := range types {
		byName[it.Name] = i
	}
	i, ok := byName["c-16x-amd64-linux"]
	if !ok {
		t.Fatal("no c-16x-amd64-linux")
	}
	it := types[i]
	for k, want := range map[string]string{karpv1.LabelInstanceType: "c-16x-amd64-linux", karpv1.LabelArch: "amd64", karpv1.LabelOS: "linux",
		KWOKLabelInstanceFamily: "c", KWOKLabelInstanceSize: "16", KWOKLabelInstanceCPU: "16", KWOKLabelInstanceMemory: "32Gi"} {
		if it.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, it.Labels[k], want)
		}
	}
	if cpu, mem, pods := it.Capacity.Cpu().MilliValue(), it.Capacity.Memory().Value(), it.Capacity.Pods().Value(); cpu != 15900 || mem != (32*1024-10)<<20 || pods != 256 {
		t.Errorf("capacity: %dm CPU, %d bytes, %d pods", cpu, mem, pods)
	}
	// 16 x $0.025 + 32 GiB x $0.001/GB, and spot at 70%, in each of the four zones.
	want := 0.4 + 0.001*32*1.073741824
	od, spot := 0, 0
	for _, o := range it.Offerings {
		switch {
		case o.CapacityType == karpv1.CapacityTypeOnDemand && abs(o.Price-want) < 1e-9:
			od++
		case o.CapacityType == karpv1.CapacityTypeSpot && abs(o.Price-0.7*want) < 1e-9:
			spot++
		default:
			t.Errorf("offering %+v", o)
		}
	}
	if od != 4 || spot != 4 {
		t.Errorf("%d on-demand and %d spot offerings, want 4 and 4", od, spot)
	}
	if it := types[byName["m-256x-arm64-windows"]]; it.Capacity.Pods().Value() != 1024 || it.Labels[KWOKLabelInstanceMemory] != "2048Gi" {
		t.Errorf("m-256x-arm64-windows: %v pods, %s", it.Capacity.Pods(), it.Labels[KWOKLabelInstanceMemory])
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
