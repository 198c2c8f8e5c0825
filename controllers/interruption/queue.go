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

// QueueConsumer reads a provider's interruption queue (the AWS provider's SQS queue) and acts
// on each notice as the node-annotation path does: a Spot interruption, a stop or termination,
// or a scheduled change deletes the instance's NodeClaim at once, and a Spot interruption also
// marks its offering unavailable; a rebalance recommendation is an Event; a message it cannot
// read is deleted, logged and counted. It runs on the leader only.
type QueueConsumer struct {
	client   client.Client
	cloud    cloudprovider.CloudProvider
	queue    cloudprovider.NoticeQueue
	recorder events.EventRecorder
}

// NewQueueConsumer builds the consumer; add it to the manager (it is a Runnable).
func NewQueueConsumer(c client.Client, cloud cloudprovider.CloudProvider, q cloudprovider.NoticeQueue, recorder events.EventRecorder) *QueueConsumer {
	return &QueueConsumer{client: c, cloud: cloud, queue: q, recorder: recorder}
}

// NeedLeaderElection is true: one replica reads the queue.
func (q *QueueConsumer) NeedLeaderElection() bool { return true }

// Start polls until ctx ends; a failed receive is retried after a pause.
func (q *QueueConsumer) Start(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := q.Poll(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "interruption queue")
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	return nil
}

// Poll receives once and handles what came.
func (q *QueueConsumer) Poll(ctx context.Context) error {
	notices, err := q.queue.Receive(ctx)
	if err != nil {
		return err
	}
	for _, n := range notices {
		if err := q.Handle(ctx, n); err != nil {
			log.FromContext(ctx).Error(err, "interruption notice", "kind", n.Kind, "instances", n.InstanceIDs)
			continue // the message stays in the queue and comes back
		}
		if n.Err == nil && n.Kind != cloudprovider.NoticeNoOp && !n.Sent.IsZero() {
			// From the cloud's event to its handling, as upstream observes it.
			metrics.InterruptionMessageLatency.Observe(time.Since(n.Sent).Seconds())
		}
		if err := q.queue.Done(ctx, n); err != nil {
			return err
		}
		metrics.InterruptionMessagesDeleted.Inc()
	}
	return nil
}

// Handle acts on one notice; an error leaves it in the queue to try again.
func (q *QueueConsumer) Handle(ctx context.Context, n cloudprovider.Notice) error {
	logger := log.FromContext(ctx)
	if n.Err != nil {
		metrics.InterruptionMessageErrors.Inc()
		logger.Info("interruption queue: deleting a message that is not a notice", "error", n.Err.Error())
		return nil
	}
	metrics.InterruptionMessages.WithLabelValues(string(n.Kind)).Inc()
	if n.Kind == cloudprovider.NoticeNoOp {
		return nil
	}
	metrics.InterruptionsReceived.WithLabelValues(n.MessageType()).Inc()
	for _, id := range n.InstanceIDs {
		claims, err := index.NodeClaimsByInstanceID(ctx, q.client, id)
		if err != nil {
			return err
		}
		for i := range claims {
			nc := &claims[i]
			if n.Kind == cloudprovider.NoticeRebalance {
				q.recorder.Eventf(nc, nil, corev1.EventTypeNormal, "RebalanceRecommendation", "Disruption",
					"EC2 recommends rebalancing instance %s: it is at elevated risk of Spot interruption", id)
				continue
			}
			if nc.DeletionTimestamp != nil {
				continue
			}
			if n.Kind == cloudprovider.NoticeSpotInterruption {
				if r, ok := q.cloud.(cloudprovider.CapacityReporter); ok {
					r.MarkUnavailable(nc.Labels[karpv1.LabelInstanceType], nc.Labels[karpv1.LabelTopologyZone], karpv1.CapacityTypeSpot)
				}
			}
			if err := q.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting nodeclaim %s of instance %s: %w", nc.Name, id, err)
			}
			metrics.Interrupted(nc, n.MessageType())
			why := noticeReason(n)
			logger.Info("interruption: deleting the nodeclaim", "NodeClaim", nc.Name, "instance", id, "kind", n.Kind, "deadline", n.Deadline)
			q.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "Interrupted", "Disruption", "Instance %s %s: draining its node now", id, why)
		}
	}
	return nil
}

func noticeReason(n cloudprovider.Notice) string {
	switch n.Kind {
	case cloudprovider.NoticeSpotInterruption:
		return "will be reclaimed (Spot interruption) at " + n.Deadline.UTC().Format(time.RFC3339)
	case cloudprovider.NoticeStateChange:
		return "is " + n.State
	case cloudprovider.NoticeScheduledChange:
		return "has a scheduled change (AWS Health)"
	}
	return string(n.Kind)
}
