package aws_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/iam"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/awsemu"
)

func resolver(t *testing.T, e *awsemu.Emulator, cluster string) *aws.Resolver {
	t.Helper()
	s := aws.Settings{ClusterName: cluster, Region: e.Region, Endpoint: e.Endpoint, KubernetesVersion: "1.37"}
	c, err := aws.NewClients(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return &aws.Resolver{Clients: c, Settings: s}
}

func discovered(cluster string, f func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
	return test.EC2NodeClass(func(nc *awsv1.EC2NodeClass) {
		nc.Name, nc.UID = "default", "6f1c1a8e-0000-4000-8000-000000000001"
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}}
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}}
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
		nc.Spec.Role = "KarpenterNodeRole-" + cluster
		nc.Spec.InstanceProfile = nil
		if f != nil {
			f(nc)
		}
	})
}

func TestResolveADiscoveredNodeClass(t *testing.T) {
	e := emulator
	r := resolver(t, e, "local")
	ctx := context.Background()
	nc := discovered("local", nil)

	subnets, err := r.Subnets(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	var ids, zones []string
	for _, s := range subnets {
		ids, zones = append(ids, s.ID), append(zones, s.Zone)
	}
	sort.Strings(ids)
	sort.Strings(zones)
	want := append([]string(nil), e.Cluster.Subnets...)
	sort.Strings(want)
	if strings.Join(ids, ",") != strings.Join(want, ",") || strings.Join(zones, ",") != "us-west-2a,us-west-2b,us-west-2c" {
		t.Errorf("subnets %v in %v; want %v in three zones", ids, zones, want)
	}

	groups, err := r.SecurityGroups(ctx, nc)
	if err != nil || len(groups) != 1 || groups[0].ID != e.Cluster.SecurityGroup {
		t.Errorf("security groups %v (%v); want [%s]", groups, err, e.Cluster.SecurityGroup)
	}
	byName, err := r.SecurityGroups(ctx, discovered("local", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: "local-nodes"}}
	}))
	if err != nil || len(byName) != 1 || byName[0].ID != e.Cluster.SecurityGroup {
		t.Errorf("security group by name: %v (%v)", byName, err)
	}

	amis, err := r.AMIs(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	// One AMI per architecture and variant; the image for a type follows from its labels.
	got := map[string]string{}
	for _, a := range amis {
		got[a.Requirements[0].Values[0]+"/"+variantOf(a)] = a.Name
		if e.AMIs[a.Name] != a.ID {
			t.Errorf("AMI %s is %s, the emulator published %s", a.Name, a.ID, e.AMIs[a.Name])
		}
	}
	wantAMIs := map[string]string{
		"amd64/standard": "amazon-eks-node-al2023-x86_64-standard-1.37-v20261101", "arm64/standard": "amazon-eks-node-al2023-arm64-standard-1.37-v20261101",
		"amd64/nvidia": "amazon-eks-node-al2023-x86_64-nvidia-1.37-v20261101", "arm64/nvidia": "amazon-eks-node-al2023-arm64-nvidia-1.37-v20261101",
		"amd64/neuron": "amazon-eks-node-al2023-x86_64-neuron-1.37-v20261101"}
	if !reflect.DeepEqual(got, wantAMIs) {
		t.Errorf("al2023@latest resolved to %v, want %v", got, wantAMIs)
	}
	for alias, variants := range map[string]int{"al2@latest": 4, "bottlerocket@latest": 6, "al2023@v20261101": 5} {
		amis, err := r.AMIs(ctx, discovered("local", func(nc *awsv1.EC2NodeClass) { nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: alias}} }))
		if err != nil || len(amis) != variants {
			t.Errorf("%s: %v (%v); want %d (architecture, variant) AMIs", alias, amis, err, variants)
		}
	}
	byID, err := r.AMIs(ctx, discovered("local", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMIFamily = ptr.To("AL2023")
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: e.AMIs["amazon-eks-arm64-node-1.37-v20261101"]}}
	}))
	if err != nil || len(byID) != 1 || byID[0].Requirements[0].Values[0] != "arm64" {
		t.Errorf("AMI by id: %v (%v)", byID, err)
	}

	profile, err := r.InstanceProfile(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := r.InstanceProfile(ctx, nc); err != nil || again != profile {
		t.Errorf("resolving again gave %q (%v), want the same %q", again, err, profile)
	}
	out, err := r.Clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: &profile})
	if err != nil || len(out.InstanceProfile.Roles) != 1 || *out.InstanceProfile.Roles[0].RoleName != "KarpenterNodeRole-local" {
		t.Fatalf("instance profile %s: %+v (%v)", profile, out, err)
	}
	tags := map[string]string{}
	for _, tag := range out.InstanceProfile.Tags {
		tags[*tag.Key] = *tag.Value
	}
	if tags["kubernetes.io/cluster/local"] != "owned" || tags["karpenter.k8s.aws/ec2nodeclass"] != "default" {
		t.Errorf("instance profile tags %v", tags)
	}
	if err := r.DeleteInstanceProfile(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: &profile}); err == nil {
		t.Errorf("instance profile %s still exists after DeleteInstanceProfile", profile)
	}
	if err := r.DeleteInstanceProfile(ctx, nc); err != nil {
		t.Errorf("deleting a deleted instance profile: %v", err)
	}
}

func TestResolverErrorsNameWhatMatchedNothing(t *testing.T) {
	e := emulator
	r := resolver(t, e, "local")
	ctx := context.Background()
	for name, tc := range map[string]struct {
		nc   *awsv1.EC2NodeClass
		call func(*awsv1.EC2NodeClass) error
		want string
	}{
		"no subnet": {nc: discovered("nope", nil), call: func(nc *awsv1.EC2NodeClass) error { _, err := r.Subnets(ctx, nc); return err },
			want: "subnet selector matched no subnet: tag karpenter.sh/discovery=nope"},
		"no security group": {nc: discovered("local", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{ID: "sg-0000000000000000"}}
		}), call: func(nc *awsv1.EC2NodeClass) error { _, err := r.SecurityGroups(ctx, nc); return err },
			want: "security group selector matched no security group: id sg-0000000000000000"},
		"an alias for a Kubernetes version EKS has no AMI for": {nc: discovered("local", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v19990101"}}
		}), call: func(nc *awsv1.EC2NodeClass) error { _, err := r.AMIs(ctx, nc); return err },
			want: "alias al2023@v19990101 resolves to no AMI for Kubernetes 1.37: no SSM parameter /aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.37-v19990101/image_id"},
		"no AMI by name": {nc: discovered("local", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMIFamily = ptr.To("AL2023")
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "my-golden-image-*"}}
		}), call: func(nc *awsv1.EC2NodeClass) error { _, err := r.AMIs(ctx, nc); return err },
			want: "AMI selector matched no image: name my-golden-image-*"},
		"an instance profile that does not exist": {nc: discovered("local", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.Role, nc.Spec.InstanceProfile = "", ptr.To("missing-profile")
		}), call: func(nc *awsv1.EC2NodeClass) error { _, err := r.InstanceProfile(ctx, nc); return err },
			want: "instance profile missing-profile"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.call(tc.nc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// variantOf names an AMI's variant by its requirements.
func variantOf(a awsv1.AMI) string {
	for _, r := range a.Requirements {
		switch r.Key {
		case karpv1.LabelInstanceGPUManufacturer:
			return "nvidia"
		case karpv1.LabelInstanceAcceleratorManufacturer:
			return "neuron"
		}
	}
	if len(a.Requirements) > 1 {
		return "standard"
	}
	return ""
}
