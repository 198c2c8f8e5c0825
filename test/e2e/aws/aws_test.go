package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	awsprovider "github.com/karpenter-policy/karpenter/providers/aws"
)

const app = "spread"

// spread is a Deployment of n one-CPU pods spread evenly over the zones, on the sample
// NodePool.
func spread(n int32) *appsv1.Deployment {
	labels := map[string]string{"app": app}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: "default"},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
				},
			},
		},
	}
}

// running are the Running pods of the app (not being deleted), by node.
func running(ctx context.Context) (map[string]int, int) {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return nil, 0
	}
	byNode, n := map[string]int{}, 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			byNode[p.Spec.NodeName]++
			n++
		}
	}
	return byNode, n
}

// instances are the cluster's instances EC2 knows, by id.
func instances(ctx context.Context, t *testing.T) map[string]ec2types.Instance {
	t.Helper()
	out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: awssdk.String("tag:kubernetes.io/cluster/" + clusterName), Values: []string{"owned"}}}})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]ec2types.Instance{}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			all[awssdk.ToString(i.InstanceId)] = i
		}
	}
	return all
}

func live(all map[string]ec2types.Instance) []string {
	var ids []string
	for id, i := range all {
		if i.State.Name != ec2types.InstanceStateNameTerminated && i.State.Name != ec2types.InstanceStateNameShuttingDown {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// The whole life of instances on the AWS provider: 30 pods spread over three zones run on
// instances it launched, which match their Nodes and the EC2NodeClass; a Spot interruption
// warning on the queue drains a node and terminates its instance while its pods run again
// elsewhere; deleting the workload and the NodeClaims terminates every instance.
func TestInstancesOfAScaleUpInterruptionAndTeardown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const replicas = 30
	if err := kube.Create(ctx, spread(replicas)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, n := running(ctx)
		return n == replicas, nil
	}); err != nil {
		_, n := running(ctx)
		t.Fatalf("%d of %d pods Running after %s\n%s", n, replicas, time.Since(start).Round(time.Second), local.LogTail("karpenter", 40))
	}
	t.Logf("%d pods Running %s after the Deployment was created", replicas, time.Since(start).Round(time.Second))

	nc := &awsv1.EC2NodeClass{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "default"}, nc); err != nil {
		t.Fatal(err)
	}
	byNode, _ := running(ctx)
	ec2View := instances(ctx, t)
	zones := map[string]int{}
	var spotNode *corev1.Node
	for name := range byNode {
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			t.Fatal(err)
		}
		id := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
		inst, ok := ec2View[id]
		if !ok {
			t.Errorf("node %s: providerID %s is no instance EC2 has", name, node.Spec.ProviderID)
			continue
		}
		zone := awssdk.ToString(inst.Placement.AvailabilityZone)
		zones[zone] += byNode[name]
		ct := karpv1.CapacityTypeOnDemand
		if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
			ct = karpv1.CapacityTypeSpot
		}
		if node.Spec.ProviderID != awsprovider.ProviderIDPrefix+zone+"/"+id || node.Labels[corev1.LabelInstanceTypeStable] != string(inst.InstanceType) ||
			node.Labels[corev1.LabelTopologyZone] != zone || node.Labels[karpv1.CapacityTypeLabelKey] != ct {
			t.Errorf("node %s (providerID %s, type %s, zone %s, capacity type %s) does not match EC2's %s (%s in %s, %s)", name, node.Spec.ProviderID,
				node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone], node.Labels[karpv1.CapacityTypeLabelKey], id, inst.InstanceType, zone, ct)
		}
		claims := &karpv1.NodeClaimList{}
		if err := kube.List(ctx, claims); err != nil {
			t.Fatal(err)
		}
		claim := ""
		for _, c := range claims.Items {
			if c.Status.ProviderID == node.Spec.ProviderID {
				claim = c.Name
			}
		}
		tags := map[string]string{}
		for _, tag := range inst.Tags {
			tags[awssdk.ToString(tag.Key)] = awssdk.ToString(tag.Value)
		}
		for k, v := range map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": claim, "karpenter.k8s.aws/ec2nodeclass": "default",
			"kubernetes.io/cluster/" + clusterName: "owned", "team": "platform"} {
			if claim == "" || tags[k] != v {
				t.Errorf("instance %s of node %s (NodeClaim %q): tag %s = %q, want %q", id, name, claim, k, tags[k], v)
			}
		}
		if !slices.ContainsFunc(nc.Status.AMIs, func(a awsv1.AMI) bool { return a.ID == awssdk.ToString(inst.ImageId) }) {
			t.Errorf("instance %s runs %s, not an AMI the EC2NodeClass resolved (%v)", id, awssdk.ToString(inst.ImageId), nc.Status.AMIs)
		}
		if !slices.ContainsFunc(nc.Status.Subnets, func(s awsv1.Subnet) bool { return s.ID == awssdk.ToString(inst.SubnetId) }) {
			t.Errorf("instance %s is in subnet %s, not one the EC2NodeClass resolved", id, awssdk.ToString(inst.SubnetId))
		}
		if ct == karpv1.CapacityTypeSpot && spotNode == nil {
			spotNode = node
		}
	}
	if len(zones) != 3 {
		t.Errorf("pods by zone %v; want the spread over three zones", zones)
	}
	t.Logf("%d nodes for %d pods; pods by zone %v; %d instances live", len(byNode), replicas, zones, len(live(ec2View)))
	if t.Failed() {
		t.FailNow()
	}

	// A Spot interruption warning for one node's instance, as EventBridge puts it on the queue.
	if spotNode == nil {
		t.Fatal("no node runs on spot, though the NodePool allows it and spot is cheaper")
	}
	id := spotNode.Spec.ProviderID[strings.LastIndex(spotNode.Spec.ProviderID, "/")+1:]
	body := fmt.Sprintf(`{"version":"0","id":"e2e","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":%q,"region":%q,"resources":["arn:aws:ec2:%s:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		time.Now().UTC().Format(time.RFC3339), emulator.Region, emulator.Region, id, id)
	if _, err := clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: awssdk.String(emulator.Cluster.QueueURL), MessageBody: awssdk.String(body)}); err != nil {
		t.Fatal(err)
	}
	interrupted := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		byNode, n := running(ctx)
		if n != replicas || byNode[spotNode.Name] > 0 {
			return false, nil
		}
		i := instances(ctx, t)[id]
		if i.State == nil || i.State.Name != ec2types.InstanceStateNameTerminated {
			return false, nil
		}
		err := kube.Get(ctx, client.ObjectKeyFromObject(spotNode), &corev1.Node{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	}); err != nil {
		byNode, n := running(ctx)
		t.Fatalf("after the interruption warning for %s (node %s): %d pods Running (%d on it), instance %v\n%s", id, spotNode.Name, n, byNode[spotNode.Name],
			instances(ctx, t)[id].State, local.LogTail("karpenter", 40))
	}
	t.Logf("interrupted node %s drained, its instance terminated and its pods Running elsewhere in %s", spotNode.Name, time.Since(interrupted).Round(time.Second))
	// The interrupted offering is left out for a while: no node launched since is that type
	// on spot in that zone.
	nodes := &corev1.NodeList{}
	if err := kube.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if _, before := byNode[n.Name]; !before && n.Labels[corev1.LabelInstanceTypeStable] == spotNode.Labels[corev1.LabelInstanceTypeStable] &&
			n.Labels[corev1.LabelTopologyZone] == spotNode.Labels[corev1.LabelTopologyZone] && n.Labels[karpv1.CapacityTypeLabelKey] == karpv1.CapacityTypeSpot {
			t.Errorf("node %s launched after the interruption on the interrupted offering (%s spot in %s)", n.Name,
				spotNode.Labels[corev1.LabelInstanceTypeStable], spotNode.Labels[corev1.LabelTopologyZone])
		}
	}

	// Teardown: no workload, no NodeClaim, no instance.
	if err := kube.Delete(ctx, spread(0)); err != nil {
		t.Fatal(err)
	}
	if err := kube.DeleteAllOf(ctx, &karpv1.NodeClaim{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		claims := &karpv1.NodeClaimList{}
		nodes := &corev1.NodeList{}
		if kube.List(ctx, claims) != nil || kube.List(ctx, nodes) != nil {
			return false, nil
		}
		return len(claims.Items) == 0 && len(nodes.Items) == 0 && len(live(instances(ctx, t))) == 0, nil
	}); err != nil {
		t.Fatalf("after deleting the workload and the NodeClaims, instances %v are still live\n%s", live(instances(ctx, t)), local.LogTail("karpenter", 40))
	}
}
