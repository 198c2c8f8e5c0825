package aws

import (
	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// reservedPriceFactor divides the on-demand price to price a reserved offering: its capacity
// is paid for whether it runs or not, so launching into it costs next to nothing, and the
// solver, which takes the cheapest offering, fills the reservation before anything else. Not
// zero, so that between reservations the bigger type still costs more (upstream's rule,
// docs/architecture.md, "Reserved capacity").
const reservedPriceFactor = 10_000_000.0

// ReservedOfferings adds to an instance type's offerings one of capacity type reserved for
// each reservation of the node class that is for that type, in a zone the type is offered in.
// available says how many more instances a reservation can take (EC2's available instance
// count, less the launches since); an expiring reservation, or one without room, is not
// available. The price is the type's on-demand price in that zone over reservedPriceFactor.
func ReservedOfferings(it *cloudprovider.InstanceType, reservations []awsv1.CapacityReservation, available func(id string) int) cloudprovider.Offerings {
	out := append(cloudprovider.Offerings(nil), it.Offerings...)
	for _, r := range reservations {
		if r.InstanceType != it.Name {
			continue
		}
		od, offered := onDemandPrice(it.Offerings, r.AvailabilityZone)
		if !offered {
			continue
		}
		room := available(r.ID)
		out = append(out, cloudprovider.Offering{
			Zone: r.AvailabilityZone, CapacityType: karpv1.CapacityTypeReserved, Price: od / reservedPriceFactor,
			Available:     room > 0 && r.State != awsv1.CapacityReservationStateExpiring,
			ReservationID: r.ID, ReservationCapacity: room,
		})
	}
	return out
}

// onDemandPrice is the type's on-demand price in the zone, and whether it is sold there.
func onDemandPrice(offerings cloudprovider.Offerings, zone string) (float64, bool) {
	for _, o := range offerings {
		if o.Zone == zone && o.CapacityType == karpv1.CapacityTypeOnDemand {
			return o.Price, true
		}
	}
	return 0, false
}
