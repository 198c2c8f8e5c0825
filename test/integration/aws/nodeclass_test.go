// Package aws_test runs the AWS provider's controllers against a real API server (envtest)
// and the local AWS emulator (moto, test/awsemu), through the real SDK.
package aws_test

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/iam"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	"github.com/karpenter-policy/karpenter/controllers/nodeclass"
	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/awsemu"
	"github.com/karpenter-policy/karpenter/test/env"
)

var testEnv *env.Environment

func TestMain(m *testing.M) { os.Exit(env.Run(m, &testEnv)) }

func TestEC2NodeClassStatus(t *testing.T) {
	e := awsemu.Start(t, "local")
	ctx := context.Background()
	s := aws.Settings{ClusterName: "local", Region: e.Region, Endpoint: e.Endpoint, KubernetesVersion: "1.37"}
	clients, err := aws.NewClients(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &aws.Resolver{Clients: clients, Settings: s}
	ctl := nodeclass.NewEC2(testEnv.Client, resolver)

	nc := test.EC2NodeClass(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "local"}}}
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "local"}}}
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
		nc.Spec.Role, nc.Spec.InstanceProfile = "KarpenterNodeRole-local", nil
	})
	if err := testEnv.Client.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	reconcile := func() *awsv1.EC2NodeClass {
		t.Helper()
		fresh := &awsv1.EC2NodeClass{}
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(nc), fresh); err != nil {
			t.Fatal(err)
		}
		if _, err := ctl.Reconcile(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(nc), fresh); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return fresh
	}
	got := reconcile()
	for _, c := range []string{awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady, awsv1.ConditionTypeAMIsReady,
		awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeReady} {
		cond := meta.FindStatusCondition(got.Status.Conditions, c)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != got.Generation {
			t.Errorf("condition %s: %+v", c, cond)
		}
	}
	// al2023@latest: standard and nvidia for both architectures, neuron for x86_64.
	if len(got.Status.Subnets) != 3 || len(got.Status.SecurityGroups) != 1 || len(got.Status.AMIs) != 5 || got.Status.InstanceProfile == "" {
		t.Errorf("status %+v", got.Status)
	}
	if got.Status.ObservedGeneration != got.Generation || len(got.Finalizers) != 1 || got.Finalizers[0] != nodeclass.EC2Finalizer {
		t.Errorf("observedGeneration %d of %d, finalizers %v", got.Status.ObservedGeneration, got.Generation, got.Finalizers)
	}
	profile := got.Status.InstanceProfile

	// A selector that matches nothing: that condition and Ready go False, naming it.
	got.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "elsewhere"}}}
	if err := testEnv.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = reconcile()
	subnets := meta.FindStatusCondition(got.Status.Conditions, awsv1.ConditionTypeSubnetsReady)
	ready := meta.FindStatusCondition(got.Status.Conditions, awsv1.ConditionTypeReady)
	if subnets == nil || subnets.Status != metav1.ConditionFalse || subnets.Message != "subnet selector matched no subnet: tag karpenter.sh/discovery=elsewhere" ||
		ready == nil || ready.Status != metav1.ConditionFalse || subnets.ObservedGeneration != got.Generation {
		t.Errorf("after a selector matching nothing: SubnetsReady %+v, Ready %+v", subnets, ready)
	}

	// Deleting it deletes the instance profile made for it, then lets it go.
	if err := testEnv.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(nc), &awsv1.EC2NodeClass{}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("the node class is still there after its finalizer ran: %v", err)
	}
	if _, err := clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: &profile}); err == nil {
		t.Errorf("instance profile %s outlived its node class", profile)
	}
}
