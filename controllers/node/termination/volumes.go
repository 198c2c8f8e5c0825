package termination

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// awaitVolumeDetachment holds a drained node until the VolumeAttachments of its drainable
// pods' volumes are gone, as upstream Karpenter does: deleting the instance with a volume still
// attached leaves it attached to nothing until the cloud notices, and the pod's next node
// fails to attach it (Multi-Attach). Attachments of pods that are not drained (DaemonSet pods
// that tolerate the disrupted taint, mirror pods) stay until the instance goes, so they do not
// count. The wait ends at the terminationGracePeriod deadline, if there is one; the NodeClaim's
// VolumesDetached condition and an AwaitingVolumeDetachment event on the node say what it
// waits for.
func (c *Controller) awaitVolumeDetachment(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, deadline *time.Time) (reconcile.Result, error) {
	var vas storagev1.VolumeAttachmentList
	if err := c.client.List(ctx, &vas, client.MatchingFields{index.VolumeAttachmentNodeName: node.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the volume attachments of node %s: %w", node.Name, err)
	}
	if len(vas.Items) == 0 {
		setCondition(nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionTrue, "VolumesDetached", "")
		return reconcile.Result{}, nil
	}
	staying, err := c.stayingVolumes(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	var waiting []string
	for _, va := range vas.Items {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && staying.Has(*pv) {
			continue
		}
		waiting = append(waiting, va.Name)
	}
	if len(waiting) == 0 {
		setCondition(nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionTrue, "VolumesDetached", "")
		return reconcile.Result{}, nil
	}
	if deadline != nil && !c.clock.Now().Before(*deadline) {
		setCondition(nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionFalse, "TerminationGracePeriodElapsed",
			fmt.Sprintf("%d volume attachments remain", len(waiting)))
		return reconcile.Result{}, nil
	}
	slices.Sort(waiting)
	msg := fmt.Sprintf("Awaiting deletion of bound volumeattachments (%s)", strings.Join(waiting, ", "))
	if nc == nil || !hasConditionMessage(nc, karpv1.ConditionTypeVolumesDetached, msg) {
		c.recorder.Eventf(node, nil, corev1.EventTypeNormal, "AwaitingVolumeDetachment", "Terminate", "%s", msg)
	}
	setCondition(nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionUnknown, "AwaitingVolumeDetachment", msg)
	return ratelimit.Again(), nil
}

// stayingVolumes are the PersistentVolumes of the node's pods that the drain leaves running
// there (DaemonSet pods that tolerate the disrupted taint, mirror pods).
func (c *Controller) stayingVolumes(ctx context.Context, node *corev1.Node) (sets.Set[string], error) {
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods, client.MatchingFields{index.PodNodeName: node.Name}); err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	out := sets.New[string]()
	now := c.clock.Now()
	for i := range pods.Items {
		p := &pods.Items[i]
		// A pod going away (evicted, terminating, even past its grace period) gives its
		// volumes up: only those of pods the drain leaves running stay.
		if scheduling.IsTerminal(p) || scheduling.IsTerminating(p) || scheduling.IsDrainable(p, now) {
			continue
		}
		for j := range p.Spec.Volumes {
			claimName := scheduling.ClaimName(p, &p.Spec.Volumes[j])
			if claimName == "" {
				continue
			}
			pvc := &corev1.PersistentVolumeClaim{}
			if err := c.client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: claimName}, pvc); err != nil {
				if client.IgnoreNotFound(err) == nil {
					continue
				}
				return nil, fmt.Errorf("reading claim %s/%s: %w", p.Namespace, claimName, err)
			}
			if pvc.Spec.VolumeName != "" {
				out.Insert(pvc.Spec.VolumeName)
			}
		}
	}
	return out, nil
}

// hasConditionMessage reports whether the NodeClaim's condition already says msg.
func hasConditionMessage(nc *karpv1.NodeClaim, t, msg string) bool {
	c := meta.FindStatusCondition(nc.Status.Conditions, t)
	return c != nil && c.Message == msg
}
