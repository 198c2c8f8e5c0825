package interruption

import (
	"context"
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
)

// QueueConsumer reads a provider's interruption queue (the AWS provider's SQS queue) and acts
// on each notice as the node-annotation path does: a Spot interruption, a stop or termination,
// or a scheduled change deletes the instance's NodeClaim at once, and a Spot interruption also
// marks its offering unavailable; a rebalance recommendation is an Event; a message it cannot
// read is deleted, logged and counted. It runs on the leader only.
type QueueConsumer struct {
	handler
	queue cloudprovider.NoticeQueue
}

// NewQueueConsumer builds the consumer; add it to the manager (it is a Runnable).
func NewQueueConsumer(c client.Client, cloud cloudprovider.CloudProvider, q cloudprovider.NoticeQueue, recorder events.EventRecorder) *QueueConsumer {
	return &QueueConsumer{handler: handler{client: c, cloud: cloud, recorder: recorder}, queue: q}
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
	if n.Err != nil {
		metrics.InterruptionMessageErrors.Inc()
		log.FromContext(ctx).Info("interruption queue: deleting a message that is not a notice", "error", n.Err.Error())
		return nil
	}
	metrics.InterruptionMessages.WithLabelValues(string(n.Kind)).Inc()
	if n.Kind == cloudprovider.NoticeNoOp {
		return nil
	}
	metrics.InterruptionsReceived.WithLabelValues(n.MessageType()).Inc()
	_, err := q.act(ctx, n)
	return err
}
