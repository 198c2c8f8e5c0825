package aws

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// UnhealthyThreshold is how long an instance's or its host's status check must have failed
// before the instance is reported unhealthy, as upstream's AWS provider waits (a check can
// fail briefly while an instance boots); a scheduled event is reported at once.
const UnhealthyThreshold = 2 * time.Minute

// statusFilters are the DescribeInstanceStatus calls of one poll, as upstream's: impaired
// instance checks, impaired system checks, and the scheduled events that take an instance
// away. EC2 then returns only the instances that are unhealthy, not every running one.
var statusFilters = [][]ec2types.Filter{
	{{Name: aws.String("instance-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("system-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("event.code"), Values: []string{string(ec2types.EventCodeInstanceReboot), string(ec2types.EventCodeSystemReboot),
		string(ec2types.EventCodeSystemMaintenance), string(ec2types.EventCodeInstanceRetirement), string(ec2types.EventCodeInstanceStop)}}},
}

// UnhealthyInstances implements cloudprovider.HealthChecker with EC2's status checks (docs/aws.md,
// "Instance status checks"): a notice per instance and failing category, the instance check
// (NoticeInstanceStatus) and the system check (NoticeSystemStatus) once failed for
// UnhealthyThreshold, and a scheduled event not completed or canceled (NoticeEventStatus,
// its code as State). It needs ec2:DescribeInstanceStatus.
func (p *Provider) UnhealthyInstances(ctx context.Context) ([]cloudprovider.Notice, error) {
	now := time.Now()
	seen := map[string]bool{}
	var out []cloudprovider.Notice
	for _, filters := range statusFilters {
		pages := ec2.NewDescribeInstanceStatusPaginator(p.clients.EC2, &ec2.DescribeInstanceStatusInput{Filters: filters})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing instance status checks: %w", err)
			}
			for _, s := range page.InstanceStatuses {
				id := aws.ToString(s.InstanceId)
				if seen[id] {
					continue
				}
				seen[id] = true
				out = append(out, unhealthyChecks(id, s, now)...)
			}
		}
	}
	return out, nil
}

// unhealthyChecks are the notices one instance's status gives.
func unhealthyChecks(id string, s ec2types.InstanceStatus, now time.Time) []cloudprovider.Notice {
	var out []cloudprovider.Notice
	failed := func(kind cloudprovider.NoticeKind, summary *ec2types.InstanceStatusSummary) {
		if summary == nil {
			return
		}
		var since time.Time
		failing := false
		for _, d := range summary.Details {
			if d.Status != ec2types.StatusTypeFailed {
				continue
			}
			at := aws.ToTime(d.ImpairedSince) // unknown: failing for long enough
			if now.Sub(at) < UnhealthyThreshold {
				continue
			}
			if !failing || at.Before(since) {
				since = at
			}
			failing = true
		}
		if failing {
			out = append(out, cloudprovider.Notice{Kind: kind, InstanceIDs: []string{id}, Sent: since})
		}
	}
	failed(cloudprovider.NoticeInstanceStatus, s.InstanceStatus)
	failed(cloudprovider.NoticeSystemStatus, s.SystemStatus)
	for _, e := range s.Events {
		// EC2 keeps an event a while after it completed or was canceled, its description
		// then starting with "[Completed]" or "[Canceled]".
		if d := aws.ToString(e.Description); strings.HasPrefix(d, "[Completed]") || strings.HasPrefix(d, "[Canceled]") {
			continue
		}
		out = append(out, cloudprovider.Notice{Kind: cloudprovider.NoticeEventStatus, InstanceIDs: []string{id}, State: string(e.Code),
			Deadline: aws.ToTime(e.NotBefore)})
		break // one notice per category, as the checks above
	}
	return out
}
