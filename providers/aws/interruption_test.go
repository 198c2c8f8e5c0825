package aws_test

import (
	"testing"
	"time"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/providers/aws"
)

func TestParseMessage(t *testing.T) {
	for name, tc := range map[string]struct {
		body     string
		kind     cloudprovider.NoticeKind
		ids      string
		deadline time.Time
		err      bool
	}{
		"spot interruption": {body: `{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-12-01T10:00:00Z","detail":{"instance-id":"i-1"}}`,
			kind: cloudprovider.NoticeSpotInterruption, ids: "i-1", deadline: time.Date(2026, 12, 1, 10, 2, 0, 0, time.UTC)},
		"capacity reservation interruption": {body: `{"source":"aws.ec2","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","detail":{"instance-id":"i-6","instance-action":"terminate"}}`,
			kind: cloudprovider.NoticeCapacityReservationInterruption, ids: "i-6"},
		"rebalance": {body: `{"source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","detail":{"instance-id":"i-2"}}`, kind: cloudprovider.NoticeRebalance, ids: "i-2"},
		"terminated": {body: `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-3","state":"terminated"}}`,
			kind: cloudprovider.NoticeStateChange, ids: "i-3"},
		"shutting down": {body: `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-3","state":"shutting-down"}}`,
			kind: cloudprovider.NoticeStateChange, ids: "i-3"},
		"pending is nothing": {body: `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-3","state":"pending"}}`,
			kind: cloudprovider.NoticeNoOp, ids: "i-3"},
		"scheduled change": {body: `{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-4"},{"entityValue":"i-5"}]}}`,
			kind: cloudprovider.NoticeScheduledChange, ids: "i-4,i-5"},
		"another service's health event": {body: `{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"RDS","eventTypeCategory":"scheduledChange"}}`, kind: cloudprovider.NoticeNoOp},
		"not JSON":                       {body: `hello`, err: true},
		"another event":                  {body: `{"source":"aws.s3","detail-type":"Object Created","detail":{}}`, err: true},
		"a warning without an instance":  {body: `{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{}}`, err: true},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := aws.ParseMessage(tc.body)
			if tc.err {
				if err == nil {
					t.Fatalf("want an error, got %+v", n)
				}
				return
			}
			ids := ""
			for i, id := range n.InstanceIDs {
				if i > 0 {
					ids += ","
				}
				ids += id
			}
			if err != nil || n.Kind != tc.kind || ids != tc.ids || !n.Deadline.Equal(tc.deadline) {
				t.Fatalf("got %+v (%v); want %s %s %v", n, err, tc.kind, tc.ids, tc.deadline)
			}
		})
	}
}
