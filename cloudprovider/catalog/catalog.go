// Package catalog holds instance-type catalogs: the JSON format that `karpenterctl simulate
// --instance-types` and KWOKNodeClass catalog files use, and the embedded catalog of the kwok
// provider, authored here from published EC2 family specifications (vCPU and memory per
// size, GPUs, architecture, us-east-1 on-demand Linux prices). Spot prices in it are synthetic.
package catalog

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// File is a catalog as JSON.
type File struct {
	Source        string         `json:"source,omitempty"`
	Region        string         `json:"region,omitempty"`
	InstanceTypes []InstanceType `json:"instanceTypes"`
}

// InstanceType is one instance type of a catalog file.
type InstanceType struct {
	Name                 string             `json:"name"`
	OnDemandPricePerHour float64            `json:"onDemandPricePerHour"`
	Labels               map[string]string  `json:"labels"`
	Allocatable          map[string]string  `json:"allocatable"`
	Zones                []string           `json:"zones"`
	SpotPricePerHour     map[string]float64 `json:"spotPricePerHourSynthetic,omitempty"`
}

// Load reads a catalog file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &File{}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("%s: not an instance-type catalog: %w", path, err)
	}
	if len(f.InstanceTypes) == 0 {
		return nil, fmt.Errorf("%s: the catalog lists no instanceTypes", path)
	}
	for i, it := range f.InstanceTypes {
		if it.Name == "" {
			return nil, fmt.Errorf("%s: instanceTypes[%d] has no name", path, i)
		}
		if it.OnDemandPricePerHour < 0 {
			return nil, fmt.Errorf("%s: instanceTypes[%d] (%s): onDemandPricePerHour is negative", path, i, it.Name)
		}
		for k, v := range it.Allocatable {
			if _, err := resource.ParseQuantity(v); err != nil {
				return nil, fmt.Errorf("%s: instanceTypes[%d] (%s): allocatable %s: %w", path, i, it.Name, k, err)
			}
		}
	}
	return f, nil
}

// ForProvider turns the catalog into the cloud provider's instance types: the allocatable
// resources become the capacity (the catalog's figures are already after kubelet and system
// overhead), and each zone gives an on-demand offering and a spot one, where priced. A type
// with neither price has no offerings, so it is never chosen.
func (f *File) ForProvider() []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, 0, len(f.InstanceTypes))
	for _, it := range f.InstanceTypes {
		capacity := corev1.ResourceList{}
		for k, v := range it.Allocatable {
			capacity[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		labels := map[string]string{}
		for k, v := range it.Labels {
			labels[k] = v
		}
		labels[karpv1.LabelInstanceType] = it.Name
		var offerings cloudprovider.Offerings
		zones := append([]string(nil), it.Zones...)
		sort.Strings(zones)
		for _, z := range zones {
			// A type without a published on-demand price is listed but cannot be bought on demand.
			if it.OnDemandPricePerHour > 0 {
				offerings = append(offerings, cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: it.OnDemandPricePerHour, Available: true})
			}
			if p, ok := it.SpotPricePerHour[z]; ok && p > 0 {
				offerings = append(offerings, cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: p, Available: true})
			}
		}
		out = append(out, &cloudprovider.InstanceType{Name: it.Name, Labels: labels, Capacity: capacity, Offerings: offerings})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SyntheticSpotPrice is a fixed, realistic-looking spot price for a type in a zone: between
// 30% and 55% of on-demand, spread by a hash of the name and zone. It is not market data.
func SyntheticSpotPrice(name, zone string, onDemand float64) float64 {
	sum := sha256.Sum256([]byte(name + "/" + zone))
	u := float64(binary.BigEndian.Uint32(sum[:4])) / math.Pow(2, 32)
	return math.Round(onDemand*(0.30+0.25*u)*1e6) / 1e6
}
