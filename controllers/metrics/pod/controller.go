// Package pod observes karpenter_pods_startup_duration_seconds: the time from a pod's creation
// until it is Ready, for pods on nodes Karpenter launched. It only reads.
package pod

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// Controller records each pod's startup once.
type Controller struct {
	client client.Client

	mu       sync.Mutex
	observed map[types.UID]bool
}

// NewController builds the pod startup metric controller.
func NewController(c client.Client) *Controller {
	return &Controller{client: c, observed: map[types.UID]bool{}}
}

// Register watches pods.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("metrics.pod").WithOptions(ratelimit.Options(1)).For(&corev1.Pod{}).Complete(c)
}

// Reconcile observes a pod that became Ready on a Karpenter node, and forgets deleted pods.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := c.client.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			// A deleted pod's UID is not known here; the set is bounded instead.
			c.mu.Lock()
			if len(c.observed) > 100000 {
				c.observed = map[types.UID]bool{}
			}
			c.mu.Unlock()
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	c.mu.Lock()
	seen := c.observed[pod.UID]
	c.mu.Unlock()
	if seen || pod.Spec.NodeName == "" {
		return reconcile.Result{}, nil
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type != corev1.PodReady || cond.Status != corev1.ConditionTrue {
			continue
		}
		node := &corev1.Node{}
		if err := c.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		if node.Labels[karpv1.NodePoolLabelKey] == "" {
			return reconcile.Result{}, nil
		}
		metrics.PodsStartupDuration.Observe(cond.LastTransitionTime.Sub(pod.CreationTimestamp.Time).Seconds())
		c.mu.Lock()
		c.observed[pod.UID] = true
		c.mu.Unlock()
	}
	return reconcile.Result{}, nil
}
