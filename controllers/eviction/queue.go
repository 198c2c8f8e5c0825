package eviction

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8spolicyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Backoff is the eviction queue's retry schedule per pod: a pod a
// PodDisruptionBudget keeps (429) or do-not-disrupt holds is tried again after 100 ms, then
// 200 ms, ... at most every 10 s; over all pods, 100 evictions a second in bursts of 1000.
// Upstream Karpenter's eviction queue uses the same per-pod schedule.
var Backoff = ratelimit.Settings{Base: 100 * time.Millisecond, Max: 10 * time.Second, QPS: 100, Burst: 1000}

// Concurrency is how many evictions are in flight at once.
const Concurrency = 50

// Queue evicts pods, each with its own exponential backoff, so that draining nodes
// whose pods a PodDisruptionBudget holds ask the API server ever less often instead of every
// second. A pod is queued once however often its node's drain asks; it leaves the queue when
// the eviction is accepted, when it is gone or replaced by a pod of the same name, or when it
// is terminating. A pod past its node's deadline (see MustDelete) is deleted instead, with the
// grace that is left.
type Queue struct {
	client   client.Client
	recorder events.EventRecorder
	clock    clock.Clock
	source   chan event.TypedGenericEvent[*corev1.Pod]

	mu sync.Mutex
	// items are the queued pods with their node's deadline (nil: none).
	items map[types.NamespacedName]queued
}

type queued struct {
	uid      types.UID
	deadline *time.Time
}

// NewQueue returns the queue; Register it with the manager.
func NewQueue(c client.Client, recorder events.EventRecorder, clk clock.Clock) *Queue {
	return &Queue{client: c, recorder: recorder, clock: clk, items: map[types.NamespacedName]queued{},
		source: make(chan event.TypedGenericEvent[*corev1.Pod], 10000)}
}

// Register adds the queue's controller to the manager.
func (q *Queue) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("node.termination.eviction").
		WithOptions(ratelimit.OptionsWith(Concurrency, Backoff)).
		WatchesRawSource(source.Channel(q.source, handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
			GenericFunc: func(_ context.Context, e event.TypedGenericEvent[*corev1.Pod], w workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				w.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
			},
		})).
		Complete(reconcile.AsReconciler(mgr.GetClient(), q))
}

// Add queues pods for eviction by the deadline (nil: none); a pod queued already keeps its
// place and gets the earlier deadline.
func (q *Queue) Add(deadline *time.Time, pods ...*corev1.Pod) {
	var fresh []*corev1.Pod
	q.mu.Lock()
	for _, p := range pods {
		key := client.ObjectKeyFromObject(p)
		cur, ok := q.items[key]
		if ok && cur.uid == p.UID {
			q.items[key] = queued{uid: p.UID, deadline: earlier(cur.deadline, deadline)}
			continue
		}
		q.items[key] = queued{uid: p.UID, deadline: deadline}
		fresh = append(fresh, p)
	}
	q.mu.Unlock()
	for _, p := range fresh {
		q.source <- event.TypedGenericEvent[*corev1.Pod]{Object: p}
	}
}

// Forget takes pods off the queue (a drain that ended without them, as a reboot's whose bound
// ran out: they stay where they are).
func (q *Queue) Forget(pods ...*corev1.Pod) {
	for _, p := range pods {
		q.done(p)
	}
}

// Len is how many pods are queued.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

func earlier(a, b *time.Time) *time.Time {
	switch {
	case a == nil:
		return b
	case b == nil || a.Before(*b):
		return a
	}
	return b
}

func (q *Queue) done(p *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.items, client.ObjectKeyFromObject(p))
}

// Reconcile evicts or deletes one queued pod.
func (q *Queue) Reconcile(ctx context.Context, p *corev1.Pod) (reconcile.Result, error) {
	q.mu.Lock()
	item, ok := q.items[client.ObjectKeyFromObject(p)]
	q.mu.Unlock()
	if !ok || item.uid != p.UID {
		// Not queued, or another pod of the same name: the queued one is gone.
		if ok {
			q.done(p)
		}
		return reconcile.Result{}, nil
	}
	now := q.clock.Now()
	if MustDelete(p, now, item.deadline) {
		return q.delete(ctx, p, now, *item.deadline)
	}
	if scheduling.IsTerminal(p) || scheduling.IsTerminating(p) {
		q.done(p)
		return reconcile.Result{}, nil
	}
	if holds, until := scheduling.DoNotDisrupt(p, now); holds {
		// Waits for the pod to finish, for its do-not-disrupt duration to run out, or for the
		// deadline, backing off.
		if !until.IsZero() && until.Sub(now) < Backoff.Max {
			return reconcile.Result{RequeueAfter: until.Sub(now)}, nil
		}
		return ratelimit.Again(), nil
	}
	return q.evict(ctx, p)
}

// evict asks the Eviction API, for this very pod (its UID as precondition).
func (q *Queue) evict(ctx context.Context, p *corev1.Pod) (reconcile.Result, error) {
	uid := p.UID
	err := q.client.SubResource("eviction").Create(ctx, p, &k8spolicyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	})
	if err == nil {
		metrics.EvictionRequests.WithLabelValues("200").Inc()
		metrics.PodsDrained.WithLabelValues(q.drainReason(ctx, p)).Inc()
		q.recorder.Eventf(p, nil, corev1.EventTypeNormal, "Evicted", "Drain", "Evicted pod: draining node %s", p.Spec.NodeName)
		q.done(p)
		return reconcile.Result{}, nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		metrics.EvictionRequests.WithLabelValues(strconv.Itoa(int(status.Status().Code))).Inc()
	}
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, or not the pod queued (409: the UID precondition failed).
		q.done(p)
		return reconcile.Result{}, nil
	case apierrors.IsTooManyRequests(err):
		// A PodDisruptionBudget allows no disruption now: try again later, backing off.
		q.recorder.Eventf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.Spec.NodeName}}, p, corev1.EventTypeWarning, "FailedDraining", "Drain",
			"Failed to drain node, evicting pod %s/%s violates a PDB", p.Namespace, p.Name)
		return ratelimit.Again(), nil
	}
	return reconcile.Result{}, fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
}

// delete deletes a pod that must be gone by its node's deadline, granting it what is left.
func (q *Queue) delete(ctx context.Context, p *corev1.Pod, now, deadline time.Time) (reconcile.Result, error) {
	if scheduling.IsTerminating(p) && !p.DeletionTimestamp.After(deadline) {
		q.done(p)
		return reconcile.Result{}, nil
	}
	grace := DeleteGrace(p, now, deadline)
	uid := p.UID
	err := q.client.Delete(ctx, p, &client.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return reconcile.Result{}, fmt.Errorf("deleting pod %s/%s for its node's deadline: %w", p.Namespace, p.Name, err)
	}
	if err == nil {
		metrics.PodsDeletedForDeadline.Inc()
		log.FromContext(ctx).V(1).Info("deleted pod for its node's terminationGracePeriod", "Pod", client.ObjectKeyFromObject(p), "gracePeriodSeconds", grace)
		q.recorder.Eventf(p, nil, corev1.EventTypeWarning, "Disrupted", "Drain",
			"Deleting the pod to accommodate the terminationTime %s of the node. The pod was granted %d seconds of grace-period. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
			deadline.UTC().Format(time.RFC3339), grace)
	}
	q.done(p)
	return reconcile.Result{}, nil
}

// drainReason is why a pod was evicted, as upstream's karpenter_pods_drained_total tells it:
// its node's NodeClaim's disruption reason, metrics.ForcefulTermination when no disruption
// command deleted it, "" when the node or its NodeClaim cannot be found.
func (q *Queue) drainReason(ctx context.Context, p *corev1.Pod) string {
	node := &corev1.Node{}
	if err := q.client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil || node.Spec.ProviderID == "" {
		return ""
	}
	claims, err := index.NodeClaimsByProviderID(ctx, q.client, node.Spec.ProviderID)
	if err != nil || len(claims) == 0 {
		return ""
	}
	if cond := meta.FindStatusCondition(claims[0].Status.Conditions, karpv1.ConditionTypeDisruptionReason); cond != nil && cond.Status == metav1.ConditionTrue {
		return cond.Reason
	}
	return metrics.ForcefulTermination
}
