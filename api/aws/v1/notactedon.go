package v1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ConditionTypeUnsupportedFields is True while the EC2NodeClass sets fields it accepts but
// launches do not use yet (FieldsNotActedOn); it does not make the class unready.
const ConditionTypeUnsupportedFields = "UnsupportedFields"

// FieldsNotActedOn are the fields set that the CRD accepts, as upstream's does, but that
// launches do not use yet (docs/aws.md, "Accepted, not acted on yet"). Each is a warning at
// admission and in `karpenterctl validate`, and the UnsupportedFields condition, until it is
// built: a field is never silently ignored. Detail says what is missing.
func (nc *EC2NodeClass) FieldsNotActedOn() field.ErrorList {
	spec := field.NewPath("spec")
	var out field.ErrorList
	add := func(p *field.Path, missing string) {
		out = append(out, &field.Error{Type: field.ErrorTypeNotSupported, Field: p.String(), BadValue: field.OmitValueType{},
			Detail: "accepted but not acted on yet: " + missing})
	}
	s := nc.Spec
	if s.PlacementGroupSelector != nil {
		add(spec.Child("placementGroupSelector"), "instances are not launched into placement groups")
	}
	if s.IPPrefixCount != nil {
		add(spec.Child("ipPrefixCount"), "no IPv4 prefixes are assigned, and maxPods does not count them")
	}
	if len(s.NetworkInterfaces) > 0 {
		add(spec.Child("networkInterfaces"), "instances get the subnet's default network interface only")
	}
	if s.InstanceStorePolicy != nil {
		add(spec.Child("instanceStorePolicy"), "instance-store disks are not set up as RAID0, and ephemeral storage counts the root volume only")
	}
	if s.AssociatePublicIPAddress != nil {
		add(spec.Child("associatePublicIPAddress"), "the subnet's own setting decides")
	}
	if s.ConnectionTracking != nil {
		add(spec.Child("connectionTracking"), "the network interfaces keep EC2's default timeouts")
	}
	if s.Context != nil {
		add(spec.Child("context"), "EC2 Fleet requests do not carry it")
	}
	if s.CPUOptions != nil {
		add(spec.Child("cpuOptions"), "nested virtualization is not requested, and instance types are not limited to those that support it")
	}
	for i, m := range s.BlockDeviceMappings {
		if m != nil && m.EBS != nil && m.EBS.VolumeInitializationRate != nil {
			add(spec.Child("blockDeviceMappings").Index(i).Child("ebs", "volumeInitializationRate"), "volumes are initialized at EBS's default rate")
		}
	}
	windows := func(family string) bool { return strings.HasPrefix(strings.ToLower(family), "windows") }
	if s.AMIFamily != nil && windows(*s.AMIFamily) {
		add(spec.Child("amiFamily"), "no Windows user data is generated, so Windows nodes do not join")
	}
	for i, t := range s.AMISelectorTerms {
		if windows(t.Alias) {
			add(spec.Child("amiSelectorTerms").Index(i).Child("alias"), "Windows AMIs are not resolved, and no Windows user data is generated")
		}
	}
	return out
}
