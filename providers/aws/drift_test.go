package aws_test

import (
	"context"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	"github.com/karpenter-policy/karpenter/api/install"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/providers/aws"
)

// An instance drifts when the subnets or security groups its node class resolves to no longer
// hold it. (The emulator's fleets do not report an instance's security groups, so this one is
// run directly, with the node class's group, as a launch template would give it.)
func TestSubnetAndSecurityGroupDrift(t *testing.T) {
	e := emulator
	ctx := context.Background()
	r := resolver(t, e, "local")
	nc := readyNodeClass(t, r, "drift-05")
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(nc).Build()
	clients, pricing, types := providers(t, e)
	p := aws.NewProvider(kube, aws.Settings{ClusterName: "local", ClusterEndpoint: "https://10.0.0.1:6443", Region: e.Region, KubernetesVersion: "1.37"}, clients, types, pricing)

	run, err := clients.EC2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: awssdk.String(nc.Status.AMIs[0].ID), InstanceType: ec2types.InstanceTypeM5Large,
		MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), SubnetId: awssdk.String(e.Cluster.Subnets[0]), SecurityGroupIds: []string{e.Cluster.SecurityGroup}})
	if err != nil {
		t.Fatal(err)
	}
	inst := run.Instances[0]
	if len(inst.SecurityGroups) == 0 {
		t.Fatal("the emulator reports no security groups of an instance run with one; the test cannot judge security group drift")
	}
	claim := claimFor(nc.Name)
	claim.Annotations = map[string]string{aws.NodeClassHashAnnotation: aws.NodeClassHash(nc)}
	claim.Status.ProviderID = aws.ProviderIDPrefix + awssdk.ToString(inst.Placement.AvailabilityZone) + "/" + awssdk.ToString(inst.InstanceId)
	drift := func() cloudprovider.DriftReason {
		t.Helper()
		reason, err := p.IsDrifted(ctx, claim)
		if err != nil {
			t.Fatal(err)
		}
		return reason
	}
	update := func(f func(*awsv1.EC2NodeClass)) {
		t.Helper()
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			t.Fatal(err)
		}
		f(nc)
		if err := kube.Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	if reason := drift(); reason != "" {
		t.Fatalf("drift before any change: %q", reason)
	}
	// Another group is added to the node class: the instance lacks it.
	sg, err := clients.EC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("drift-05-extra"), Description: awssdk.String("extra"), VpcId: awssdk.String(e.Cluster.VPC)})
	if err != nil {
		t.Fatal(err)
	}
	groups := nc.Status.SecurityGroups
	update(func(nc *awsv1.EC2NodeClass) {
		nc.Status.SecurityGroups = append(nc.Status.SecurityGroups, awsv1.SecurityGroup{ID: awssdk.ToString(sg.GroupId), Name: "drift-05-extra"})
	})
	if reason := drift(); reason != aws.SecurityGroupDrift {
		t.Errorf("drift after a security group was added to the node class: %q, want %s", reason, aws.SecurityGroupDrift)
	}
	update(func(nc *awsv1.EC2NodeClass) { nc.Status.SecurityGroups = groups })
	if reason := drift(); reason != "" {
		t.Errorf("drift with the groups back as they were: %q", reason)
	}
	// The instance's subnet is no longer selected.
	update(func(nc *awsv1.EC2NodeClass) {
		var rest []awsv1.Subnet
		for _, s := range nc.Status.Subnets {
			if s.ID != awssdk.ToString(inst.SubnetId) {
				rest = append(rest, s)
			}
		}
		nc.Status.Subnets = rest
	})
	if reason := drift(); reason != aws.SubnetDrift {
		t.Errorf("drift after the instance's subnet left the node class: %q, want %s", reason, aws.SubnetDrift)
	}
}
