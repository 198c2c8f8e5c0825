package disruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// RebootHistory remembers the reboots repair committed, by NodeClaim, for
// methods.RebootHistoryWindow: a node rebooted methods.RebootsBeforeReplacement times in that
// window is replaced the next time it is unhealthy. It lives in the leader's memory; a new
// leader counts at least one reboot for a NodeClaim whose Rebooting condition changed within
// the window, so a failover costs at most one more reboot before the replacement.
type RebootHistory struct {
	mu     sync.Mutex
	recent map[types.UID][]time.Time
}

// NewRebootHistory returns an empty history.
func NewRebootHistory() *RebootHistory {
	return &RebootHistory{recent: map[types.UID][]time.Time{}}
}

// Record counts a reboot committed at now.
func (h *RebootHistory) Record(uid types.UID, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recent[uid] = append(within(h.recent[uid], now), now)
}

// Count is how many reboots of the NodeClaim were committed within the window before now.
func (h *RebootHistory) Count(nc *karpv1.NodeClaim, now time.Time) int {
	h.mu.Lock()
	kept := within(h.recent[nc.UID], now)
	if len(kept) == 0 {
		delete(h.recent, nc.UID)
	} else {
		h.recent[nc.UID] = kept
	}
	h.mu.Unlock()
	n := len(kept)
	if cond := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeRebooting); n == 0 && cond != nil &&
		now.Sub(cond.LastTransitionTime.Time) < methods.RebootHistoryWindow {
		n = 1
	}
	return n
}

func within(times []time.Time, now time.Time) []time.Time {
	out := times[:0:0]
	for _, t := range times {
		if now.Sub(t) < methods.RebootHistoryWindow {
			out = append(out, t)
		}
	}
	return out
}

// reboot commits a reboot command: the NodeClaim's Rebooting condition True with
// RebootRequested (controllers/nodeclaim/reboot carries it out), its DisruptionReason
// Unhealthy, and the drain's bound in karpenter.sh/reboot-termination-grace-period. Written
// with the resourceVersion read, and not at all when a reboot is in progress already: a pass
// that read a stale model cannot commit the same reboot twice.
func (o *Orchestrator) reboot(ctx context.Context, cmd *command) error {
	for _, c := range cmd.candidates {
		nc := &karpv1.NodeClaim{}
		if err := o.client.Get(ctx, client.ObjectKey{Name: c.nodeClaim}, nc); err != nil {
			return client.IgnoreNotFound(err)
		}
		if nc.DeletionTimestamp != nil || meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRebooting) {
			continue
		}
		base := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		delete(nc.Annotations, karpv1.RebootPreBootIDAnnotationKey)
		delete(nc.Annotations, karpv1.RebootTerminationGracePeriodAnnotationKey)
		if cmd.rebootDrain != nil {
			nc.Annotations[karpv1.RebootTerminationGracePeriodAnnotationKey] = cmd.rebootDrain.String()
		}
		if err := o.client.Patch(ctx, nc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("annotating nodeclaim %s for its reboot: %w", nc.Name, err)
		}
		base = nc.DeepCopy()
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeRebooting, Status: metav1.ConditionTrue,
			Reason: karpv1.RebootReasonRequested, Message: "rebooting for " + cmd.condition, ObservedGeneration: nc.Generation,
			LastTransitionTime: metav1.NewTime(o.clock.Now())})
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
			Reason: string(cmd.reason), Message: fmt.Sprintf("rebooted by command %s for %s", cmd.id, cmd.condition), ObservedGeneration: nc.Generation})
		if err := o.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("committing the reboot of nodeclaim %s: %w", nc.Name, err)
		}
		if o.reboots != nil {
			o.reboots.Record(nc.UID, o.clock.Now())
		}
		metrics.NodeClaimsUnhealthyDisrupted.WithLabelValues(snakeCase(cmd.condition), c.nodePool, c.capacityType, c.imageID, c.terminationMode).Inc()
		o.event(c, corev1.EventTypeNormal, "DisruptionRebooting", fmt.Sprintf("Rebooting node in place: %s (%s)", cmd.reason, cmd.condition))
		log.FromContext(ctx).Info("committed node reboot", "node", c.node, "NodeClaim", nc.Name, "condition", cmd.condition)
	}
	return nil
}
