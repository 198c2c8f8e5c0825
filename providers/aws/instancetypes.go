package aws

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// Capacity and overhead rules, as upstream's AWS provider computes them (docs/aws.md,
// "Instance types"): what a node of a type can allocate to pods once the hypervisor, the
// kubelet, the system and eviction thresholds have taken theirs.
const (
	// gravitonCMAMiB is memory a Graviton (arm64) instance reserves for its contiguous memory
	// allocator, which the OS cannot give to pods.
	gravitonCMAMiB = 64
	// rootVolume is the ephemeral storage of a node without block device mappings.
	rootVolume = "20Gi"
)

// InstanceTypes reads EC2's instance types and the zones they are offered in, caches them for
// TTL, and describes them for a node class with their offerings and prices.
type InstanceTypes struct {
	clients *Clients
	pricing *Pricing
	TTL     time.Duration
	// Capacity are the settings types are described with; set before the first List.
	Capacity Capacity
	// ReservedCapacity adds the node classes' capacity reservations as reserved offerings
	// (upstream's ReservedCapacity feature gate); set before the first List.
	ReservedCapacity bool

	mu        sync.Mutex
	fetched   time.Time
	infos     []ec2types.InstanceTypeInfo
	zonesOf   map[string]map[string]bool // instance type -> zones it is offered in
	unavailMu sync.Mutex
	unavail   map[string]time.Time // "type/zone/capacity type" -> until
	// unavailGen moves when an offering is marked unavailable.
	unavailGen uint64

	// memo holds each node class's instance types before its capacity reservations are added,
	// by memoKey, until the first unavailable offering in them becomes available again.
	memoMu sync.Mutex
	memo   map[string]memoEntry
}

type memoEntry struct {
	types []*cloudprovider.InstanceType
	until time.Time
}

// NewInstanceTypes builds the provider of instance types; ttl is how long EC2's answer is kept.
func NewInstanceTypes(c *Clients, p *Pricing, ttl time.Duration) *InstanceTypes {
	return &InstanceTypes{clients: c, pricing: p, TTL: ttl, Capacity: DefaultCapacity, ReservedCapacity: true, unavail: map[string]time.Time{}, memo: map[string]memoEntry{}}
}

// UnavailableFor is how long an offering that ran out of capacity is left out.
var UnavailableFor = 3 * time.Minute

// MarkUnavailable leaves an offering out for UnavailableFor (InsufficientInstanceCapacity,
// a Spot interruption).
func (p *InstanceTypes) MarkUnavailable(instanceType, zone, capacityType string) {
	p.unavailMu.Lock()
	defer p.unavailMu.Unlock()
	p.unavail[instanceType+"/"+zone+"/"+capacityType] = time.Now().Add(UnavailableFor)
	p.unavailGen++
}

// reservationKey marks a capacity reservation in the unavailable offerings, by its ID.
const reservationKey = "reservation"

// MarkReservationUnavailable leaves a capacity reservation's offerings out for
// UnavailableFor. The reserved offerings are added afresh on each List, so the memo stands.
func (p *InstanceTypes) MarkReservationUnavailable(id string) {
	p.unavailMu.Lock()
	defer p.unavailMu.Unlock()
	p.unavail[reservationKey+"/"+id+"/"] = time.Now().Add(UnavailableFor)
}

// availability is the generation of the offerings' availability, and when the first offering
// marked unavailable becomes available again (zero: none is marked).
func (p *InstanceTypes) availability() (uint64, time.Time) {
	p.unavailMu.Lock()
	defer p.unavailMu.Unlock()
	var next time.Time
	now := time.Now()
	for _, until := range p.unavail {
		if until.After(now) && (next.IsZero() || until.Before(next)) {
			next = until
		}
	}
	return p.unavailGen, next
}

func (p *InstanceTypes) unavailable(instanceType, zone, capacityType string) bool {
	p.unavailMu.Lock()
	defer p.unavailMu.Unlock()
	key := instanceType + "/" + zone + "/" + capacityType
	until, ok := p.unavail[key]
	if ok && time.Now().After(until) {
		delete(p.unavail, key)
		return false
	}
	return ok
}

// refresh reads instance types and offerings from EC2 when the cache is older than TTL.
func (p *InstanceTypes) refresh(ctx context.Context) ([]ec2types.InstanceTypeInfo, map[string]map[string]bool, time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.fetched.IsZero() && time.Since(p.fetched) < p.TTL {
		return p.infos, p.zonesOf, p.fetched, nil
	}
	var infos []ec2types.InstanceTypeInfo
	pages := ec2.NewDescribeInstanceTypesPaginator(p.clients.EC2, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		{Name: aws.String("supported-virtualization-type"), Values: []string{"hvm"}},
		{Name: aws.String("processor-info.supported-architecture"), Values: []string{"x86_64", "arm64"}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("describing instance types: %w", err)
		}
		infos = append(infos, page.InstanceTypes...)
	}
	zonesOf := map[string]map[string]bool{}
	offerings := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.clients.EC2, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	for offerings.HasMorePages() {
		page, err := offerings.NextPage(ctx)
		if err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			t := string(o.InstanceType)
			if zonesOf[t] == nil {
				zonesOf[t] = map[string]bool{}
			}
			zonesOf[t][aws.ToString(o.Location)] = true
		}
	}
	p.infos, p.zonesOf, p.fetched = infos, zonesOf, time.Now()
	return infos, zonesOf, p.fetched, nil
}

// Invalidate drops the cache, so the next call reads EC2 again.
func (p *InstanceTypes) Invalidate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fetched = time.Time{}
}

// List describes the instance types a node class can launch: in the zones of its subnets,
// with its kubelet settings taken into the overhead, on-demand and spot where priced, and its
// capacity reservations as reserved offerings. reservationRoom says how many more instances
// a reservation can take.
//
// The description is memoized per node class (name and resourceVersion) and generation of
// what it is made from: the instance types described, the on-demand and spot prices, and the
// offerings' availability; only the reserved offerings, whose room changes with every launch,
// are added afresh. Callers share the lists and must not modify them.
func (p *InstanceTypes) List(ctx context.Context, nc *awsv1.EC2NodeClass, reservationRoom func(id string) int) ([]*cloudprovider.InstanceType, error) {
	base, err := p.described(ctx, nc)
	if err != nil {
		return nil, err
	}
	reserved := map[string]bool{}
	if !p.ReservedCapacity {
		return base, nil
	}
	for _, r := range nc.Status.CapacityReservations {
		reserved[r.InstanceType] = true
	}
	if len(reserved) == 0 {
		return base, nil
	}
	out := make([]*cloudprovider.InstanceType, len(base))
	for i, it := range base {
		out[i] = it
		if reserved[it.Name] {
			cp := *it
			cp.Offerings = ReservedOfferings(it, nc.Status.CapacityReservations, reservationRoom)
			out[i] = &cp
		}
	}
	return out, nil
}

// described are the node class's instance types without reserved offerings, from the memo
// when nothing they are made from changed.
func (p *InstanceTypes) described(ctx context.Context, nc *awsv1.EC2NodeClass) ([]*cloudprovider.InstanceType, error) {
	infos, zonesOf, fetched, err := p.refresh(ctx)
	if err != nil {
		return nil, err
	}
	p.pricing.SpotKnown(ctx)
	od, spot := p.pricing.Updated()
	gen, until := p.availability()
	key := fmt.Sprintf("%s/%s/%d/%d/%d/%d", nc.Name, nc.ResourceVersion, fetched.UnixNano(), od.UnixNano(), spot.UnixNano(), gen)
	if nc.ResourceVersion != "" {
		p.memoMu.Lock()
		e, ok := p.memo[key]
		p.memoMu.Unlock()
		if ok && (e.until.IsZero() || time.Now().Before(e.until)) {
			return e.types, nil
		}
	}
	subnetZones := map[string]bool{}
	for _, s := range nc.Status.Subnets {
		subnetZones[s.Zone] = true
	}
	kubelet, err := nc.Spec.Kubelet.Decode()
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: spec.kubelet: %w", nc.Name, err)
	}
	out := make([]*cloudprovider.InstanceType, 0, len(infos))
	for i := range infos {
		info := &infos[i]
		it := p.Capacity.Describe(info, kubelet)
		it.Labels[karpv1.LabelTopologyRegion] = p.clients.Region
		for zone := range zonesOf[it.Name] {
			if !subnetZones[zone] {
				continue
			}
			if od, ok := p.pricing.OnDemand(it.Name); ok && usage(info, "on-demand") {
				it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: zone, CapacityType: karpv1.CapacityTypeOnDemand, Price: od,
					Available: !p.unavailable(it.Name, zone, karpv1.CapacityTypeOnDemand)})
			}
			if sp, ok := p.pricing.Spot(it.Name, zone); ok && usage(info, "spot") {
				it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: zone, CapacityType: karpv1.CapacityTypeSpot, Price: sp,
					Available: !p.unavailable(it.Name, zone, karpv1.CapacityTypeSpot)})
			}
		}
		if len(it.Offerings) == 0 {
			continue
		}
		sortOfferings(it.Offerings)
		out = append(out, it)
	}
	if nc.ResourceVersion != "" {
		p.memoMu.Lock()
		// One entry per node class: an older generation's is dropped.
		for k := range p.memo {
			if strings.HasPrefix(k, nc.Name+"/") {
				delete(p.memo, k)
			}
		}
		p.memo[key] = memoEntry{types: out, until: until}
		p.memoMu.Unlock()
	}
	return out, nil
}

func usage(info *ec2types.InstanceTypeInfo, class string) bool {
	for _, u := range info.SupportedUsageClasses {
		if string(u) == class {
			return true
		}
	}
	return false
}

// sortOfferings orders offerings by zone, then capacity type.
func sortOfferings(o cloudprovider.Offerings) {
	slices.SortFunc(o, func(a, b cloudprovider.Offering) int {
		return cmp.Or(strings.Compare(a.Zone, b.Zone), strings.Compare(a.CapacityType, b.CapacityType))
	})
}

var familyParts = regexp.MustCompile(`^([a-z]+)([0-9]+)`)

// Capacity are the settings that change what a node of a type can hold, as upstream's
// VM_MEMORY_OVERHEAD_PERCENT and RESERVED_ENIS.
type Capacity struct {
	// VMMemoryOverheadPercent of a type's memory is not visible to the OS.
	VMMemoryOverheadPercent float64
	// ReservedENIs are ENIs kept from the VPC CNI's pods when maxPods is computed.
	ReservedENIs int
}

// DefaultCapacity is upstream's default: 7.5% of memory to the hypervisor, no ENI reserved.
var DefaultCapacity = Capacity{VMMemoryOverheadPercent: 0.075}

// Describe is an instance type as Karpenter describes it with DefaultCapacity.
func Describe(info *ec2types.InstanceTypeInfo, kubelet *kubeletconfigv1beta1.KubeletConfiguration) *cloudprovider.InstanceType {
	return DefaultCapacity.Describe(info, kubelet)
}

// Describe is an instance type as Karpenter describes it: its well-known labels, its
// capacity, and the overhead its kubelet settings take (kubelet may be empty).
func (c Capacity) Describe(info *ec2types.InstanceTypeInfo, kubelet *kubeletconfigv1beta1.KubeletConfiguration) *cloudprovider.InstanceType {
	name := string(info.InstanceType)
	family, size, _ := strings.Cut(name, ".")
	arch := "amd64"
	if info.ProcessorInfo != nil {
		for _, a := range info.ProcessorInfo.SupportedArchitectures {
			if a == ec2types.ArchitectureTypeArm64 {
				arch = "arm64"
			}
		}
	}
	vcpu := int64(aws.ToInt32(info.VCpuInfo.DefaultVCpus))
	memMiB := aws.ToInt64(info.MemoryInfo.SizeInMiB)
	labels := map[string]string{
		karpv1.LabelInstanceType: name, karpv1.LabelArch: arch, karpv1.LabelOS: "linux",
		karpv1.LabelInstanceFamily: family, karpv1.LabelInstanceSize: size,
		karpv1.LabelInstanceCPU: strconv.FormatInt(vcpu, 10), karpv1.LabelInstanceMemory: strconv.FormatInt(memMiB, 10),
		karpv1.LabelInstanceHypervisor:     string(info.Hypervisor),
		karpv1.LabelInstanceCapabilityFlex: strconv.FormatBool(strings.Contains(family, "flex")),
	}
	if m := familyParts.FindStringSubmatch(family); m != nil {
		labels[karpv1.LabelInstanceCategory], labels[karpv1.LabelInstanceGeneration] = m[1], m[2]
	}
	if pi := info.ProcessorInfo; pi != nil {
		if pi.Manufacturer != nil {
			labels[karpv1.LabelInstanceCPUManufacturer] = strings.ToLower(aws.ToString(pi.Manufacturer))
		}
		if pi.SustainedClockSpeedInGhz != nil {
			labels[karpv1.LabelInstanceCPUSustainedClockSpeedMhz] = strconv.Itoa(int(math.Round(*pi.SustainedClockSpeedInGhz * 1000)))
		}
	}
	if ebs := info.EbsInfo; ebs != nil && ebs.EbsOptimizedInfo != nil {
		labels[karpv1.LabelInstanceEBSBandwidth] = strconv.Itoa(int(aws.ToInt32(ebs.EbsOptimizedInfo.MaximumBandwidthInMbps)))
	}
	if n := info.NetworkInfo; n != nil {
		labels[karpv1.LabelInstanceEncryptionInTransitSupported] = strconv.FormatBool(aws.ToBool(n.EncryptionInTransitSupported))
		if len(n.NetworkCards) > 0 && n.NetworkCards[0].BaselineBandwidthInGbps != nil {
			labels[karpv1.LabelInstanceNetworkBandwidth] = strconv.Itoa(int(math.Round(*n.NetworkCards[0].BaselineBandwidthInGbps * 1000)))
		}
	}
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && s.TotalSizeInGB != nil {
		labels[karpv1.LabelInstanceLocalNVME] = strconv.FormatInt(*s.TotalSizeInGB, 10)
	}
	visible := memMiB
	if arch == "arm64" {
		visible -= gravitonCMAMiB
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(vcpu, resource.DecimalSI),
		corev1.ResourceMemory:           resource.MustParse(fmt.Sprintf("%dMi", visible-int64(math.Ceil(float64(visible)*c.VMMemoryOverheadPercent)))),
		corev1.ResourceEphemeralStorage: resource.MustParse(rootVolume),
	}
	if g := info.GpuInfo; g != nil && len(g.Gpus) > 0 {
		gpu := g.Gpus[0]
		count := int64(0)
		for _, x := range g.Gpus {
			count += int64(aws.ToInt32(x.Count))
		}
		labels[karpv1.LabelInstanceGPUName] = strings.ToLower(aws.ToString(gpu.Name))
		labels[karpv1.LabelInstanceGPUManufacturer] = strings.ToLower(aws.ToString(gpu.Manufacturer))
		labels[karpv1.LabelInstanceGPUCount] = strconv.FormatInt(count, 10)
		if gpu.MemoryInfo != nil {
			labels[karpv1.LabelInstanceGPUMemory] = strconv.Itoa(int(aws.ToInt32(gpu.MemoryInfo.SizeInMiB)))
		}
		switch strings.ToLower(aws.ToString(gpu.Manufacturer)) {
		case "nvidia":
			capacity["nvidia.com/gpu"] = *resource.NewQuantity(count, resource.DecimalSI)
		case "amd":
			capacity["amd.com/gpu"] = *resource.NewQuantity(count, resource.DecimalSI)
		}
	}
	if n := info.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		// AWS Inferentia and Trainium, as upstream labels them: the Neuron device plugin
		// registers aws.amazon.com/neuron, one per device.
		count := int64(0)
		for _, d := range n.NeuronDevices {
			count += int64(aws.ToInt32(d.Count))
		}
		labels[karpv1.LabelInstanceAcceleratorName] = strings.ToLower(aws.ToString(n.NeuronDevices[0].Name))
		labels[karpv1.LabelInstanceAcceleratorManufacturer] = "aws"
		labels[karpv1.LabelInstanceAcceleratorCount] = strconv.FormatInt(count, 10)
		capacity["aws.amazon.com/neuron"] = *resource.NewQuantity(count, resource.DecimalSI)
	}
	pods := maxPods(info, vcpu, kubelet, c.ReservedENIs)
	capacity[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	return &cloudprovider.InstanceType{Name: name, Labels: labels, Capacity: capacity, Overhead: overhead(vcpu, pods, capacity, kubelet)}
}

// maxPods is the kubelet's maxPods: the node class's, else what the ENIs of the type's default
// network card, less reservedENIs, can address (ENIs x (IPv4 addresses per ENI - 1) + 2; the
// VPC CNI uses only that card), capped by podsPerCore x vCPUs when set.
func maxPods(info *ec2types.InstanceTypeInfo, vcpu int64, kubelet *kubeletconfigv1beta1.KubeletConfiguration, reservedENIs int) int64 {
	var pods int64 = 110
	if n := info.NetworkInfo; n != nil && n.Ipv4AddressesPerInterface != nil {
		enis := aws.ToInt32(n.MaximumNetworkInterfaces)
		if i := int(aws.ToInt32(n.DefaultNetworkCardIndex)); i < len(n.NetworkCards) && n.NetworkCards[i].MaximumNetworkInterfaces != nil {
			enis = *n.NetworkCards[i].MaximumNetworkInterfaces
		}
		if enis -= int32(min(reservedENIs, int(enis))); enis > 0 {
			pods = int64(enis)*(int64(*n.Ipv4AddressesPerInterface)-1) + 2
		}
	}
	if kubelet != nil && kubelet.MaxPods > 0 {
		pods = int64(kubelet.MaxPods)
	}
	if kubelet != nil && kubelet.PodsPerCore > 0 {
		pods = min(pods, int64(kubelet.PodsPerCore)*vcpu)
	}
	return pods
}

// overhead is kube-reserved (the node class's, else EKS's formula: a share of each core,
// 11Mi per pod + 255Mi, 1Gi of disk), system-reserved (the node class's), and the hard
// eviction thresholds (the node class's, else 100Mi of memory and 10% of the disk).
func overhead(vcpu, pods int64, capacity corev1.ResourceList, kubelet *kubeletconfigv1beta1.KubeletConfiguration) corev1.ResourceList {
	cpuMilli := vcpu * 1000
	reservedCPU := 0.0
	for _, r := range []struct {
		start, end int64
		share      float64
	}{{0, 1000, 0.06}, {1000, 2000, 0.01}, {2000, 4000, 0.005}, {4000, math.MaxInt64, 0.0025}} {
		if cpuMilli > r.start {
			reservedCPU += float64(min(cpuMilli, r.end)-r.start) * r.share
		}
	}
	kube := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(int64(reservedCPU), resource.DecimalSI),
		corev1.ResourceMemory:           resource.MustParse(fmt.Sprintf("%dMi", 11*pods+255)),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
	eviction := map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}
	var system map[string]string
	if kubelet != nil {
		for k, v := range kubelet.KubeReserved {
			if q, err := resource.ParseQuantity(v); err == nil {
				kube[corev1.ResourceName(k)] = q
			}
		}
		system = kubelet.SystemReserved
		if len(kubelet.EvictionHard) > 0 {
			eviction = kubelet.EvictionHard
		}
	}
	out := corev1.ResourceList{}
	add := func(name corev1.ResourceName, q resource.Quantity) {
		cur := out[name]
		cur.Add(q)
		out[name] = cur
	}
	for k, q := range kube {
		add(k, q)
	}
	for k, v := range system {
		if q, err := resource.ParseQuantity(v); err == nil {
			add(corev1.ResourceName(k), q)
		}
	}
	for signal, name := range map[string]corev1.ResourceName{"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage} {
		v, ok := eviction[signal]
		if !ok {
			continue
		}
		if pct, isPct := strings.CutSuffix(v, "%"); isPct {
			f, err := strconv.ParseFloat(pct, 64)
			if c, has := capacity[name]; err == nil && has {
				add(name, *resource.NewQuantity(int64(math.Ceil(float64(c.Value())*f/100)), resource.BinarySI))
			}
		} else if q, err := resource.ParseQuantity(v); err == nil {
			add(name, q)
		}
	}
	return out
}
