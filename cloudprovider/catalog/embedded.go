package catalog

import (
	"fmt"
	"math"
	"strconv"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// family is an EC2 instance family as its public specification describes it.
type family struct {
	name, arch, manufacturer string
	generation               int
	// gibPerVCPU is memory per vCPU; pricePerVCPU is the us-east-1 on-demand Linux price per
	// vCPU-hour, which EC2 keeps linear across a family's sizes.
	gibPerVCPU, pricePerVCPU float64
	sizes                    []string
	// gpu: name, memory per GPU in MiB, and GPUs per size (by size name).
	gpuName   string
	gpuMemory int
	gpus      map[string]int
	// fixed sizes that do not follow the linear rule (burstable families): vCPU, GiB, $/h.
	fixed map[string][3]float64
}

// vCPUs of the standard sizes.
var sizeVCPU = map[string]int{
	"medium": 1, "large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32, "9xlarge": 36,
	"12xlarge": 48, "16xlarge": 64, "18xlarge": 72, "24xlarge": 96, "32xlarge": 128, "48xlarge": 192,
}

// The families of the embedded catalog: compute (c), general purpose (m), memory (r),
// burstable (t), storage (i) and GPU (g, p), Intel, AMD and Graviton, generations 5 to 7.
var families = []family{
	{name: "c5", arch: "amd64", manufacturer: "intel", generation: 5, gibPerVCPU: 2, pricePerVCPU: 0.0425, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge", "24xlarge"}},
	{name: "c6i", arch: "amd64", manufacturer: "intel", generation: 6, gibPerVCPU: 2, pricePerVCPU: 0.0425, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge"}},
	{name: "c6a", arch: "amd64", manufacturer: "amd", generation: 6, gibPerVCPU: 2, pricePerVCPU: 0.03825, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge", "48xlarge"}},
	{name: "c6g", arch: "arm64", manufacturer: "aws", generation: 6, gibPerVCPU: 2, pricePerVCPU: 0.034, sizes: []string{"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"}},
	{name: "c7i", arch: "amd64", manufacturer: "intel", generation: 7, gibPerVCPU: 2, pricePerVCPU: 0.044625, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"}},
	{name: "c7g", arch: "arm64", manufacturer: "aws", generation: 7, gibPerVCPU: 2, pricePerVCPU: 0.03625, sizes: []string{"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"}},
	{name: "m5", arch: "amd64", manufacturer: "intel", generation: 5, gibPerVCPU: 4, pricePerVCPU: 0.048, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"}},
	{name: "m6i", arch: "amd64", manufacturer: "intel", generation: 6, gibPerVCPU: 4, pricePerVCPU: 0.048, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge"}},
	{name: "m6a", arch: "amd64", manufacturer: "amd", generation: 6, gibPerVCPU: 4, pricePerVCPU: 0.0432, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge", "48xlarge"}},
	{name: "m6g", arch: "arm64", manufacturer: "aws", generation: 6, gibPerVCPU: 4, pricePerVCPU: 0.0385, sizes: []string{"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"}},
	{name: "m7i", arch: "amd64", manufacturer: "intel", generation: 7, gibPerVCPU: 4, pricePerVCPU: 0.0504, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"}},
	{name: "m7g", arch: "arm64", manufacturer: "aws", generation: 7, gibPerVCPU: 4, pricePerVCPU: 0.0408, sizes: []string{"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"}},
	{name: "r5", arch: "amd64", manufacturer: "intel", generation: 5, gibPerVCPU: 8, pricePerVCPU: 0.063, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"}},
	{name: "r6i", arch: "amd64", manufacturer: "intel", generation: 6, gibPerVCPU: 8, pricePerVCPU: 0.063, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge"}},
	{name: "r6g", arch: "arm64", manufacturer: "aws", generation: 6, gibPerVCPU: 8, pricePerVCPU: 0.0504, sizes: []string{"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"}},
	{name: "r7i", arch: "amd64", manufacturer: "intel", generation: 7, gibPerVCPU: 8, pricePerVCPU: 0.06615, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"}},
	{name: "r7g", arch: "arm64", manufacturer: "aws", generation: 7, gibPerVCPU: 8, pricePerVCPU: 0.05355, sizes: []string{"medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"}},
	{name: "i3", arch: "amd64", manufacturer: "intel", generation: 3, gibPerVCPU: 7.625, pricePerVCPU: 0.078, sizes: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"}},
	{name: "t3", arch: "amd64", manufacturer: "intel", generation: 3, sizes: []string{"micro", "small", "medium", "large", "xlarge", "2xlarge"},
		fixed: map[string][3]float64{"micro": {2, 1, 0.0104}, "small": {2, 2, 0.0208}, "medium": {2, 4, 0.0416}, "large": {2, 8, 0.0832}, "xlarge": {4, 16, 0.1664}, "2xlarge": {8, 32, 0.3328}}},
	{name: "t4g", arch: "arm64", manufacturer: "aws", generation: 4, sizes: []string{"micro", "small", "medium", "large", "xlarge", "2xlarge"},
		fixed: map[string][3]float64{"micro": {2, 1, 0.0084}, "small": {2, 2, 0.0168}, "medium": {2, 4, 0.0336}, "large": {2, 8, 0.0672}, "xlarge": {4, 16, 0.1344}, "2xlarge": {8, 32, 0.2688}}},
	{name: "g4dn", arch: "amd64", manufacturer: "intel", generation: 4, gpuName: "t4", gpuMemory: 16384, sizes: []string{"xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"},
		gpus:  map[string]int{"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "16xlarge": 1},
		fixed: map[string][3]float64{"xlarge": {4, 16, 0.526}, "2xlarge": {8, 32, 0.752}, "4xlarge": {16, 64, 1.204}, "8xlarge": {32, 128, 2.176}, "12xlarge": {48, 192, 3.912}, "16xlarge": {64, 256, 4.352}}},
	{name: "g5", arch: "amd64", manufacturer: "amd", generation: 5, gpuName: "a10g", gpuMemory: 24576, sizes: []string{"xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "48xlarge"},
		gpus:  map[string]int{"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "48xlarge": 8},
		fixed: map[string][3]float64{"xlarge": {4, 16, 1.006}, "2xlarge": {8, 32, 1.212}, "4xlarge": {16, 64, 1.624}, "8xlarge": {32, 128, 2.448}, "12xlarge": {48, 192, 5.672}, "48xlarge": {192, 768, 16.288}}},
	{name: "p3", arch: "amd64", manufacturer: "intel", generation: 3, gpuName: "v100", gpuMemory: 16384, sizes: []string{"2xlarge", "8xlarge", "16xlarge"},
		gpus:  map[string]int{"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
		fixed: map[string][3]float64{"2xlarge": {8, 61, 3.06}, "8xlarge": {32, 244, 12.24}, "16xlarge": {64, 488, 24.48}}},
}

// EmbeddedZones are the zones of the embedded catalog.
var EmbeddedZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// Embedded returns the kwok provider's built-in catalog.
func Embedded() *File {
	f := &File{
		Source: "authored from published EC2 family specifications (vCPU, memory, GPUs, architecture) and us-east-1 on-demand Linux prices; " +
			"allocatable is after kubelet, system and eviction overhead as computed in cloudprovider/catalog; spot prices are synthetic (SyntheticSpotPrice)",
		Region: "us-east-1",
	}
	for _, fam := range families {
		for _, size := range fam.sizes {
			vcpu, gib, price := fam.dimensions(size)
			name := fam.name + "." + size
			labels := map[string]string{
				karpv1.LabelInstanceFamily:                    fam.name,
				karpv1.LabelInstanceCategory:                  fam.name[:1],
				karpv1.LabelInstanceGeneration:                strconv.Itoa(fam.generation),
				karpv1.LabelInstanceSize:                      size,
				karpv1.LabelInstanceCPU:                       strconv.Itoa(vcpu),
				karpv1.LabelInstanceMemory:                    strconv.Itoa(int(gib * 1024)),
				karpv1.LabelInstanceHypervisor:                "nitro",
				karpv1.LabelArch:                              fam.arch,
				karpv1.LabelOS:                                "linux",
				"karpenter.k8s.aws/instance-cpu-manufacturer": fam.manufacturer,
			}
			pods := maxPods(vcpu)
			alloc := map[string]string{
				"cpu":               fmt.Sprintf("%dm", vcpu*1000-kubeReservedCPU(vcpu)),
				"memory":            fmt.Sprintf("%dMi", allocatableMemoryMiB(gib, pods)),
				"ephemeral-storage": "17Gi",
				"pods":              strconv.Itoa(pods),
			}
			if n := fam.gpus[size]; n > 0 {
				labels[karpv1.LabelInstanceGPUName] = fam.gpuName
				labels[karpv1.LabelInstanceGPUCount] = strconv.Itoa(n)
				labels[karpv1.LabelInstanceGPUMemory] = strconv.Itoa(fam.gpuMemory)
				labels["karpenter.k8s.aws/instance-gpu-manufacturer"] = "nvidia"
				alloc["nvidia.com/gpu"] = strconv.Itoa(n)
			}
			it := InstanceType{Name: name, OnDemandPricePerHour: price, Labels: labels, Allocatable: alloc,
				Zones: EmbeddedZones, SpotPricePerHour: map[string]float64{}}
			for _, z := range EmbeddedZones {
				it.SpotPricePerHour[z] = SyntheticSpotPrice(name, z, price)
			}
			f.InstanceTypes = append(f.InstanceTypes, it)
		}
	}
	return f
}

func (fam family) dimensions(size string) (vcpu int, gib, price float64) {
	if d, ok := fam.fixed[size]; ok {
		return int(d[0]), d[1], d[2]
	}
	vcpu = sizeVCPU[size]
	return vcpu, float64(vcpu) * fam.gibPerVCPU, math.Round(float64(vcpu)*fam.pricePerVCPU*1e4) / 1e4
}

// maxPods follows the ENI-based limits of common sizes, capped at 110 pods per node above 16
// vCPU as the kubelet recommends for large nodes.
func maxPods(vcpu int) int {
	switch {
	case vcpu <= 1:
		return 8
	case vcpu == 2:
		return 29
	case vcpu <= 8:
		return 58
	default:
		return 110
	}
}

// kubeReservedCPU in millicores: 6% of the first core, 1% of the second, 0.5% of the next two,
// 0.25% of the rest (the formula the EKS AMIs use).
func kubeReservedCPU(vcpu int) int {
	m := 60
	if vcpu >= 2 {
		m += 10
	}
	if vcpu >= 3 {
		m += 5 * min(vcpu-2, 2)
	}
	if vcpu > 4 {
		m += int(2.5 * float64(vcpu-4))
	}
	return m
}

// allocatableMemoryMiB: capacity less the hypervisor's share (7.5%), kube-reserved memory
// (11 MiB per pod + 255 MiB) and the 100 MiB hard eviction threshold.
func allocatableMemoryMiB(gib float64, pods int) int {
	capacity := gib * 1024 * (1 - 0.075)
	return int(capacity) - (11*pods + 255) - 100
}
