package cloudprovider

import (
	"fmt"
	"strconv"
	"strings"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// PricedOfferingAnnotation is on every NodeClaim the solver made (a batch's or a disruption
// replacement's): the offering it priced the NodeClaim at, as PricedOffering.String writes
// it. A provider launches that offering first, and the cluster state prices the NodeClaim by
// it until it launches (docs/architecture.md, "One price rule").
const PricedOfferingAnnotation = "karpenter.sh/priced-offering"

// LaunchDeviationAnnotation is what a provider sets on a NodeClaim it launched as another
// offering than the priced one: why (the priced offering had no capacity, was gone from the
// catalog, or the cloud's allocation chose another).
const LaunchDeviationAnnotation = "karpenter.sh/launch-deviation"

// PricedOffering is an instance type in one offering, at the price the solver saw.
type PricedOffering struct {
	InstanceType  string
	Zone          string
	CapacityType  string
	ReservationID string
	Price         float64
}

// Priced is an instance type's offering as a PricedOffering.
func Priced(instanceType string, o Offering) PricedOffering {
	return PricedOffering{InstanceType: instanceType, Zone: o.Zone, CapacityType: o.CapacityType, ReservationID: o.ReservationID, Price: o.Price}
}

// String is "TYPE/ZONE/CAPACITY-TYPE[/RESERVATION]@PRICE", the annotation's value.
func (p PricedOffering) String() string {
	s := p.InstanceType + "/" + p.Zone + "/" + p.CapacityType
	if p.ReservationID != "" {
		s += "/" + p.ReservationID
	}
	return s + "@" + strconv.FormatFloat(p.Price, 'f', -1, 64)
}

// Is reports whether o of instanceType is this offering (the price aside: it may have moved).
func (p PricedOffering) Is(instanceType string, o Offering) bool {
	return p.InstanceType == instanceType && p.Zone == o.Zone && p.CapacityType == o.CapacityType && p.ReservationID == o.ReservationID
}

// ParsePricedOffering reads the annotation's value.
func ParsePricedOffering(s string) (PricedOffering, error) {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return PricedOffering{}, fmt.Errorf("%s %q: want TYPE/ZONE/CAPACITY-TYPE[/RESERVATION]@PRICE", PricedOfferingAnnotation, s)
	}
	price, err := strconv.ParseFloat(s[at+1:], 64)
	if err != nil || price < 0 {
		return PricedOffering{}, fmt.Errorf("%s %q: the price %q is not a non-negative number", PricedOfferingAnnotation, s, s[at+1:])
	}
	parts := strings.Split(s[:at], "/")
	if len(parts) < 3 || len(parts) > 4 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return PricedOffering{}, fmt.Errorf("%s %q: want TYPE/ZONE/CAPACITY-TYPE[/RESERVATION]@PRICE", PricedOfferingAnnotation, s)
	}
	p := PricedOffering{InstanceType: parts[0], Zone: parts[1], CapacityType: parts[2], Price: price}
	if len(parts) == 4 {
		p.ReservationID = parts[3]
	}
	return p, nil
}

// PricedOfferingOf is the NodeClaim's priced offering, if it has a valid one.
func PricedOfferingOf(nc *karpv1.NodeClaim) (PricedOffering, bool) {
	v, ok := nc.Annotations[PricedOfferingAnnotation]
	if !ok {
		return PricedOffering{}, false
	}
	p, err := ParsePricedOffering(v)
	return p, err == nil
}
