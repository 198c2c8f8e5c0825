package kwok

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// An instance of the simulated cloud is its Node object while kwok plays its kubelet. When the
// cloud terminates it (Delete, or a Spot reclaim), the Node is marked as a real cloud's node
// would look once its VM is gone: kwok stops playing its kubelet (NodeAnnotation no longer
// "fake"), its Ready condition turns Unknown as the node lifecycle controller would set it,
// InstanceTerminatedAnnotation records when, and the Node object is deleted; Karpenter's
// termination then finalizes it without waiting for pods that nothing will ever stop.
const (
	InstanceTerminatedAnnotation = "karpenter.kwok.sh/instance-terminated"
	// terminatedNode is NodeAnnotation's value on a terminated instance's Node: kwok manages
	// only nodes whose value is "fake".
	terminatedNode = "terminated"
)

func terminated(n *corev1.Node) bool {
	_, ok := n.Annotations[InstanceTerminatedAnnotation]
	return ok || n.Annotations[NodeAnnotation] == terminatedNode
}

// terminate ends the node's instance: the kubelet stops, the node goes NotReady, and the Node
// object is deleted (it stays while finalizers hold it).
func (p *Provider) terminate(ctx context.Context, node *corev1.Node) error {
	now := p.clock.Now()
	base := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[NodeAnnotation] = terminatedNode
	node.Annotations[InstanceTerminatedAnnotation] = now.UTC().Format(time.RFC3339)
	if err := p.client.Patch(ctx, node, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("terminating the instance of node %s: %w", node.Name, err)
	}
	base = node.DeepCopy()
	unknown := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
		Message: "Kubelet stopped posting node status.", LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	replaced := false
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			node.Status.Conditions[i], replaced = unknown, true
		}
	}
	if !replaced {
		node.Status.Conditions = append(node.Status.Conditions, unknown)
	}
	if err := p.client.Status().Patch(ctx, node, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("marking node %s not ready: %w", node.Name, err)
	}
	if err := p.client.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting node %s: %w", node.Name, err)
	}
	return nil
}

// registerCSIDrivers creates the node's CSINode with the node class's CSI drivers, as the
// kubelet's CSI node plugins register theirs: owned by the Node, so it goes with it.
func (p *Provider) registerCSIDrivers(ctx context.Context, node *corev1.Node, nc *kwokv1alpha1.KWOKNodeClass) error {
	if len(nc.Spec.CSIDrivers) == 0 {
		return nil
	}
	if node.UID == "" {
		if err := p.client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return fmt.Errorf("reading node %s: %w", node.Name, err)
		}
	}
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node.Name, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}}}
	for _, d := range nc.Spec.CSIDrivers {
		cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: d.Name, NodeID: node.Name,
			Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(d.AllocatableCount)}})
	}
	if err := p.client.Create(ctx, cn); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the CSINode of node %s: %w", node.Name, err)
	}
	return nil
}

// Reboot simulates restarting the NodeClaim's instance in place: kwok has no machine to
// restart, so the Node gets a new boot ID (derived from operationID, so that a retry of the
// same reboot does not reboot twice), which is how a reboot is seen. The simulated kubelet
// stays Ready through it; conditions set on the node by hand stay until cleared, as a fault a
// reboot does not fix would.
func (p *Provider) Reboot(ctx context.Context, claim *karpv1.NodeClaim, operationID string) error {
	name, err := nodeName(claim.Status.ProviderID)
	if err != nil {
		return &cloudprovider.RebootRefusedError{Err: err}
	}
	node := &corev1.Node{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return &cloudprovider.RebootRefusedError{Err: fmt.Errorf("node %s is gone", name)}
		}
		return err
	}
	if terminated(node) {
		return &cloudprovider.RebootRefusedError{Err: fmt.Errorf("the instance of node %s is terminated", name)}
	}
	base := node.DeepCopy()
	node.Status.NodeInfo.BootID = "kwok-" + operationID
	if err := p.client.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("rebooting node %s: %w", name, err)
	}
	return nil
}
