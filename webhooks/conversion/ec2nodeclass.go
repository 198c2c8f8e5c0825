package conversion

import (
	"context"
	"strings"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
)

// AMI families that v1 selects by alias (family@version) instead of by amiFamily.
var aliasFamilies = map[string]string{
	"AL2": "al2", "AL2023": "al2023", "Bottlerocket": "bottlerocket", "Windows2019": "windows2019", "Windows2022": "windows2022",
}

// familyForAlias is the amiFamily an alias's family stands for.
func familyForAlias(alias string) string {
	prefix, _, _ := strings.Cut(alias, "@")
	for family, p := range aliasFamilies {
		if p == prefix {
			return family
		}
	}
	return "Custom"
}

type v1beta1AMISelection struct {
	AMIFamily        *string                      `json:"amiFamily,omitempty"`
	AMISelectorTerms []awsv1beta1.AMISelectorTerm `json:"amiSelectorTerms"`
}

type v1AMISelection struct {
	AMIFamily        *string                 `json:"amiFamily,omitempty"`
	AMISelectorTerms []awsv1.AMISelectorTerm `json:"amiSelectorTerms"`
}

// amiSelectionToV1: a family without selector terms becomes the alias family@latest; Ubuntu,
// which v1 dropped, is served as AL2 (same bootstrap), and the v1beta1 form is stashed.
func amiSelectionToV1(s v1beta1AMISelection) v1AMISelection {
	if s.AMIFamily != nil && len(s.AMISelectorTerms) == 0 {
		if prefix, ok := aliasFamilies[*s.AMIFamily]; ok {
			return v1AMISelection{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: prefix + "@latest"}}}
		}
	}
	out := v1AMISelection{AMIFamily: s.AMIFamily}
	if s.AMIFamily != nil && *s.AMIFamily == "Ubuntu" {
		al2 := "AL2"
		out.AMIFamily = &al2
	}
	out.AMISelectorTerms = mapSlice(s.AMISelectorTerms, func(t awsv1beta1.AMISelectorTerm) awsv1.AMISelectorTerm {
		return awsv1.AMISelectorTerm{Tags: t.Tags, ID: t.ID, Name: t.Name, Owner: t.Owner}
	})
	return out
}

// amiSelectionToV1beta1: an alias becomes its family with no selector terms; v1beta1 cannot
// pin a version or read an SSM parameter, so those are stashed by the caller's check.
func amiSelectionToV1beta1(s v1AMISelection) v1beta1AMISelection {
	if len(s.AMISelectorTerms) == 1 && s.AMISelectorTerms[0].Alias != "" {
		family := familyForAlias(s.AMISelectorTerms[0].Alias)
		if s.AMIFamily != nil {
			family = *s.AMIFamily
		}
		return v1beta1AMISelection{AMIFamily: &family}
	}
	out := v1beta1AMISelection{AMIFamily: s.AMIFamily}
	out.AMISelectorTerms = mapSlice(s.AMISelectorTerms, func(t awsv1.AMISelectorTerm) awsv1beta1.AMISelectorTerm {
		return awsv1beta1.AMISelectorTerm{Tags: t.Tags, ID: t.ID, Name: t.Name, Owner: t.Owner}
	})
	return out
}

// EC2NodeClassToV1 converts a v1beta1 EC2NodeClass to v1.
func (c *Converter) EC2NodeClassToV1(_ context.Context, src *awsv1beta1.EC2NodeClass, dst *awsv1.EC2NodeClass) error {
	ann := copyAnnotations(src.Annotations)
	dst.TypeMeta = src.TypeMeta
	dst.APIVersion = awsv1.SchemeGroupVersion.String()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()

	in := src.Spec.DeepCopy()
	out := awsv1.EC2NodeClassSpec{
		UserData: in.UserData, Role: in.Role, InstanceProfile: in.InstanceProfile, Tags: in.Tags,
		InstanceStorePolicy: (*awsv1.InstanceStorePolicy)(in.InstanceStorePolicy), DetailedMonitoring: in.DetailedMonitoring,
		AssociatePublicIPAddress: in.AssociatePublicIPAddress, Context: in.Context,
	}
	out.SubnetSelectorTerms = mapSlice(in.SubnetSelectorTerms, func(t awsv1beta1.SubnetSelectorTerm) awsv1.SubnetSelectorTerm { return awsv1.SubnetSelectorTerm(t) })
	out.SecurityGroupSelectorTerms = mapSlice(in.SecurityGroupSelectorTerms, func(t awsv1beta1.SecurityGroupSelectorTerm) awsv1.SecurityGroupSelectorTerm {
		return awsv1.SecurityGroupSelectorTerm(t)
	})
	out.BlockDeviceMappings = mapSlice(in.BlockDeviceMappings, func(m *awsv1beta1.BlockDeviceMapping) *awsv1.BlockDeviceMapping { return m2v1(m) })
	if in.MetadataOptions != nil {
		out.MetadataOptions = (*awsv1.MetadataOptions)(in.MetadataOptions)
	}
	ami := piece(v1beta1AMISelection{in.AMIFamily, in.AMISelectorTerms}, ann, AnnotationV1AMISelection, AnnotationV1beta1AMISelection, amiSelectionToV1, amiSelectionToV1beta1)
	out.AMIFamily, out.AMISelectorTerms = ami.AMIFamily, ami.AMISelectorTerms
	out.Kubelet = piece(nothing{}, ann, AnnotationV1Kubelet, "", zero[awsv1.KubeletConfiguration], toNothing[awsv1.KubeletConfiguration])
	piece(nothing{}, ann, AnnotationV1EC2NodeClassFields, "", zero[v1OnlyEC2], toNothing[v1OnlyEC2]).applyTo(&out)
	dst.Spec = out

	dst.Status = awsv1.EC2NodeClassStatus{InstanceProfile: src.Status.InstanceProfile, ObservedGeneration: src.Status.ObservedGeneration, Conditions: src.Status.Conditions}
	dst.Status.Subnets = mapSlice(src.Status.Subnets, func(s awsv1beta1.Subnet) awsv1.Subnet { return awsv1.Subnet(s) })
	dst.Status.SecurityGroups = mapSlice(src.Status.SecurityGroups, func(s awsv1beta1.SecurityGroup) awsv1.SecurityGroup { return awsv1.SecurityGroup(s) })
	dst.Status.AMIs = mapSlice(src.Status.AMIs, func(a awsv1beta1.AMI) awsv1.AMI { return awsv1.AMI(a) })
	dst.Status = *dst.Status.DeepCopy()
	dst.Annotations = ann.result(src.Annotations)
	return nil
}

// EC2NodeClassToV1beta1 converts a v1 EC2NodeClass to v1beta1.
func (c *Converter) EC2NodeClassToV1beta1(_ context.Context, src *awsv1.EC2NodeClass, dst *awsv1beta1.EC2NodeClass) error {
	ann := copyAnnotations(src.Annotations)
	dst.TypeMeta = src.TypeMeta
	dst.APIVersion = awsv1beta1.SchemeGroupVersion.String()
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()

	in := src.Spec.DeepCopy()
	out := awsv1beta1.EC2NodeClassSpec{
		UserData: in.UserData, Role: in.Role, InstanceProfile: in.InstanceProfile, Tags: in.Tags,
		InstanceStorePolicy: (*awsv1beta1.InstanceStorePolicy)(in.InstanceStorePolicy), DetailedMonitoring: in.DetailedMonitoring,
		AssociatePublicIPAddress: in.AssociatePublicIPAddress, Context: in.Context,
	}
	out.SubnetSelectorTerms = mapSlice(in.SubnetSelectorTerms, func(t awsv1.SubnetSelectorTerm) awsv1beta1.SubnetSelectorTerm {
		return awsv1beta1.SubnetSelectorTerm(t)
	})
	out.SecurityGroupSelectorTerms = mapSlice(in.SecurityGroupSelectorTerms, func(t awsv1.SecurityGroupSelectorTerm) awsv1beta1.SecurityGroupSelectorTerm {
		return awsv1beta1.SecurityGroupSelectorTerm(t)
	})
	out.BlockDeviceMappings = mapSlice(in.BlockDeviceMappings, func(m *awsv1.BlockDeviceMapping) *awsv1beta1.BlockDeviceMapping { return m2v1beta1(m) })
	if in.MetadataOptions != nil {
		out.MetadataOptions = (*awsv1beta1.MetadataOptions)(in.MetadataOptions)
	}
	ami := piece(v1AMISelection{in.AMIFamily, in.AMISelectorTerms}, ann, AnnotationV1beta1AMISelection, AnnotationV1AMISelection, amiSelectionToV1beta1, amiSelectionToV1)
	out.AMIFamily, out.AMISelectorTerms = ami.AMIFamily, ami.AMISelectorTerms
	piece(in.Kubelet, ann, "", AnnotationV1Kubelet, toNothing[awsv1.KubeletConfiguration], zero[awsv1.KubeletConfiguration])
	piece(v1OnlyOf(in), ann, "", AnnotationV1EC2NodeClassFields, toNothing[v1OnlyEC2], zero[v1OnlyEC2])
	dst.Spec = out

	dst.Status = awsv1beta1.EC2NodeClassStatus{InstanceProfile: src.Status.InstanceProfile, ObservedGeneration: src.Status.ObservedGeneration, Conditions: src.Status.Conditions}
	dst.Status.Subnets = mapSlice(src.Status.Subnets, func(s awsv1.Subnet) awsv1beta1.Subnet { return awsv1beta1.Subnet(s) })
	dst.Status.SecurityGroups = mapSlice(src.Status.SecurityGroups, func(s awsv1.SecurityGroup) awsv1beta1.SecurityGroup { return awsv1beta1.SecurityGroup(s) })
	dst.Status.AMIs = mapSlice(src.Status.AMIs, func(a awsv1.AMI) awsv1beta1.AMI { return awsv1beta1.AMI(a) })
	dst.Status = *dst.Status.DeepCopy()
	dst.Annotations = ann.result(src.Annotations)
	return nil
}

func m2v1(m *awsv1beta1.BlockDeviceMapping) *awsv1.BlockDeviceMapping {
	if m == nil {
		return nil
	}
	out := &awsv1.BlockDeviceMapping{DeviceName: m.DeviceName, RootVolume: m.RootVolume}
	if e := m.EBS; e != nil {
		out.EBS = &awsv1.BlockDevice{DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS, KMSKeyID: e.KMSKeyID,
			SnapshotID: e.SnapshotID, Throughput: e.Throughput, VolumeSize: e.VolumeSize, VolumeType: e.VolumeType}
	}
	return out
}

// m2v1beta1 maps a block device mapping; v1beta1 has no volumeInitializationRate (v1Only
// keeps it).
func m2v1beta1(m *awsv1.BlockDeviceMapping) *awsv1beta1.BlockDeviceMapping {
	if m == nil {
		return nil
	}
	out := &awsv1beta1.BlockDeviceMapping{DeviceName: m.DeviceName, RootVolume: m.RootVolume}
	if e := m.EBS; e != nil {
		out.EBS = &awsv1beta1.BlockDevice{DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS, KMSKeyID: e.KMSKeyID,
			SnapshotID: e.SnapshotID, Throughput: e.Throughput, VolumeSize: e.VolumeSize, VolumeType: e.VolumeType}
	}
	return out
}

// v1OnlyEC2 are the v1 EC2NodeClass fields v1beta1 does not have.
type v1OnlyEC2 struct {
	CapacityReservationSelectorTerms []awsv1.CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	PlacementGroupSelector           *awsv1.PlacementGroupSelector           `json:"placementGroupSelector,omitempty"`
	IPPrefixCount                    *int32                                  `json:"ipPrefixCount,omitempty"`
	NetworkInterfaces                []*awsv1.NetworkInterface               `json:"networkInterfaces,omitempty"`
	ConnectionTracking               *awsv1.ConnectionTracking               `json:"connectionTracking,omitempty"`
	CPUOptions                       *awsv1.CPUOptions                       `json:"cpuOptions,omitempty"`
	// VolumeInitializationRates are the block device mappings' rates, aligned with them.
	VolumeInitializationRates []*int32 `json:"volumeInitializationRates,omitempty"`
}

func v1OnlyOf(in *awsv1.EC2NodeClassSpec) v1OnlyEC2 {
	out := v1OnlyEC2{CapacityReservationSelectorTerms: in.CapacityReservationSelectorTerms, PlacementGroupSelector: in.PlacementGroupSelector,
		IPPrefixCount: in.IPPrefixCount, NetworkInterfaces: in.NetworkInterfaces, ConnectionTracking: in.ConnectionTracking, CPUOptions: in.CPUOptions}
	for i, m := range in.BlockDeviceMappings {
		if m != nil && m.EBS != nil && m.EBS.VolumeInitializationRate != nil {
			if out.VolumeInitializationRates == nil {
				out.VolumeInitializationRates = make([]*int32, len(in.BlockDeviceMappings))
			}
			out.VolumeInitializationRates[i] = m.EBS.VolumeInitializationRate
		}
	}
	return out
}

func (o v1OnlyEC2) applyTo(out *awsv1.EC2NodeClassSpec) {
	out.CapacityReservationSelectorTerms, out.PlacementGroupSelector, out.IPPrefixCount = o.CapacityReservationSelectorTerms, o.PlacementGroupSelector, o.IPPrefixCount
	out.NetworkInterfaces, out.ConnectionTracking, out.CPUOptions = o.NetworkInterfaces, o.ConnectionTracking, o.CPUOptions
	for i, rate := range o.VolumeInitializationRates {
		if rate != nil && i < len(out.BlockDeviceMappings) && out.BlockDeviceMappings[i] != nil && out.BlockDeviceMappings[i].EBS != nil {
			out.BlockDeviceMappings[i].EBS.VolumeInitializationRate = rate
		}
	}
}

// mapSlice maps a slice, keeping nil apart from empty: the API server stores them differently.
func mapSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
