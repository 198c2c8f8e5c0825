package interruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
)

// handler acts on a provider's notices about instances, for the interruption queue and the
// health checks alike.
type handler struct {
	client   client.Client
	cloud    cloudprovider.CloudProvider
	recorder events.EventRecorder
}

// act deletes the NodeClaims of the notice's instances (a rebalance recommendation is an
// Event only), and says whether any instance has a NodeClaim. Each NodeClaim acted on, and its
// Node, get upstream's Event for the notice (SpotInterrupted, SpotRebalanceRecommendation,
// InstanceStopping, InstanceTerminating, InstanceUnhealthy,
// CapacityReservationInstanceInterrupted) and, once deleted, TerminatingOnInterruption. A
// capacity reservation's interruption marks the reservation unavailable
// (cloudprovider.ReservationReporter). A Spot interruption also marks
// the offering unavailable; a notice whose instance is already broken (Notice.Forceful) sets
// the NodeClaim's termination timestamp to now first, so that its node is not drained
// gracefully. A NodeClaim already being deleted is left as it is.
func (h *handler) act(ctx context.Context, n cloudprovider.Notice) (found bool, err error) {
	logger := log.FromContext(ctx)
	for _, id := range n.InstanceIDs {
		claims, err := index.NodeClaimsByInstanceID(ctx, h.client, id)
		if err != nil {
			return found, err
		}
		found = found || len(claims) > 0
		for i := range claims {
			nc := &claims[i]
			if nc.DeletionTimestamp != nil {
				continue
			}
			node, err := index.NodeByProviderID(ctx, h.client, nc.Status.ProviderID)
			if err != nil {
				return found, err
			}
			reason, kind := noticeEvent(n)
			h.event(nc, node, kind, reason, fmt.Sprintf("Instance %s %s", id, noticeReason(n)))
			if n.Kind == cloudprovider.NoticeRebalance {
				continue // an Event only
			}
			if n.Kind == cloudprovider.NoticeSpotInterruption {
				if r, ok := h.cloud.(cloudprovider.CapacityReporter); ok {
					r.MarkUnavailable(nc.Labels[karpv1.LabelInstanceType], nc.Labels[karpv1.LabelTopologyZone], karpv1.CapacityTypeSpot)
				}
			}
			if n.Kind == cloudprovider.NoticeCapacityReservationInterruption {
				if r, ok := h.cloud.(cloudprovider.ReservationReporter); ok && nc.Labels[karpv1.LabelCapacityReservationID] != "" {
					r.MarkReservationUnavailable(nc.Labels[karpv1.LabelCapacityReservationID])
				}
			}
			if n.Forceful() {
				if err := h.terminateNow(ctx, nc); err != nil {
					return found, err
				}
			}
			if err := h.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				return found, fmt.Errorf("deleting nodeclaim %s of instance %s: %w", nc.Name, id, err)
			}
			metrics.Interrupted(nc, n.MessageType())
			logger.Info("interruption: deleting the nodeclaim", "NodeClaim", nc.Name, "instance", id, "kind", n.Kind, "deadline", n.Deadline)
			how := "its node drains now"
			if n.Forceful() {
				how = "its pods are deleted without a graceful drain"
			}
			h.event(nc, node, corev1.EventTypeWarning, "TerminatingOnInterruption", "Interruption triggered termination for the NodeClaim: "+how)
		}
	}
	return found, nil
}

// event records an Event on the NodeClaim and, when it has one, its Node, as upstream's AWS
// provider does for each notice.
func (h *handler) event(nc *karpv1.NodeClaim, node *corev1.Node, kind, reason, message string) {
	h.recorder.Eventf(nc, nil, kind, reason, "Disruption", "%s", message)
	if node != nil {
		h.recorder.Eventf(node, nil, kind, reason, "Disruption", "%s", message)
	}
}

// noticeEvent is the reason and type of the Event a notice gives, upstream's AWS provider's.
func noticeEvent(n cloudprovider.Notice) (reason, kind string) {
	switch n.Kind {
	case cloudprovider.NoticeSpotInterruption:
		return "SpotInterrupted", corev1.EventTypeWarning
	case cloudprovider.NoticeRebalance:
		return "SpotRebalanceRecommendation", corev1.EventTypeNormal
	case cloudprovider.NoticeCapacityReservationInterruption:
		return "CapacityReservationInstanceInterrupted", corev1.EventTypeWarning
	case cloudprovider.NoticeStateChange:
		if n.MessageType() == "instance_stopped" {
			return "InstanceStopping", corev1.EventTypeWarning
		}
		return "InstanceTerminating", corev1.EventTypeWarning
	}
	// A scheduled change, a scheduled event, a failed status check.
	return "InstanceUnhealthy", corev1.EventTypeWarning
}

// terminateNow sets the NodeClaim's termination timestamp to now, unless it has one: its
// node's pods are then deleted without waiting for PodDisruptionBudgets.
func (h *handler) terminateNow(ctx context.Context, nc *karpv1.NodeClaim) error {
	if _, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		return nil
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = time.Now().UTC().Format(time.RFC3339)
	if err := h.client.Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("setting the termination timestamp of nodeclaim %s: %w", nc.Name, err)
	}
	return nil
}

func noticeReason(n cloudprovider.Notice) string {
	switch n.Kind {
	case cloudprovider.NoticeSpotInterruption:
		return "will be reclaimed (Spot interruption) at " + n.Deadline.UTC().Format(time.RFC3339)
	case cloudprovider.NoticeRebalance:
		return "is at elevated risk of Spot interruption (EC2 recommends rebalancing)"
	case cloudprovider.NoticeCapacityReservationInterruption:
		return "is taken back by its capacity reservation (an interruptible reservation interrupted)"
	case cloudprovider.NoticeStateChange:
		return "is " + n.State
	case cloudprovider.NoticeScheduledChange:
		return "has a scheduled change (AWS Health)"
	case cloudprovider.NoticeInstanceStatus:
		return "failed its instance status check"
	case cloudprovider.NoticeSystemStatus:
		return "failed its system status check (its host)"
	case cloudprovider.NoticeEventStatus:
		return "has a scheduled event (" + n.State + ")"
	}
	return string(n.Kind)
}
