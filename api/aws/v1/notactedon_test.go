package v1

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

// Each field accepted but not acted on is named, with its path; a class that sets none has
// nothing to warn about.
func TestFieldsNotActedOn(t *testing.T) {
	if got := (&EC2NodeClass{}).FieldsNotActedOn(); len(got) != 0 {
		t.Fatalf("an empty class: %v", got)
	}
	rate := ptr.To[int32](150)
	nc := &EC2NodeClass{Spec: EC2NodeClassSpec{
		PlacementGroupSelector:   &PlacementGroupSelector{Name: ptr.To("pg")},
		IPPrefixCount:            ptr.To[int32](1),
		NetworkInterfaces:        []*NetworkInterface{{}},
		InstanceStorePolicy:      ptr.To(InstanceStorePolicyRAID0),
		AssociatePublicIPAddress: ptr.To(false),
		ConnectionTracking:       &ConnectionTracking{},
		Context:                  ptr.To("ctx"),
		CPUOptions:               &CPUOptions{},
		BlockDeviceMappings:      []*BlockDeviceMapping{{}, {EBS: &BlockDevice{VolumeInitializationRate: rate}}},
		AMIFamily:                ptr.To(AMIFamilyWindows2022),
		AMISelectorTerms:         []AMISelectorTerm{{Alias: "al2023@latest"}, {Alias: "windows2022@latest"}},
	}}
	var fields []string
	for _, e := range nc.FieldsNotActedOn() {
		if !strings.HasPrefix(e.Detail, "accepted but not acted on yet: ") {
			t.Errorf("%s: %q does not say it is not acted on", e.Field, e.Detail)
		}
		fields = append(fields, e.Field)
	}
	want := "spec.placementGroupSelector spec.ipPrefixCount spec.networkInterfaces spec.instanceStorePolicy spec.associatePublicIPAddress " +
		"spec.connectionTracking spec.context spec.cpuOptions spec.blockDeviceMappings[1].ebs.volumeInitializationRate spec.amiFamily spec.amiSelectorTerms[1].alias"
	if got := strings.Join(fields, " "); got != want {
		t.Errorf("fields:\n got %s\nwant %s", got, want)
	}
}
