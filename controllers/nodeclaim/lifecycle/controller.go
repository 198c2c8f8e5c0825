// Package lifecycle drives a NodeClaim from creation to a ready node: launch through the cloud
// provider, registration when the Node with its provider ID appears, initialization when that
// Node is Ready with its startup taints gone. Each step is a small function setting one
// condition; Reconcile runs them in order and writes status once.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/controllers/index"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
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

// recent keeps a value per NodeClaim UID for ttl after it was put; the controller's mutex
// guards it.
type recent[T any] struct {
	ttl     time.Duration
	entries map[types.UID]recentEntry[T]
}

type recentEntry[T any] struct {
	v  T
	at time.Time
}

func newRecent[T any](ttl time.Duration) recent[T] {
	return recent[T]{ttl: ttl, entries: map[types.UID]recentEntry[T]{}}
}

// put records v now and forgets the entries older than ttl.
func (r recent[T]) put(uid types.UID, v T, now time.Time) {
	for k, e := range r.entries {
		if now.Sub(e.at) > r.ttl {
			delete(r.entries, k)
		}
	}
	r.entries[uid] = recentEntry[T]{v: v, at: now}
}

// get returns the value put for uid within ttl of now.
func (r recent[T]) get(uid types.UID, now time.Time) (T, bool) {
	e, ok := r.entries[uid]
	if !ok || now.Sub(e.at) > r.ttl {
		var zero T
		return zero, false
	}
	return e.v, true
}

// cacheLag bounds how long a reconcile waits for the cache to show our last write of a
// NodeClaim; past it (another writer changed it since), the reconcile goes ahead, and a
// stale write fails on its resourceVersion.
const cacheLag = 5 * time.Second

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

// WithValidation sets the checks a NodeClaim must pass before it is launched, beyond the
// CRD's: the validating webhook's for NodeClaims (there is no NodeClaim webhook, so that a
// manager whose webhook endpoint is unreachable still launches). A NodeClaim that fails them
// gets ValidationSucceeded False with every problem, a FailedValidation event, and no
// instance; liveness deletes it after LaunchTTL.
func (c *Controller) WithValidation(validate func(*karpv1.NodeClaim) field.ErrorList) *Controller {
	c.validate = validate
	return c
}

// validation sets ValidationSucceeded before the launch, and holds a NodeClaim that fails.
func (c *Controller) validation(_ context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if c.validate == nil || nc.Status.ProviderID != "" {
		return reconcile.Result{}, nil
	}
	if errs := c.validate(nc); len(errs) > 0 {
		msg := errs.ToAggregate().Error()
		if !meta.IsStatusConditionFalse(nc.Status.Conditions, karpv1.ConditionTypeValidationSucceeded) {
			c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "FailedValidation", "Launch", "NodeClaim %s is not launched: %s", nc.Name, msg)
		}
		c.setCondition(nc, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, "ValidationFailed", msg)
		// Nothing to retry: a change to the NodeClaim brings it back, and liveness at LaunchTTL.
		return reconcile.Result{RequeueAfter: max(time.Second, nc.CreationTimestamp.Add(LaunchTTL).Sub(c.clock.Now())+time.Second)}, nil
	}
	c.setCondition(nc, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, "Validated", "")
	return reconcile.Result{}, nil
}

// remembered is what an earlier launch of the NodeClaim returned, if any.
func (c *Controller) remembered(nc *karpv1.NodeClaim) *karpv1.NodeClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	launched, _ := c.launched.get(nc.UID, c.clock.Now())
	return launched
}

// remember records a launch.
func (c *Controller) remember(nc, launched *karpv1.NodeClaim) {
	launched = launched.DeepCopy()
	launched.Name = nc.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	c.launched.put(nc.UID, launched, c.clock.Now())
}

// launchedAs names the NodeClaim a remembered launch gave the provider ID.
func (c *Controller) launchedAs(providerID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for uid := range c.launched.entries {
		if launched, ok := c.launched.get(uid, now); ok && launched.Status.ProviderID == providerID {
			return launched.Name, true
		}
	}
	return "", false
}

// wrote records the resourceVersion a write of the NodeClaim returned.
func (c *Controller) wrote(nc *karpv1.NodeClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes.put(nc.UID, nc.ResourceVersion, c.clock.Now())
}

// behind reports whether the cache's copy of the NodeClaim is not the one our last write
// returned, within cacheLag of that write.
func (c *Controller) behind(nc *karpv1.NodeClaim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	rv, ok := c.writes.get(nc.UID, c.clock.Now())
	return ok && rv != nc.ResourceVersion
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

// Liveness limits: a NodeClaim not launched within LaunchTTL of its creation, or not
// registered within RegistrationTTL of its launch, is deleted; its pods are provisioned again.
const (
	LaunchTTL       = 5 * time.Minute
	RegistrationTTL = 15 * time.Minute
)

// liveness deletes a NodeClaim stuck before launch or before registration.
func (c *Controller) liveness(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	now := c.clock.Now()
	var reason string
	if launched := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeLaunched); launched == nil || launched.Status != metav1.ConditionTrue {
		deadline := nc.CreationTimestamp.Add(LaunchTTL)
		if now.After(deadline) {
			reason = fmt.Sprintf("not launched within %s", LaunchTTL)
		}
	} else if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
		deadline := launched.LastTransitionTime.Add(RegistrationTTL)
		if now.After(deadline) {
			reason = fmt.Sprintf("not registered within %s of its launch", RegistrationTTL)
		}
	}
	if reason == "" {
		return reconcile.Result{}, nil
	}
	c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "LivenessTimeout", "Liveness", "Deleting NodeClaim %s: %s", nc.Name, reason)
	if pool := nc.Labels[karpv1.NodePoolLabelKey]; pool != "" && c.registrations != nil {
		c.registrations.RecordRegistration(pool, true, fmt.Sprintf("NodeClaim %s was %s", nc.Name, reason))
	}
	log.FromContext(ctx).Info("deleting nodeclaim", "NodeClaim", nc.Name, "reason", reason)
	if err := c.client.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, errDeleted
}

// launch creates the instance once.
func (c *Controller) launch(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if nc.Status.ProviderID != "" {
		return reconcile.Result{}, nil
	}
	launched := c.remembered(nc)
	fresh := launched == nil
	var err error
	if fresh {
		launched, err = c.cloud.Create(ctx, nc)
	}
	switch {
	case cloudprovider.IsInsufficientCapacityError(err):
		// The pods go back to the provisioner, which will pick other offerings.
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "InsufficientCapacityError", "Launch", "NodeClaim %s launch failed, %v", nc.Name, err)
		if derr := c.client.Delete(ctx, nc); derr != nil && !apierrors.IsNotFound(derr) {
			return reconcile.Result{}, derr
		}
		return reconcile.Result{}, errDeleted
	case cloudprovider.IsNodeClassNotReadyError(err):
		// As upstream: a NodeClaim whose node class is missing or not ready is deleted, not
		// retried forever. Its pods go back to the provisioner, which launches nothing from a
		// NodePool whose node class cannot serve instance types.
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "NodeClassNotReady", "Launch", "NodeClaim %s launch failed, %v", nc.Name, err)
		log.FromContext(ctx).Error(err, "failed launching nodeclaim; deleting it", "NodeClaim", nc.Name)
		if derr := c.client.Delete(ctx, nc); derr != nil && !apierrors.IsNotFound(derr) {
			return reconcile.Result{}, derr
		}
		return reconcile.Result{}, errDeleted
	case err != nil:
		c.setCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionFalse, "LaunchFailed", err.Error())
		return reconcile.Result{}, fmt.Errorf("launching nodeclaim %s: %w", nc.Name, err)
	}
	mergeLaunch(nc, launched)
	c.remember(nc, launched)
	c.setCondition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "")
	if fresh {
		log.FromContext(ctx).Info("launched nodeclaim", "NodeClaim", nc.Name, "providerID", nc.Status.ProviderID,
			"instanceType", nc.Labels[karpv1.LabelInstanceType], "zone", nc.Labels[karpv1.LabelTopologyZone], "capacityType", nc.Labels[karpv1.CapacityTypeLabelKey])
	}
	return reconcile.Result{}, nil
}

// mergeLaunch copies what the cloud provider's launch returned onto the NodeClaim.
func mergeLaunch(nc, launched *karpv1.NodeClaim) {
	for k, v := range launched.Labels {
		if nc.Labels == nil {
			nc.Labels = map[string]string{}
		}
		nc.Labels[k] = v
	}
	for k, v := range launched.Annotations {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[k] = v
	}
	nc.Status.ProviderID, nc.Status.ImageID = launched.Status.ProviderID, launched.Status.ImageID
	nc.Status.Capacity, nc.Status.Allocatable = launched.Status.Capacity, launched.Status.Allocatable
}

// node finds the Node with the NodeClaim's provider ID.
func (c *Controller) node(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	return index.NodeByProviderID(ctx, c.client, nc.Status.ProviderID)
}

// register links the Node: it gets the NodeClaim's labels and loses the unregistered taint.
func (c *Controller) register(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRegistered) {
		return reconcile.Result{}, nil
	}
	node, err := c.registerNode(ctx, nc)
	if err != nil {
		// A conflict: the Node's update that made our copy stale brings us back too.
		return ratelimit.Retry(err)
	}
	if node == nil {
		c.setCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, "AwaitingNode", "the node has not registered")
		// The Node's creation brings us back, unless it came before the cache had this
		// NodeClaim's provider ID to map it by: look again soon, as initialize does.
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	nc.Status.NodeName = node.Name
	c.setCondition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
	if pool := nc.Labels[karpv1.NodePoolLabelKey]; pool != "" && c.registrations != nil {
		c.registrations.RecordRegistration(pool, false, "")
	}
	return reconcile.Result{}, nil
}

// registerNode gives the Node with the NodeClaim's provider ID the NodeClaim's labels and the
// termination finalizer, and lifts the unregistered taint; it returns nil if there is no such
// Node yet.
func (c *Controller) registerNode(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	node, err := c.node(ctx, nc)
	if err != nil || node == nil {
		return nil, err
	}
	original := node.DeepCopy()
	// A merge patch replaces the taint and finalizer lists whole: written from a copy older than
	// another writer's change (kube-controller-manager lifting not-ready, an agent's taint), it
	// would undo that change. The resourceVersion makes such a write fail instead.
	patch := client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	firstTime := node.Labels[karpv1.NodeRegisteredLabelKey] != "true"
	for k, v := range nc.Labels {
		node.Labels[k] = v
	}
	if len(nc.Annotations) > 0 && node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range nc.Annotations {
		node.Annotations[k] = v
	}
	node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
	controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
	// The Node is owned by its NodeClaim, as upstream's: tools that walk owner references
	// (kubectl tree, ArgoCD's resource tree, upstream's suites) find the node under its claim.
	// The NodeClaim's finalizer keeps it until termination has drained the node, so the
	// garbage collector never deletes a Node termination is still working on.
	ownerRef := metav1.OwnerReference{APIVersion: karpv1.GroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptr.To(true)}
	if !slices.ContainsFunc(node.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == nc.UID }) {
		node.OwnerReferences = append(node.OwnerReferences, ownerRef)
	}
	if firstTime && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&karpv1.UnregisteredNoExecuteTaint) }) {
		// The taint keeps pods off a node until it carries its NodeClaim's labels and taints;
		// a bootstrap that leaves it out lets pods land on a node that is not ready for them.
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, "UnregisteredTaintMissing", "Registration",
			"Node %s registered without the %s taint: pods may have scheduled before its labels and taints were set", node.Name, karpv1.UnregisteredTaintKey)
	}
	node.Spec.Taints = syncTaints(node, nc)
	if !equality.Semantic.DeepEqual(original.Labels, node.Labels) || !equality.Semantic.DeepEqual(original.Annotations, node.Annotations) ||
		!equality.Semantic.DeepEqual(original.Finalizers, node.Finalizers) || !equality.Semantic.DeepEqual(original.Spec.Taints, node.Spec.Taints) ||
		!equality.Semantic.DeepEqual(original.OwnerReferences, node.OwnerReferences) {
		if err := c.client.Patch(ctx, node, patch); err != nil {
			return nil, fmt.Errorf("registering node %s: %w", node.Name, err)
		}
		if firstTime {
			metrics.NodesCreated.WithLabelValues(nc.Labels[karpv1.NodePoolLabelKey], node.Labels[corev1.LabelTopologyZone]).Inc()
		}
	}
	return node, nil
}

// syncTaints are the Node's taints at registration: without the unregistered taint, and, unless
// the Node has karpenter.sh/do-not-sync-taints, with each of its NodeClaim's taints and startup
// taints it lacks (as upstream: a provider or bootstrap that did not register them does not
// leave the node open to pods the NodePool keeps off it).
func syncTaints(node *corev1.Node, nc *karpv1.NodeClaim) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != karpv1.UnregisteredTaintKey {
			out = append(out, t)
		}
	}
	if node.Labels[karpv1.DoNotSyncTaintsLabelKey] == "true" {
		return out
	}
	for _, t := range slices.Concat(nc.Spec.Taints, nc.Spec.StartupTaints) {
		if !slices.ContainsFunc(out, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
			out = append(out, t)
		}
	}
	return out
}

// KnownEphemeralTaints go by themselves as a node comes up (the node lifecycle controller's
// not-ready and unreachable taints, the cloud controller's uninitialized one): as upstream,
// a node is not initialized while one remains, and registration does not count them as the
// NodeClaim's.
var KnownEphemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
}

// unregisteredResource names an extended resource (nvidia.com/gpu, ...) the NodeClaim's instance
// type promises that the Node does not offer yet: its device plugin has not registered it,
// and pods that need it cannot schedule there.
func unregisteredResource(node *corev1.Node, nc *karpv1.NodeClaim) (corev1.ResourceName, bool) {
	for name, q := range nc.Status.Allocatable {
		if q.IsZero() || !isExtended(name) {
			continue
		}
		if got, ok := node.Status.Allocatable[name]; !ok || got.IsZero() {
			return name, true
		}
	}
	return "", false
}

// isExtended reports whether a resource is an extended one (a device plugin's), not one the
// kubelet always reports.
func isExtended(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, corev1.ResourceStorage:
		return false
	}
	return !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(string(name), corev1.ResourceAttachableVolumesPrefix)
}

// initialize waits for the Node to be Ready with its startup and known ephemeral taints gone
// and the extended resources its instance type promises registered; again after a reboot.
func (c *Controller) initialize(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeRebooting) {
		// The node of the old boot would pass every check below: the reboot controller hands
		// initialization back once the reboot ended (controllers/nodeclaim/reboot).
		return reconcile.Result{}, nil
	}
	node, err := c.node(ctx, nc)
	if err != nil || node == nil {
		return reconcile.Result{}, err
	}
	if ready, _ := scheduling.NodeReady(node); !ready {
		c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "NodeNotReady", "the node is not ready")
		// The Node's update usually brings us back, but it can come before the NodeClaim's
		// provider ID is in the cache, so look again.
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	for _, st := range nc.Spec.StartupTaints {
		for _, t := range node.Spec.Taints {
			if t.MatchTaint(&st) {
				c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "StartupTaintsPresent", "startup taint "+t.Key+" is still on the node")
				return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
			}
		}
	}
	for _, et := range KnownEphemeralTaints {
		for _, t := range node.Spec.Taints {
			if t.MatchTaint(&et) {
				c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "KnownEphemeralTaintsPresent", "taint "+t.Key+" is still on the node")
				return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
			}
		}
	}
	if name, missing := unregisteredResource(node, nc); missing {
		c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "ResourceNotRegistered", "resource "+string(name)+" is not registered on the node")
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if node.Labels[karpv1.NodeInitializedLabelKey] != "true" {
		patch := client.MergeFrom(node.DeepCopy())
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[karpv1.NodeInitializedLabelKey] = "true"
		if err := c.client.Patch(ctx, node, patch); err != nil {
			return reconcile.Result{}, err
		}
	}
	c.setCondition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	return reconcile.Result{}, nil
}

// setReady summarises Launched, Registered and Initialized.
func setReady(nc *karpv1.NodeClaim) {
	for _, t := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		cond := meta.FindStatusCondition(nc.Status.Conditions, t)
		if cond == nil || cond.Status != metav1.ConditionTrue {
			reason := "AwaitingReconciliation"
			if cond != nil {
				reason = t + cond.Reason
			}
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionFalse,
				Reason: reason, Message: t + " is not true", ObservedGeneration: nc.Generation})
			return
		}
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: nc.Generation})
}
