// Package ratelimit gives every controller of the manager its work queue's rate limiter, and
// the one way a reconcile asks to be tried again after a conflict or a transient error:
// through that limiter, never after a fixed pause. A key that keeps failing backs off
// exponentially on its own; all keys together are held to an overall rate, so a cluster-wide
// failure (an API server restarting, a cloud API throttling) does not turn into a storm of
// retries on the shared client. It must not hold state of its own beyond the limiters.
package ratelimit

import (
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Settings are a controller's retry limits: per key, from Base doubling up to Max; over all
// keys, QPS retries a second with bursts of Burst.
type Settings struct {
	Base, Max time.Duration
	QPS       float64
	Burst     int
}

// Default suits controllers that write the API server: a conflict is retried after 100 ms,
// then 200 ms, ... up to five minutes for a key that keeps failing.
var Default = Settings{Base: 100 * time.Millisecond, Max: 5 * time.Minute, QPS: 50, Burst: 500}

// Limiter is the rate limiter of the settings, for queues keyed by K.
func Limiter[K comparable](s Settings) workqueue.TypedRateLimiter[K] {
	return workqueue.NewTypedMaxOfRateLimiter[K](
		workqueue.NewTypedItemExponentialFailureRateLimiter[K](s.Base, s.Max),
		&workqueue.TypedBucketRateLimiter[K]{Limiter: rate.NewLimiter(rate.Limit(s.QPS), s.Burst)},
	)
}

// Options are a controller's options: its concurrency and the Default limiter.
func Options(concurrency int) controller.Options {
	return OptionsWith(concurrency, Default)
}

// OptionsWith are a controller's options with its own limits.
func OptionsWith(concurrency int, s Settings) controller.Options {
	return controller.Options{MaxConcurrentReconciles: max(1, concurrency), RateLimiter: Limiter[reconcile.Request](s)}
}

// Retry is what a reconcile returns for err: a conflict (our copy was stale; the next try
// reads a fresh one) is retried through the limiter without being reported as an error; any
// other error is returned, and retried through the limiter too.
func Retry(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return Again(), nil
	}
	return reconcile.Result{}, err
}

// Again asks for the key to be reconciled again after the limiter's delay for it: for work
// that is not done yet and has no event of its own to bring it back (a pod a
// PodDisruptionBudget keeps, a conflict).
func Again() reconcile.Result {
	// Requeue is deprecated in favour of RequeueAfter, which bypasses the limiter; a requeue
	// that backs off per key has no other spelling in controller-runtime.
	return reconcile.Result{Requeue: true} //nolint:staticcheck // the rate-limited requeue, see above
}
