package aws_test

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/test/awsemu"
)

// emulatedProvider returns the AWS provider of cluster "local" on the emulator e, with the
// clients it calls through.
func emulatedProvider(t *testing.T, e *awsemu.Emulator) (*aws.Clients, *aws.Provider) {
	t.Helper()
	s := aws.Settings{ClusterName: "local", Region: e.Region, Endpoint: e.Endpoint, KubernetesVersion: "1.37"}
	clients, err := aws.NewClients(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	pricing := aws.NewPricing(clients, true)
	return clients, aws.NewProvider(testEnv.Client, s, clients, aws.NewInstanceTypes(clients, pricing, time.Hour), pricing)
}

// runInstance launches one m5.large of cluster "local" on the emulator, outside the provider,
// with tags besides the cluster's; it returns the instance's ID and its provider ID.
func runInstance(t *testing.T, clients *aws.Clients, e *awsemu.Emulator, tags map[string]string) (id, providerID string) {
	t.Helper()
	ts := []ec2types.Tag{{Key: awssdk.String("kubernetes.io/cluster/local"), Value: awssdk.String("owned")}}
	for k, v := range tags {
		ts = append(ts, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(v)})
	}
	out, err := clients.EC2.RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId:      awssdk.String(e.AMIs["amazon-eks-node-al2023-x86_64-standard-1.37-v20261101"]),
		InstanceType: ec2types.InstanceTypeM5Large, MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1),
		SubnetId:          awssdk.String(e.Cluster.Subnets[0]),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: ts}}})
	if err != nil {
		t.Fatal(err)
	}
	i := out.Instances[0]
	return *i.InstanceId, "aws:///" + *i.Placement.AvailabilityZone + "/" + *i.InstanceId
}
