package aws_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/interruption"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/metrics/metricstest"
	"github.com/karpenter-policy/karpenter/providers/aws"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/awsemu"
	"github.com/karpenter-policy/karpenter/test/env"
)

// marks remembers what the consumer told the provider had no capacity.
type marks struct {
	aws.Provider
	marked []string
}

func (m *marks) MarkUnavailable(instanceType, zone, capacityType string) {
	m.marked = append(m.marked, instanceType+"/"+zone+"/"+capacityType)
}

func (m *marks) MarkReservationUnavailable(id string) {
	m.marked = append(m.marked, "reservation/"+id)
}

func TestInterruptionQueue(t *testing.T) {
	e := awsemu.Start(t, "local")
	ctx := context.Background()
	clients, err := aws.NewClients(ctx, aws.Settings{ClusterName: "local", Region: e.Region, Endpoint: e.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	queue := aws.NewQueue(clients, e.Cluster.Queue)
	queue.Wait = time.Second
	claim := func(name, instance, ct string) *karpv1.NodeClaim {
		nc := test.NodeClaim(func(nc *karpv1.NodeClaim) {
			nc.Name = name
			nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.LabelInstanceType: "m5.large", karpv1.LabelTopologyZone: "us-west-2a", karpv1.CapacityTypeLabelKey: ct}
		})
		if err := testEnv.Client.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		nc.Status.ProviderID = "aws:///us-west-2a/" + instance
		if err := testEnv.Client.Status().Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	spot, stopped, retired, rebalanced, reclaimed := claim("spot", "i-0spot", "spot"), claim("stopped", "i-0stopped", "on-demand"),
		claim("retired", "i-0retired", "on-demand"), claim("rebalanced", "i-0rebalance", "spot"), claim("reclaimed", "i-0reserved", "reserved")
	reclaimed.Labels[karpv1.LabelCapacityReservationID] = "cr-0interruptible"
	if err := testEnv.Client.Update(ctx, reclaimed); err != nil {
		t.Fatal(err)
	}
	send := func(body string) {
		if _, err := clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: awssdk.String(e.Cluster.QueueURL), MessageBody: awssdk.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	send(fmt.Sprintf(`{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":%q,"detail":{"instance-id":"i-0spot","instance-action":"terminate"}}`, now))
	send(fmt.Sprintf(`{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":%q,"detail":{"instance-id":"i-0stopped","state":"stopping"}}`, now))
	send(`{"version":"0","source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","startTime":"Sat, 05 Dec 2026 10:00:00 GMT","affectedEntities":[{"entityValue":"i-0retired"}]}}`)
	send(fmt.Sprintf(`{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","time":%q,"detail":{"instance-id":"i-0rebalance"}}`, now))
	send(fmt.Sprintf(`{"version":"0","source":"aws.ec2","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","time":%q,"detail":{"instance-id":"i-0reserved","instance-action":"terminate"}}`, now))
	send(fmt.Sprintf(`{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":%q,"detail":{"instance-id":"i-0spot","state":"running"}}`, now))
	send(`this is not an event`)

	provider := &marks{}
	recorder := events.NewFakeRecorder(20)
	consumer := interruption.NewQueueConsumer(env.Indexed(testEnv.Client), provider, queue, recorder)
	errorsBefore := testutil.ToFloat64(metrics.InterruptionMessageErrors)
	deletedBefore := testutil.ToFloat64(metrics.InterruptionMessagesDeleted)
	latencyBefore, _ := metricstest.Observations(t, metrics.InterruptionMessageLatency, nil)
	// As upstream's AWS provider counts them: by message type, no_op not counted, and each
	// NodeClaim deleted as disrupted with the message type as reason.
	received := map[string]float64{"spot_interrupted": 1, "instance_stopped": 1, "scheduled_change": 1, "rebalance_recommendation": 1, "capacity_reservation_interrupted": 1, "no_op": 0}
	receivedBefore := map[string]float64{}
	for k := range received {
		receivedBefore[k] = testutil.ToFloat64(metrics.InterruptionsReceived.WithLabelValues(k))
	}
	disrupted := map[[2]string]float64{{"spot_interrupted", "spot"}: 1, {"instance_stopped", "on-demand"}: 1, {"scheduled_change", "on-demand"}: 1,
		{"capacity_reservation_interrupted", "reserved"}: 1}
	disruptedBefore := map[[2]string]float64{}
	for k := range disrupted {
		disruptedBefore[k] = testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues(k[0], "default", k[1], "", "graceful"))
	}
	for i := 0; i < 5; i++ {
		if err := consumer.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(nc *karpv1.NodeClaim) bool {
		err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(nc), &karpv1.NodeClaim{})
		return client.IgnoreNotFound(err) == nil && err != nil
	}
	for _, nc := range []*karpv1.NodeClaim{spot, stopped, retired, reclaimed} {
		if !gone(nc) {
			t.Errorf("NodeClaim %s was not deleted", nc.Name)
		}
	}
	if gone(rebalanced) {
		t.Error("a rebalance recommendation deleted its NodeClaim; it is an Event only")
	}
	if strings.Join(provider.marked, ",") != "m5.large/us-west-2a/spot,reservation/cr-0interruptible" {
		t.Errorf("offerings marked unavailable: %v; want the interrupted Spot offering and the interrupted reservation", provider.marked)
	}
	if got := testutil.ToFloat64(metrics.InterruptionMessageErrors) - errorsBefore; got != 1 {
		t.Errorf("%v unreadable messages counted, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.InterruptionMessagesDeleted) - deletedBefore; got != 7 {
		t.Errorf("karpenter_interruption_deleted_messages_total rose by %v, want 7 (every message sent)", got)
	}
	for k, want := range received {
		if got := testutil.ToFloat64(metrics.InterruptionsReceived.WithLabelValues(k)) - receivedBefore[k]; got != want {
			t.Errorf("karpenter_interruption_received_messages_total{message_type=%q} rose by %v, want %v", k, got, want)
		}
	}
	for k, want := range disrupted {
		if got := testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues(k[0], "default", k[1], "", "graceful")) - disruptedBefore[k]; got != want {
			t.Errorf("karpenter_nodeclaims_disrupted_total{reason=%q,capacity_type=%q} rose by %v, want %v", k[0], k[1], got, want)
		}
	}
	// The four events acted on that carry a time (the Health event has none; the no_op and
	// the unreadable message are not observed).
	if n, _ := metricstest.Observations(t, metrics.InterruptionMessageLatency, nil); n-latencyBefore != 4 {
		t.Errorf("karpenter_interruption_message_queue_duration_seconds observed %d notices, want 4", n-latencyBefore)
	}
	close(recorder.Events)
	var seen []string
	for ev := range recorder.Events {
		seen = append(seen, ev)
	}
	joined := strings.Join(seen, "\n")
	if n := strings.Count(joined, "Warning TerminatingOnInterruption Interruption triggered termination for the NodeClaim"); n != 4 {
		t.Errorf("%d TerminatingOnInterruption events, want one per NodeClaim deleted (4):\n%s", n, joined)
	}
	// Upstream's reasons: one for the notice, and TerminatingOnInterruption for each NodeClaim
	// deleted (these NodeClaims have no Node).
	for _, want := range []string{"Warning SpotInterrupted Instance i-0spot will be reclaimed (Spot interruption)", "Warning InstanceStopping Instance i-0stopped is stopping",
		"Warning InstanceUnhealthy Instance i-0retired has a scheduled change",
		"Warning CapacityReservationInstanceInterrupted Instance i-0reserved is taken back by its capacity reservation", "Normal SpotRebalanceRecommendation Instance i-0rebalance is at elevated risk"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no event %q in:\n%s", want, joined)
		}
	}
	left, err := clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: awssdk.String(e.Cluster.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 0})
	if err != nil || len(left.Messages) != 0 {
		t.Errorf("messages left in the queue: %d (%v)", len(left.Messages), err)
	}
}
