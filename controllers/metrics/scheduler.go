package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/uuid"
)

var (
	// SchedulerQueueDepth is how many pods the controller's latest solve has left to place,
	// by controller and scheduling_id (one per solve), as upstream's: a new solve removes the
	// earlier solves' series, and the last one stays (at 0 once it finished).
	SchedulerQueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_scheduler_queue_depth", Help: "The number of pods currently waiting to be scheduled.",
	}, []string{"controller", "scheduling_id"})
	// SchedulerUnfinishedWork is how long a solve in progress has run, by controller and
	// scheduling_id; the series goes when the solve ends.
	SchedulerUnfinishedWork = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_scheduler_unfinished_work_seconds", Help: "How many seconds of work has been done that is in progress and hasn't been observed by scheduling_duration_seconds.",
	}, []string{"controller", "scheduling_id"})
	// SchedulerIgnoredPods is how many pending pods the provisioner's last batch left out of
	// its solve because a claim or StorageClass they need does not exist yet (each gets a
	// FailedScheduling event).
	SchedulerIgnoredPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "karpenter_scheduler_ignored_pods_count", Help: "Number of pods ignored during scheduling by Karpenter",
	})
	// SchedulerPendingPodsByZone is how many of the pods the controller's last batch solved
	// are pending in each effective zone (solver.EffectiveZones): a zone, "flexible" or
	// "none". Each batch replaces the last one's series.
	SchedulerPendingPodsByZone = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_scheduler_pending_pods_by_effective_zone_count",
		Help: "Pending pods dimensioned by effective zone constraint, or the intersection of pod-level zone signals, volume topology (PVC zones), and topology constraints. Values: specific zone name (e.g., 'us-west-2a'), 'flexible' (multiple zones), or 'none' (no valid intersection).",
	}, []string{"controller", "zone"})
)

// SetPendingPodsByZone replaces the controller's effective-zone series with counts.
func SetPendingPodsByZone(controller string, counts map[string]int) {
	SchedulerPendingPodsByZone.DeletePartialMatch(prometheus.Labels{"controller": controller})
	for zone, n := range counts {
		SchedulerPendingPodsByZone.WithLabelValues(controller, zone).Set(float64(n))
	}
}

// Solve is one solve's queue-depth and unfinished-work series.
type Solve struct {
	depth, unfinished prometheus.Gauge
	controller, id    string
	start             time.Time
	since             func(time.Time) time.Duration
}

// StartSolve opens a solve of pods pods for the controller under a new scheduling_id; since
// is the controller's clock. Progress then follows the solve, and Done ends it.
func StartSolve(controller string, pods int, now time.Time, since func(time.Time) time.Duration) *Solve {
	SchedulerQueueDepth.DeletePartialMatch(prometheus.Labels{"controller": controller})
	s := &Solve{controller: controller, id: string(uuid.NewUUID()), start: now, since: since}
	s.depth = SchedulerQueueDepth.WithLabelValues(controller, s.id)
	s.unfinished = SchedulerUnfinishedWork.WithLabelValues(controller, s.id)
	s.Progress(pods)
	return s
}

// Progress records that left pods are still to place (solver.Input.Progress).
func (s *Solve) Progress(left int) {
	s.depth.Set(float64(left))
	s.unfinished.Set(s.since(s.start).Seconds())
}

// Done ends the solve: its unfinished work is observed by the scheduling duration now.
func (s *Solve) Done() {
	SchedulerUnfinishedWork.DeleteLabelValues(s.controller, s.id)
}
