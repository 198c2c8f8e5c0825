package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/provisioning"
	"github.com/karpenter-policy/karpenter/controllers/state"
)

// ReplacementTimeout bounds how long a command waits for its replacements to initialize
// before it rolls back.
const ReplacementTimeout = 5 * time.Minute

// Queue carries commands out; it is the only part of the package that writes. For each command:
// taint the candidates karpenter.sh/disrupted:NoSchedule and set their NodeClaims'
// DisruptionReason condition; create the replacements and nominate the pods that go to them;
// wait until every replacement is Initialized; only then delete the candidates (termination
// drains them within their PDBs and terminationGracePeriod). A replacement that fails to
// launch or initialize in time rolls the command back: the candidates are untainted and the
// replacements not yet initialized deleted.
type Queue struct {
	client   client.Client
	cluster  *state.Cluster
	recorder events.EventRecorder
	// poll is how often a command looks at its replacements.
	poll time.Duration
}

// cacheGrace is how long a replacement just created may be missing from the cache before
// the queue takes it for deleted.
const cacheGrace = 30 * time.Second

// NewQueue returns the queue.
func NewQueue(c client.Client, cluster *state.Cluster, recorder events.EventRecorder) *Queue {
	return &Queue{client: c, cluster: cluster, recorder: recorder, poll: 2 * time.Second}
}

// Execute carries one command out, start to end.
func (q *Queue) Execute(ctx context.Context, c *Cluster, cmd *Command) error {
	logger := log.FromContext(ctx).WithValues("reason", cmd.Reason, "decision", cmd.Decision)
	for _, cand := range cmd.Candidates {
		if err := q.markDisrupting(ctx, cand, cmd.Reason); err != nil {
			q.rollback(ctx, cmd, nil)
			return err
		}
	}
	var created []*karpv1.NodeClaim
	for _, r := range cmd.Replacements {
		np := c.NodePools[r.NodePool]
		nc := provisioning.NodeClaimFor(np.NodePool, r)
		if err := q.client.Create(ctx, nc); err != nil {
			q.rollback(ctx, cmd, created)
			return fmt.Errorf("creating replacement for nodepool %s: %w", r.NodePool, err)
		}
		q.cluster.Created(nc)
		metrics.NodeClaimsCreated.WithLabelValues("disruption", r.NodePool).Inc()
		created = append(created, nc)
		for _, m := range cmd.Moves {
			if m.To == r.Hostname {
				q.cluster.Nominate(m.Pod, nc.Name)
			}
		}
	}
	if len(created) > 0 {
		logger.Info("launching replacements", "nodes", names(cmd.Candidates), "replacements", len(created))
		if err := q.waitInitialized(ctx, created); err != nil {
			q.rollback(ctx, cmd, created)
			for _, cand := range cmd.Candidates {
				q.event(cand, corev1.EventTypeWarning, "DisruptionRolledBack", fmt.Sprintf("%s: replacements did not initialize: %v", cmd.Reason, err))
			}
			return fmt.Errorf("%s of %v rolled back: %w", cmd.Reason, names(cmd.Candidates), err)
		}
	}
	for _, cand := range cmd.Candidates {
		if err := q.remove(ctx, cand); err != nil {
			return err
		}
		q.event(cand, corev1.EventTypeNormal, "DisruptionTerminating", fmt.Sprintf("Disrupting node: %s (%s, saving $%.4f/hour)", cmd.Reason, cmd.Decision, cmd.Savings()))
	}
	metrics.DisruptionDecisions.WithLabelValues(string(cmd.Decision), string(cmd.Reason), cmd.ConsolidationType).Inc()
	logger.Info("disrupted", "nodes", names(cmd.Candidates), "savingsPerHour", cmd.Savings())
	return nil
}

// markDisrupting taints the candidate's node and sets its NodeClaim's DisruptionReason.
func (q *Queue) markDisrupting(ctx context.Context, cand *Candidate, r Reason) error {
	node := &corev1.Node{}
	if err := q.client.Get(ctx, client.ObjectKey{Name: cand.Name()}, node); err != nil {
		return fmt.Errorf("getting node %s: %w", cand.Name(), err)
	}
	if !hasTaint(node, karpv1.DisruptedTaintKey) {
		base := node.DeepCopy()
		node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		if err := q.client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("tainting node %s: %w", node.Name, err)
		}
	}
	if nc := cand.NodeClaim; nc != nil {
		fresh := &karpv1.NodeClaim{}
		if err := q.client.Get(ctx, client.ObjectKeyFromObject(nc), fresh); err != nil {
			return fmt.Errorf("getting nodeclaim %s: %w", nc.Name, err)
		}
		base := fresh.DeepCopy()
		meta.SetStatusCondition(&fresh.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
			Reason: string(r), Message: "disrupted: " + string(r), ObservedGeneration: fresh.Generation})
		if err := q.client.Status().Patch(ctx, fresh, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("setting the disruption reason of nodeclaim %s: %w", nc.Name, err)
		}
	}
	return nil
}

// waitInitialized waits until every replacement is Initialized, failing when one is deleted
// or ReplacementTimeout passes.
func (q *Queue) waitInitialized(ctx context.Context, created []*karpv1.NodeClaim) error {
	// The client reads the informer cache, which may not hold a NodeClaim created a moment
	// ago: one not found is deleted only once it has been seen, or after cacheGrace.
	seen, start := map[string]bool{}, time.Now()
	return wait.PollUntilContextTimeout(ctx, q.poll, ReplacementTimeout, true, func(ctx context.Context) (bool, error) {
		for _, nc := range created {
			fresh := &karpv1.NodeClaim{}
			if err := q.client.Get(ctx, client.ObjectKeyFromObject(nc), fresh); err != nil {
				if client.IgnoreNotFound(err) == nil && (seen[nc.Name] || time.Since(start) > cacheGrace) {
					return false, fmt.Errorf("replacement %s was deleted (launch failed)", nc.Name)
				}
				return false, nil
			}
			seen[nc.Name] = true
			if fresh.DeletionTimestamp != nil {
				return false, fmt.Errorf("replacement %s is being deleted", nc.Name)
			}
			if !meta.IsStatusConditionTrue(fresh.Status.Conditions, karpv1.ConditionTypeInitialized) {
				return false, nil
			}
		}
		return true, nil
	})
}

// remove deletes the candidate's NodeClaim, or its Node when it has none.
func (q *Queue) remove(ctx context.Context, cand *Candidate) error {
	var obj client.Object = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cand.Name()}}
	if cand.NodeClaim != nil {
		obj = &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: cand.NodeClaim.Name}}
	}
	if err := q.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", obj.GetName(), err)
	}
	return nil
}

// rollback untaints the candidates, clears their DisruptionReason, and deletes the
// replacements not yet initialized.
func (q *Queue) rollback(ctx context.Context, cmd *Command, created []*karpv1.NodeClaim) {
	for _, cand := range cmd.Candidates {
		if err := q.unmark(ctx, cand.Name(), cand.NodeClaim); err != nil {
			log.FromContext(ctx).Error(err, "rolling back a disruption", "Node", cand.Name())
		}
	}
	for _, nc := range created {
		fresh := &karpv1.NodeClaim{}
		if q.client.Get(ctx, client.ObjectKeyFromObject(nc), fresh) == nil && !meta.IsStatusConditionTrue(fresh.Status.Conditions, karpv1.ConditionTypeInitialized) {
			_ = q.client.Delete(ctx, fresh)
		}
	}
}

// unmark removes the disrupted taint from a node and the DisruptionReason from its NodeClaim.
func (q *Queue) unmark(ctx context.Context, nodeName string, nc *karpv1.NodeClaim) error {
	node := &corev1.Node{}
	if err := q.client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if hasTaint(node, karpv1.DisruptedTaintKey) {
		base := node.DeepCopy()
		var kept []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != karpv1.DisruptedTaintKey {
				kept = append(kept, t)
			}
		}
		node.Spec.Taints = kept
		if err := q.client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("untainting node %s: %w", node.Name, err)
		}
	}
	if nc == nil {
		return nil
	}
	fresh := &karpv1.NodeClaim{}
	if err := q.client.Get(ctx, client.ObjectKeyFromObject(nc), fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	if meta.FindStatusCondition(fresh.Status.Conditions, karpv1.ConditionTypeDisruptionReason) == nil {
		return nil
	}
	base := fresh.DeepCopy()
	meta.RemoveStatusCondition(&fresh.Status.Conditions, karpv1.ConditionTypeDisruptionReason)
	return q.client.Status().Patch(ctx, fresh, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// CleanStaleTaints untaints the nodes a command left tainted when the manager stopped in its
// middle: tainted nodes whose NodeClaim is not being deleted.
func (q *Queue) CleanStaleTaints(ctx context.Context) error {
	var nodes corev1.NodeList
	if err := q.client.List(ctx, &nodes); err != nil {
		return err
	}
	var claims karpv1.NodeClaimList
	if err := q.client.List(ctx, &claims); err != nil {
		return err
	}
	claimOf := map[string]*karpv1.NodeClaim{}
	for i := range claims.Items {
		claimOf[claims.Items[i].Status.NodeName] = &claims.Items[i]
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		nc := claimOf[n.Name]
		if !hasTaint(n, karpv1.DisruptedTaintKey) || n.DeletionTimestamp != nil || (nc != nil && nc.DeletionTimestamp != nil) {
			continue
		}
		if err := q.unmark(ctx, n.Name, nc); err != nil {
			return err
		}
		log.FromContext(ctx).Info("removed a stale disruption taint", "Node", n.Name)
	}
	return nil
}

func (q *Queue) event(cand *Candidate, kind, reason, msg string) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: cand.Name(), UID: ""}}
	if cand.NodeClaim != nil {
		q.recorder.Eventf(cand.NodeClaim, nil, kind, reason, "Disruption", "%s", msg)
	}
	q.recorder.Eventf(node, nil, kind, reason, "Disruption", "%s", msg)
}

func names(cands []*Candidate) []string {
	out := make([]string, 0, len(cands))
	for _, c := range cands {
		out = append(out, c.Name())
	}
	return out
}
