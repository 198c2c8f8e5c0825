package interruption

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
)

// HealthPoller polls a provider's instance health checks (cloudprovider.HealthChecker; the
// AWS provider's DescribeInstanceStatus) every interval, as upstream's AWS provider does, and
// acts on each unhealthy instance that has a NodeClaim as on an interruption notice: a failed
// instance or system status check deletes the NodeClaim with its termination timestamp set to
// now (the instance is broken: its pods are not drained gracefully), a scheduled event deletes
// it to be drained. Each instance is counted once per failing check for as long as the check
// keeps failing (karpenter_interruption_instance_status_unhealthy_total). It runs on the
// leader only.
type HealthPoller struct {
	handler
	checker  cloudprovider.HealthChecker
	interval time.Duration
	// seen are the instances and checks found failing at the last poll.
	seen map[unhealthy]bool
}

type unhealthy struct {
	instance string
	kind     cloudprovider.NoticeKind
}

// NewHealthPoller builds the poller; add it to the manager (it is a Runnable).
func NewHealthPoller(c client.Client, cloud cloudprovider.CloudProvider, checker cloudprovider.HealthChecker, recorder events.EventRecorder, interval time.Duration) *HealthPoller {
	return &HealthPoller{handler: handler{client: c, cloud: cloud, recorder: recorder}, checker: checker, interval: interval, seen: map[unhealthy]bool{}}
}

// NeedLeaderElection is true: one replica polls.
func (h *HealthPoller) NeedLeaderElection() bool { return true }

// Start polls every interval until ctx ends; a failed poll is logged and tried again at the
// next one.
func (h *HealthPoller) Start(ctx context.Context) error {
	ticker := time.NewTicker(h.interval)
	defer ticker.Stop()
	for {
		if err := h.Poll(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "instance health checks")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Poll reads the unhealthy instances once and acts on those with a NodeClaim.
func (h *HealthPoller) Poll(ctx context.Context) error {
	notices, err := h.checker.UnhealthyInstances(ctx)
	if err != nil {
		return err
	}
	now := map[unhealthy]bool{}
	var errs []error
	for _, n := range notices {
		found, err := h.act(ctx, n)
		if err != nil {
			errs = append(errs, err)
		}
		if !found {
			continue // not an instance of this cluster's NodeClaims
		}
		for _, id := range n.InstanceIDs {
			k := unhealthy{id, n.Kind}
			now[k] = true
			if !h.seen[k] {
				metrics.InstanceStatusUnhealthy.WithLabelValues(string(n.Kind)).Inc()
				log.FromContext(ctx).Info("instance health check failed", "instance", id, "category", n.Kind, "since", n.Sent)
			}
		}
	}
	// An instance that recovers and fails again counts again.
	h.seen = now
	return errors.Join(errs...)
}
