// Package ec2kubelet plays the kubelet for the EC2 instances the AWS provider launches into
// the local AWS emulator of `make run-aws` and its e2e suite: for each running instance of the
// cluster it registers a Node as the instance's kubelet would (its private DNS name, providerID
// aws:///<zone>/<id>, the labels and taints of its user data, the capacity of its instance
// type and the allocatable its kubelet settings leave), annotated so that kwok then keeps it
// Ready and runs its pods, and it deletes the Node once the instance has terminated, as the
// cloud node lifecycle controller does.
//
// It stands in for machines, not for the provider: it reads EC2 only through the SDK, as an
// instance's boot would, and never touches NodeClaims. It must not be pointed at a real
// account, where real kubelets register their own Nodes.
package ec2kubelet

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	awsprovider "github.com/karpenter-policy/karpenter/providers/aws"
)

// KwokAnnotation marks a Node for the local cluster's kwok, which then plays its status and
// its pods (see test/cluster).
const KwokAnnotation = "kwok.x-k8s.io/node"

// KubeletVersion is what the Nodes report.
const KubeletVersion = "v1.37.2"

// Kubelet registers and removes the Nodes of a cluster's instances.
type Kubelet struct {
	EC2     *ec2.Client
	Kube    client.Client
	Cluster string
	// ClusterEndpoint and CA (PEM), when set, are the API server an instance's user data must
	// name and the CA it must carry for its kubelet to join, as a real kubelet could not
	// join without them.
	ClusterEndpoint string
	CA              []byte
	// Log receives a line per Node registered or removed; nil discards them.
	Log func(format string, args ...any)

	types map[string]*ec2types.InstanceTypeInfo
	// joined are the instances whose kubelet registered: like a real kubelet, it registers
	// once at boot and does not bring its Node back once the Node is deleted.
	joined map[string]bool
}

// Run syncs every interval until ctx ends; errors are logged and retried.
func (k *Kubelet) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := k.Sync(ctx); err != nil && ctx.Err() == nil {
			k.log("ec2 kubelet: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (k *Kubelet) log(format string, args ...any) {
	if k.Log != nil {
		k.Log(format, args...)
	}
}

// Sync registers a Node for each running instance tagged for the cluster that has never had
// one, and deletes the Nodes of instances that are gone.
func (k *Kubelet) Sync(ctx context.Context) error {
	instances := map[string]ec2types.Instance{} // provider ID -> instance
	pages := ec2.NewDescribeInstancesPaginator(k.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + k.Cluster), Values: []string{"owned"}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing the cluster's instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				instances[providerID(&i)] = i
			}
		}
	}
	nodes := &corev1.NodeList{}
	if err := k.Kube.List(ctx, nodes); err != nil {
		return err
	}
	registered := map[string]bool{}
	if k.joined == nil {
		k.joined = map[string]bool{}
	}
	var errs []error
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !strings.HasPrefix(n.Spec.ProviderID, awsprovider.ProviderIDPrefix) {
			continue
		}
		registered[n.Spec.ProviderID] = true
		k.joined[n.Spec.ProviderID] = true
		inst, ok := instances[n.Spec.ProviderID]
		if ok && inst.State != nil && inst.State.Name != ec2types.InstanceStateNameTerminated && inst.State.Name != ec2types.InstanceStateNameShuttingDown {
			continue
		}
		if n.DeletionTimestamp != nil {
			continue
		}
		if err := k.Kube.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting Node %s of a terminated instance: %w", n.Name, err))
			continue
		}
		k.log("ec2 kubelet: instance of Node %s terminated; Node deleted", n.Name)
	}
	for id, inst := range instances {
		if registered[id] || k.joined[id] || inst.State == nil || inst.State.Name != ec2types.InstanceStateNameRunning {
			continue
		}
		if err := k.register(ctx, &inst); err != nil {
			errs = append(errs, fmt.Errorf("registering instance %s: %w", aws.ToString(inst.InstanceId), err))
			continue
		}
		k.joined[id] = true
	}
	return errors.Join(errs...)
}

func providerID(i *ec2types.Instance) string {
	zone := ""
	if i.Placement != nil {
		zone = aws.ToString(i.Placement.AvailabilityZone)
	}
	return awsprovider.ProviderIDPrefix + zone + "/" + aws.ToString(i.InstanceId)
}

// register creates the Node of a running instance from its user data and instance type.
func (k *Kubelet) register(ctx context.Context, inst *ec2types.Instance) error {
	id := aws.ToString(inst.InstanceId)
	attr, err := k.EC2.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{InstanceId: inst.InstanceId, Attribute: ec2types.InstanceAttributeNameUserData})
	if err != nil {
		return fmt.Errorf("reading user data: %w", err)
	}
	if attr.UserData == nil || aws.ToString(attr.UserData.Value) == "" {
		return fmt.Errorf("instance has no user data to join the cluster with")
	}
	boot, err := ParseUserData(aws.ToString(attr.UserData.Value))
	if err != nil {
		return err
	}
	if k.ClusterEndpoint != "" && boot.ClusterEndpoint != k.ClusterEndpoint {
		return fmt.Errorf("user data joins API server %q, not the cluster's %s", boot.ClusterEndpoint, k.ClusterEndpoint)
	}
	if len(k.CA) > 0 {
		if ca, err := base64.StdEncoding.DecodeString(boot.CABundle); err != nil || !bytes.Equal(ca, k.CA) {
			return fmt.Errorf("user data does not carry the cluster's CA, so its kubelet could not trust the API server")
		}
	}
	info, err := k.instanceType(ctx, string(inst.InstanceType))
	if err != nil {
		return err
	}
	described := awsprovider.Describe(info, boot.Kubelet)
	name := aws.ToString(inst.PrivateDnsName)
	if name == "" {
		name = id
	}
	zone := inst.Placement.AvailabilityZone
	labels := map[string]string{}
	for key, v := range boot.Labels {
		labels[key] = v
	}
	// What the kubelet and the cloud provider's node controller set on every Node.
	for key, v := range map[string]string{
		corev1.LabelHostname: name, corev1.LabelArchStable: described.Labels[karpv1.LabelArch], corev1.LabelOSStable: "linux",
		corev1.LabelInstanceTypeStable: string(inst.InstanceType), corev1.LabelTopologyZone: aws.ToString(zone),
		corev1.LabelTopologyRegion: strings.TrimRight(aws.ToString(zone), "abcdefghijklmnopqrstuvwxyz"),
	} {
		labels[key] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{KwokAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{ProviderID: providerID(inst), Taints: boot.Taints},
		Status: corev1.NodeStatus{
			Capacity: described.Capacity, Allocatable: described.Allocatable(),
			NodeInfo: corev1.NodeSystemInfo{Architecture: described.Labels[karpv1.LabelArch], OperatingSystem: "linux", KubeletVersion: KubeletVersion},
		},
	}
	if err := k.Kube.Create(ctx, node); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	k.log("ec2 kubelet: registered Node %s for %s (%s in %s)", name, id, inst.InstanceType, aws.ToString(zone))
	return nil
}

// instanceType describes an instance type once.
func (k *Kubelet) instanceType(ctx context.Context, name string) (*ec2types.InstanceTypeInfo, error) {
	if info, ok := k.types[name]; ok {
		return info, nil
	}
	out, err := k.EC2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(name)}})
	if err != nil {
		return nil, fmt.Errorf("describing instance type %s: %w", name, err)
	}
	if len(out.InstanceTypes) == 0 {
		return nil, fmt.Errorf("EC2 does not know instance type %s", name)
	}
	if k.types == nil {
		k.types = map[string]*ec2types.InstanceTypeInfo{}
	}
	k.types[name] = &out.InstanceTypes[0]
	return k.types[name], nil
}
