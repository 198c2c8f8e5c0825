package catalog

import (
	"fmt"
	"math"
	"strconv"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// UpstreamKWOKName is the KWOKNodeClass catalog name of UpstreamKWOK.
const UpstreamKWOKName = "upstream"

// The labels upstream's kwok provider describes its generated instance types by
// (sigs.k8s.io/karpenter kwok/apis/v1alpha1).
const (
	KWOKLabelInstanceSize   = "karpenter.kwok.sh/instance-size"
	KWOKLabelInstanceFamily = "karpenter.kwok.sh/instance-family"
	KWOKLabelInstanceCPU    = "karpenter.kwok.sh/instance-cpu"
	KWOKLabelInstanceMemory = "karpenter.kwok.sh/instance-memory"
)

// UpstreamKWOKZones are the zones upstream's kwok provider offers.
var UpstreamKWOKZones = []string{"test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"}

// UpstreamKWOK is the catalog upstream's kwok provider generates, built by the same published
// rules, so that suites written for it run here unchanged (docs/upstream.md): for 1 to 256
// vCPUs, three memory ratios, the families c (2 GiB per vCPU), s (4) and m (8), amd64 and
// arm64, Linux and Windows, named family-<vCPU>x-arch-os (c-16x-amd64-linux). Each has 16
// pods per vCPU (at most 1024), 20Gi of ephemeral storage, and the kube-reserved upstream's
// provider takes (100m of CPU, 10Mi of memory) already subtracted. On-demand costs $0.025 per
// vCPU-hour plus $0.001 per GB (1e9 bytes) of memory; spot 70% of that, in every zone.
func UpstreamKWOK() *File {
	f := &File{Source: "upstream kwok provider (generated)"}
	for _, cpu := range []int{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256} {
		for _, ratio := range []struct {
			family string
			gib    int
		}{{"c", 2}, {"s", 4}, {"m", 8}} {
			for _, os := range []string{"linux", "windows"} {
				for _, arch := range []string{"amd64", "arm64"} {
					mem := cpu * ratio.gib
					price := 0.025*float64(cpu) + 0.001*float64(mem)*math.Pow(2, 30)/1e9
					spot := map[string]float64{}
					for _, z := range UpstreamKWOKZones {
						spot[z] = price * 0.7
					}
					f.InstanceTypes = append(f.InstanceTypes, InstanceType{
						Name:                 fmt.Sprintf("%s-%dx-%s-%s", ratio.family, cpu, arch, os),
						OnDemandPricePerHour: price,
						SpotPricePerHour:     spot,
						Zones:                UpstreamKWOKZones,
						Labels: map[string]string{
							karpv1.LabelArch: arch, karpv1.LabelOS: os,
							KWOKLabelInstanceSize: strconv.Itoa(cpu), KWOKLabelInstanceFamily: ratio.family,
							KWOKLabelInstanceCPU: strconv.Itoa(cpu), KWOKLabelInstanceMemory: fmt.Sprintf("%dGi", mem),
						},
						Allocatable: map[string]string{
							"cpu":               fmt.Sprintf("%dm", cpu*1000-100),
							"memory":            fmt.Sprintf("%dMi", mem*1024-10),
							"pods":              strconv.Itoa(min(cpu*16, 1024)),
							"ephemeral-storage": "20Gi",
						},
					})
				}
			}
		}
	}
	return f
}
