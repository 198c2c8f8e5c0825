package aws_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
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
	clients, p := emulatedProvider(t, e)
	run := func(nodeClaim string) (id, providerID string) {
		return runInstance(t, clients, e, map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": nodeClaim})
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
