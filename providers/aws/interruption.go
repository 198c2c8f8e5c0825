package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// event is the part of an EventBridge event read here.
type event struct {
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

// ParseMessage reads one EventBridge message of the interruption queue, as upstream reads
// them: a Spot interruption warning (the instance is reclaimed two minutes after the event),
// an interruptible capacity reservation's interruption warning, a rebalance recommendation, an instance state change (stopping, stopped, shutting-down and
// terminated count; others are no-ops), an AWS Health scheduled change for EC2 instances.
// Anything else is an error; the caller deletes the message.
func ParseMessage(body string) (cloudprovider.Notice, error) {
	var e event
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return cloudprovider.Notice{}, fmt.Errorf("not an EventBridge event: %w", err)
	}
	n := cloudprovider.Notice{Sent: e.Time}
	switch {
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Spot Instance Interruption Warning":
		id, err := instanceOf(e.Detail, "a Spot interruption warning")
		if err != nil {
			return n, err
		}
		n.Kind, n.InstanceIDs, n.Deadline = cloudprovider.NoticeSpotInterruption, []string{id}, e.Time.Add(2*time.Minute)
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Capacity Reservation Instance Interruption Warning":
		id, err := instanceOf(e.Detail, "a capacity reservation interruption warning")
		if err != nil {
			return n, err
		}
		n.Kind, n.InstanceIDs = cloudprovider.NoticeCapacityReservationInterruption, []string{id}
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Instance Rebalance Recommendation":
		id, err := instanceOf(e.Detail, "a rebalance recommendation")
		if err != nil {
			return n, err
		}
		n.Kind, n.InstanceIDs = cloudprovider.NoticeRebalance, []string{id}
	case e.Source == "aws.ec2" && e.DetailType == "EC2 Instance State-change Notification":
		var d struct {
			InstanceID string `json:"instance-id"`
			State      string `json:"state"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil || d.InstanceID == "" || d.State == "" {
			return n, fmt.Errorf("an instance state change without an instance-id or state")
		}
		n.InstanceIDs, n.State = []string{d.InstanceID}, d.State
		switch d.State {
		case "stopping", "stopped", "shutting-down", "terminated":
			n.Kind = cloudprovider.NoticeStateChange
		default:
			n.Kind = cloudprovider.NoticeNoOp
		}
	case e.Source == "aws.health" && e.DetailType == "AWS Health Event":
		var d struct {
			Service           string `json:"service"`
			EventTypeCategory string `json:"eventTypeCategory"`
			StartTime         string `json:"startTime"`
			AffectedEntities  []struct {
				EntityValue string `json:"entityValue"`
			} `json:"affectedEntities"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			return n, fmt.Errorf("an AWS Health event: %w", err)
		}
		if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
			n.Kind = cloudprovider.NoticeNoOp
			return n, nil
		}
		for _, a := range d.AffectedEntities {
			if strings.HasPrefix(a.EntityValue, "i-") {
				n.InstanceIDs = append(n.InstanceIDs, a.EntityValue)
			}
		}
		if len(n.InstanceIDs) == 0 {
			return n, fmt.Errorf("an AWS Health scheduled change naming no instance")
		}
		n.Kind = cloudprovider.NoticeScheduledChange
		if t, err := time.Parse(time.RFC1123, d.StartTime); err == nil {
			n.Deadline = t
		}
	default:
		return n, fmt.Errorf("an event this queue does not handle: source %q, detail-type %q", e.Source, e.DetailType)
	}
	return n, nil
}

// instanceOf reads the instance-id of an EC2 event's detail; what names the event in the
// error.
func instanceOf(detail json.RawMessage, what string) (string, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
	}
	if err := json.Unmarshal(detail, &d); err != nil || d.InstanceID == "" {
		return "", fmt.Errorf("%s without an instance-id", what)
	}
	return d.InstanceID, nil
}

// Queue reads interruption notices from an SQS queue that EventBridge rules send to.
type Queue struct {
	clients *Clients
	name    string
	url     string
	// Wait is how long a receive long-polls.
	Wait time.Duration
}

// NewQueue reads the queue named name (its URL is looked up on first use).
func NewQueue(c *Clients, name string) *Queue {
	return &Queue{clients: c, name: name, Wait: 20 * time.Second}
}

func (q *Queue) queueURL(ctx context.Context) (string, error) {
	if q.url != "" {
		return q.url, nil
	}
	out, err := q.clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)})
	if err != nil {
		return "", fmt.Errorf("interruption queue %s: %w", q.name, err)
	}
	q.url = aws.ToString(out.QueueUrl)
	return q.url, nil
}

// Receive long-polls for up to 10 messages; each parsed, or with the error that it is not a
// notice (its Handle set either way, to delete it).
func (q *Queue) Receive(ctx context.Context) ([]cloudprovider.Notice, error) {
	url, err := q.queueURL(ctx)
	if err != nil {
		return nil, err
	}
	out, err := q.clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		WaitTimeSeconds: int32(q.Wait / time.Second), VisibilityTimeout: 30, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
	if err != nil {
		return nil, fmt.Errorf("receiving from interruption queue %s: %w", q.name, err)
	}
	notices := make([]cloudprovider.Notice, 0, len(out.Messages))
	for _, m := range out.Messages {
		n, err := ParseMessage(aws.ToString(m.Body))
		n.Handle, n.Err = aws.ToString(m.ReceiptHandle), err
		notices = append(notices, n)
	}
	return notices, nil
}

// Done deletes a notice's message from the queue.
func (q *Queue) Done(ctx context.Context, n cloudprovider.Notice) error {
	url, err := q.queueURL(ctx)
	if err != nil {
		return err
	}
	if _, err := q.clients.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(n.Handle)}); err != nil {
		return fmt.Errorf("deleting a message of interruption queue %s: %w", q.name, err)
	}
	return nil
}
