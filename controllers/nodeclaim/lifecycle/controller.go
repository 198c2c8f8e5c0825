// Package lifecycle drives a NodeClaim from creation to a ready node: launch through the cloud
// provider, registration when the Node with its provider ID appears, initialization when that
// Node is Ready with its startup taints gone. Each step is a small function setting one
// condition; Reconcile runs them in order and writes status once.
package lifecycle

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// errDeleted stops a reconcile whose NodeClaim a step deleted.
var errDeleted = errors.New("nodeclaim deleted")

// MaxConcurrentReconciles is high: a launch waits on the cloud provider for seconds, and every
// reconcile of the controller shares its workers, so a scale-out of hundreds of NodeClaims
// must not queue the registration of launched nodes behind launches still waiting. The
// client's rate limit, not this, bounds the load on the API server.
const MaxConcurrentReconciles = 1000

// Controller reconciles NodeClaims.
type Controller struct {
	client   client.Client
	cloud    cloudprovider.CloudProvider
	recorder events.EventRecorder
	clock    clock.Clock
	// validate checks what the CRD's CEL rules cannot say (nil: nothing more).
	validate func(*karpv1.NodeClaim) field.ErrorList
	// registrations, when set, records registration outcomes per NodePool.
	registrations Registrations
	// launched remembers, by NodeClaim UID, what each launch returned: a reconcile that reads
	// the NodeClaim before its status patch arrives (the metadata patch's event can come
	// first) must not launch again. writes are the resourceVersions our last writes returned.
	mu       sync.Mutex
	launched recent[*karpv1.NodeClaim]
	writes   recent[string]
}

// launchMemory is how long a launch is remembered; the cache sees the status patch well
// within it.
const launchMemory = 5 * time.Minute

// NewController builds the lifecycle controller.
func NewController(c client.Client, cloud cloudprovider.CloudProvider, recorder events.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{client: c, cloud: cloud, recorder: recorder, clock: clk,
		launched: newRecent[*karpv1.NodeClaim](launchMemory), writes: newRecent[string](cacheLag)}
}

// Registrations records NodeClaims' registration outcomes for their NodePool's
// NodeRegistrationHealthy condition (controllers/state.Cluster).
type Registrations interface {
	RecordRegistration(pool string, failed bool, message string)
}

// WithRegistrations has the controller record each NodeClaim that registered, and each it
// deleted for not launching or registering in time.
func (c *Controller) WithRegistrations(r Registrations) *Controller {
	c.registrations = r
	return c
}

// nodeUpdates lets through every update of a Node not yet initialized (registration and
// initialization follow its status closely), and of an initialized one those that can change
// something (Ready, taints, labels, allocatable, ...), not heartbeats: on a thousand idle
// nodes those come twice a second and changed nothing here.
var nodeUpdates = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	node := e.ObjectNew.(*corev1.Node)
	return node.Labels[karpv1.NodeInitializedLabelKey] != "true" || scheduling.NodeChanged(e.ObjectOld.(*corev1.Node), node)
}}

// Register watches NodeClaims and the Nodes they become (the manager must have the indexes of
// package index).
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclaim.lifecycle").
		WithOptions(ratelimit.Options(MaxConcurrentReconciles)).
		For(&karpv1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			node := o.(*corev1.Node)
			if node.Spec.ProviderID == "" {
				return nil
			}
			claims, err := index.NodeClaimsByProviderID(ctx, c.client, node.Spec.ProviderID)
			if err != nil {
				return nil
			}
			var out []reconcile.Request
			for _, nc := range claims {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
			}
			if len(out) == 0 {
				// The Node can appear before the cache shows the NodeClaim's provider ID.
				if name, ok := c.launchedAs(node.Spec.ProviderID); ok {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
				}
			}
			return out
		}), builder.WithPredicates(nodeUpdates)).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile runs launch, registration and initialization, then writes status once.
func (c *Controller) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	if c.behind(nc) {
		// The cache has not caught up with our last write: what this copy lacks we wrote
		// already, and writing from it would conflict. Its update brings us back. The Node
		// need not wait for that: its pods are waiting for it, and registering it takes only
		// what the launch returned.
		if launched := c.remembered(nc); launched != nil && !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
			claim := nc.DeepCopy()
			mergeLaunch(claim, launched)
			if _, err := c.registerNode(ctx, claim); err != nil && !apierrors.IsConflict(err) {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: cacheLag / 10}, nil
	}
	before := nc.DeepCopy()
	// The finalizer is there before any instance exists, so none can outlive its NodeClaim.
	controllerutil.AddFinalizer(nc, karpv1.TerminationFinalizer)
	var result reconcile.Result
	var err error
	for _, step := range []func(context.Context, *karpv1.NodeClaim) (reconcile.Result, error){c.liveness, c.validation, c.launch, c.register, c.initialize} {
		if result, err = step(ctx, nc); err != nil || !result.IsZero() {
			break
		}
	}
	if errors.Is(err, errDeleted) {
		return reconcile.Result{}, nil
	}

	nc.Status.ObservedGeneration = nc.Generation
	setReady(nc)
	if !equality.Semantic.DeepEqual(before.Labels, nc.Labels) || !equality.Semantic.DeepEqual(before.Annotations, nc.Annotations) ||
		!equality.Semantic.DeepEqual(before.Finalizers, nc.Finalizers) {
		patched := nc.DeepCopy()
		if perr := c.client.Patch(ctx, patched, client.MergeFrom(before)); perr != nil {
			return reconcile.Result{}, perr
		}
		nc.ResourceVersion, before.ResourceVersion = patched.ResourceVersion, patched.ResourceVersion
		c.wrote(nc)
	}
	if !equality.Semantic.DeepEqual(before.Status, nc.Status) {
		// With the resourceVersion read: a status written from a stale copy would replace the
		// conditions with older ones.
		if perr := c.client.Status().Patch(ctx, nc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); perr != nil {
			return ratelimit.Retry(perr)
		}
		c.wrote(nc)
	}
	return result, err
}

func (c *Controller) setCondition(nc *karpv1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: nc.Generation})
}
