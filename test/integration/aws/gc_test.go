package aws_test

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider/aws"
	"github.com/karpenter-policy/karpenter/controllers/nodeclaim/garbagecollection"
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/awsemu"
)

// TestGarbageCollectsAnOrphanedInstance: an instance tagged for the cluster and a NodePool
// that no NodeClaim accounts for is terminated by the garbage collector, through the AWS
// provider's List and Delete; one a NodeClaim accounts for is left alone.
func TestGarbageCollectsAnOrphanedInstance(t *testing.T) {
	e := awsemu.Start(t, "local")
	ctx := context.Background()
	s := aws.Settings{ClusterName: "local", Region: e.Region, Endpoint: e.Endpoint, KubernetesVersion: "1.37"}
	clients, err := aws.NewClients(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	pricing := aws.NewPricing(clients, true)
	p := aws.NewProvider(testEnv.Client, s, clients, aws.NewInstanceTypes(clients, pricing, time.Hour), pricing)
	run := func(nodeClaim string) (id, providerID string) {
		out, err := clients.EC2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: awssdk.String(e.AMIs["amazon-eks-node-al2023-x86_64-standard-1.37-v20261101"]),
			InstanceType: ec2types.InstanceTypeM5Large, MinCount: awssdk.Int32(1), MaxCount: awssdk.Int32(1), SubnetId: awssdk.String(e.Cluster.Subnets[0]),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
				{Key: awssdk.String("kubernetes.io/cluster/local"), Value: awssdk.String("owned")},
				{Key: awssdk.String("karpenter.sh/nodepool"), Value: awssdk.String("default")},
				{Key: awssdk.String("karpenter.sh/nodeclaim"), Value: awssdk.String(nodeClaim)}}}}})
		if err != nil {
			t.Fatal(err)
		}
		i := out.Instances[0]
		return *i.InstanceId, "aws:///" + *i.Placement.AvailabilityZone + "/" + *i.InstanceId
	}
	orphan, _ := run("gone")
	kept, keptID := run("kept")
	nc := test.NodeClaim(func(nc *karpv1.NodeClaim) { nc.Name = "kept" })
	if err := testEnv.Client.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = keptID
	if err := testEnv.Client.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Minute))
	model := state.NewCluster(testEnv.Client, clk)
	model.Update(nc)
	gc := garbagecollection.NewController(testEnv.Client, model, testEnv.Client, p, clk)
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{orphan, kept}})
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]ec2types.InstanceStateName{}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			state[*i.InstanceId] = i.State.Name
		}
	}
	if state[orphan] != ec2types.InstanceStateNameTerminated && state[orphan] != ec2types.InstanceStateNameShuttingDown {
		t.Errorf("the orphaned instance is %s; want it terminated", state[orphan])
	}
	if state[kept] != ec2types.InstanceStateNameRunning {
		t.Errorf("the instance of NodeClaim kept is %s; want it running", state[kept])
	}
}
