// Package capacitybuffer keeps CapacityBuffers (autoscaling.x-k8s.io/v1beta1, the
// CapacityBuffer feature gate): it resolves each buffer's pod template (a PodTemplate, or a
// Deployment's, StatefulSet's or ReplicaSet's) and chunk count, writes the buffer's status
// (replicas, ReadyForProvisioning, and Provisioning from what the last batch did with its
// pods), and keeps its virtual pods in a Store that the cluster model gives to every snapshot
// (docs/architecture.md, "CapacityBuffers"). It never creates a pod and never changes a
// buffer's spec or the workloads it names; placing the room is the provisioner's.
package capacitybuffer

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// Resync is how often a buffer is resolved again with nothing announced.
const Resync = 5 * time.Minute

// Reasons of the buffers' conditions, as upstream's.
const (
	ReasonResolved                = "Resolved"
	ReasonPodTemplateNotFound     = "PodTemplateNotFound"
	ReasonScalableRefNotFound     = "ScalableRefNotFound"
	ReasonResolutionFailed        = "ResolutionFailed"
	ReasonUnsupportedStrategy     = "UnsupportedProvisioningStrategy"
	ReasonFitsExistingCapacity    = "FitsExistingCapacity"
	ReasonRequiresNewCapacity     = "RequiresNewCapacity"
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	ReasonBufferEmpty             = "BufferEmpty"
)

// Controller reconciles CapacityBuffers.
type Controller struct {
	client client.Client
	store  *Store
	// trigger is called when a buffer's virtual pods changed: it opens a provisioning batch.
	trigger func()
}

// NewController returns the CapacityBuffer controller; trigger opens a provisioning batch.
func NewController(c client.Client, store *Store, trigger func()) *Controller {
	return &Controller{client: c, store: store, trigger: trigger}
}

// Register watches CapacityBuffers, the PodTemplates and workloads they name, and the
// provisioner's placements.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("capacitybuffer").WithOptions(ratelimit.Options(4)).
		For(&autoscalingv1beta1.CapacityBuffer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.PodTemplate{}, c.referencing(func(cb *autoscalingv1beta1.CapacityBuffer, o client.Object) bool {
			return cb.Spec.PodTemplateRef != nil && cb.Spec.PodTemplateRef.Name == o.GetName()
		})).
		Watches(&appsv1.Deployment{}, c.scalable(autoscalingv1beta1.KindDeployment), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.StatefulSet{}, c.scalable(autoscalingv1beta1.KindStatefulSet), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.ReplicaSet{}, c.scalable(autoscalingv1beta1.KindReplicaSet), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(c.store.changed, &handler.EnqueueRequestForObject{})).
		Complete(c)
}

// referencing maps an object to the buffers of its namespace that name it.
func (c *Controller) referencing(names func(*autoscalingv1beta1.CapacityBuffer, client.Object) bool) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list autoscalingv1beta1.CapacityBufferList
		if err := c.client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if names(&list.Items[i], o) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
}

func (c *Controller) scalable(kind string) handler.EventHandler {
	return c.referencing(func(cb *autoscalingv1beta1.CapacityBuffer, o client.Object) bool {
		ref := cb.Spec.ScalableRef
		return ref != nil && ref.Kind == kind && ref.Name == o.GetName() && (ref.APIGroup == "" || ref.APIGroup == appsv1.GroupName)
	})
}

// resolution is a buffer's chunk: its template, and the scalable workload's replicas (nil
// for a PodTemplate).
type resolution struct {
	template         corev1.PodTemplateSpec
	scalableReplicas *int32
	podTemplate      *corev1.PodTemplate
}

// Reconcile resolves the buffer, keeps its virtual pods in the store and writes its status.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cb := &autoscalingv1beta1.CapacityBuffer{}
	if err := c.client.Get(ctx, req.NamespacedName, cb); err != nil {
		if apierrors.IsNotFound(err) && c.store.set(req.NamespacedName, nil) {
			c.trigger()
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := cb.DeepCopy()
	res, reason, resolveErr := c.resolve(ctx, cb)
	var pods []*corev1.Pod
	if reason == ReasonResolved {
		replicas := scheduling.BufferReplicas(&cb.Spec, &res.template.Spec, res.scalableReplicas)
		cb.Status.Replicas = &replicas
		cb.Status.PodTemplateRef, cb.Status.PodTemplateGeneration = nil, nil
		if pt := res.podTemplate; pt != nil {
			gen := pt.Generation
			cb.Status.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: pt.Name}
			cb.Status.PodTemplateGeneration = &gen
		}
		c.setCondition(cb, autoscalingv1beta1.ConditionReadyForProvisioning, metav1.ConditionTrue, ReasonResolved, "the pod template and replicas are resolved")
		pods = scheduling.BufferPods(cb, &res.template, replicas)
	} else {
		msg := fmt.Sprint(resolveErr)
		c.setCondition(cb, autoscalingv1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, reason, msg)
	}
	if c.store.set(req.NamespacedName, pods) {
		c.trigger()
	}
	c.provisioningCondition(cb)
	cb.Status.ProvisioningStrategy = cb.Spec.ProvisioningStrategy
	if !equality.Semantic.DeepEqual(stored.Status, cb.Status) {
		if err := c.client.Status().Patch(ctx, cb, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if resolveErr != nil && reason == ReasonResolutionFailed && !errors.Is(resolveErr, errNotServed) {
		// A read that failed: worth retrying sooner than the resync.
		return reconcile.Result{}, resolveErr
	}
	return reconcile.Result{RequeueAfter: Resync}, nil
}

// errNotServed marks a buffer this autoscaler does not act on: retrying changes nothing.
var errNotServed = errors.New("the buffer keeps no room")

// resolve finds the buffer's chunk; reason is ReasonResolved, or why not with the error.
// Only a failure to read (not a missing or unsupported reference) is worth retrying.
func (c *Controller) resolve(ctx context.Context, cb *autoscalingv1beta1.CapacityBuffer) (*resolution, string, error) {
	if s := cb.Spec.ProvisioningStrategy; s != nil && *s != autoscalingv1beta1.ActiveProvisioningStrategy {
		return nil, ReasonUnsupportedStrategy, fmt.Errorf("spec.provisioningStrategy %q is not served; only %q is", *s, autoscalingv1beta1.ActiveProvisioningStrategy)
	}
	switch {
	case cb.Spec.PodTemplateRef != nil:
		pt := &corev1.PodTemplate{}
		if err := c.client.Get(ctx, types.NamespacedName{Namespace: cb.Namespace, Name: cb.Spec.PodTemplateRef.Name}, pt); err != nil {
			return nil, notFound(err, ReasonPodTemplateNotFound), fmt.Errorf("spec.podTemplateRef: PodTemplate %s/%s: %w", cb.Namespace, cb.Spec.PodTemplateRef.Name, err)
		}
		return &resolution{template: pt.Template, podTemplate: pt}, ReasonResolved, nil
	case cb.Spec.ScalableRef != nil:
		ref := cb.Spec.ScalableRef
		if ref.APIGroup != "" && ref.APIGroup != appsv1.GroupName {
			return nil, ReasonResolutionFailed, fmt.Errorf("spec.scalableRef.apiGroup %q: only Deployments, StatefulSets and ReplicaSets (group apps) are resolved: %w", ref.APIGroup, errNotServed)
		}
		key := types.NamespacedName{Namespace: cb.Namespace, Name: ref.Name}
		var tmpl corev1.PodTemplateSpec
		var replicas *int32
		var err error
		switch ref.Kind {
		case autoscalingv1beta1.KindDeployment:
			o := &appsv1.Deployment{}
			err = c.client.Get(ctx, key, o)
			tmpl, replicas = o.Spec.Template, o.Spec.Replicas
		case autoscalingv1beta1.KindStatefulSet:
			o := &appsv1.StatefulSet{}
			err = c.client.Get(ctx, key, o)
			tmpl, replicas = o.Spec.Template, o.Spec.Replicas
		case autoscalingv1beta1.KindReplicaSet:
			o := &appsv1.ReplicaSet{}
			err = c.client.Get(ctx, key, o)
			tmpl, replicas = o.Spec.Template, o.Spec.Replicas
		default:
			return nil, ReasonResolutionFailed, fmt.Errorf("spec.scalableRef.kind %q: only Deployment, StatefulSet and ReplicaSet are resolved: %w", ref.Kind, errNotServed)
		}
		if err != nil {
			return nil, notFound(err, ReasonScalableRefNotFound), fmt.Errorf("spec.scalableRef: %s %s/%s: %w", ref.Kind, cb.Namespace, ref.Name, err)
		}
		if replicas == nil {
			one := int32(1)
			replicas = &one
		}
		return &resolution{template: tmpl, scalableReplicas: replicas}, ReasonResolved, nil
	default:
		return nil, ReasonResolutionFailed, fmt.Errorf("spec: neither podTemplateRef nor scalableRef is set: %w", errNotServed)
	}
}

func notFound(err error, reason string) string {
	if apierrors.IsNotFound(err) {
		return reason
	}
	return ReasonResolutionFailed
}

// provisioningCondition says whether the buffer's room is kept, from the last batch.
func (c *Controller) provisioningCondition(cb *autoscalingv1beta1.CapacityBuffer) {
	switch {
	case !meta.IsStatusConditionTrue(cb.Status.Conditions, autoscalingv1beta1.ConditionReadyForProvisioning):
		c.setCondition(cb, autoscalingv1beta1.ConditionProvisioning, metav1.ConditionFalse, ReasonNotReadyForProvisioning, "the buffer is not ReadyForProvisioning")
		return
	case cb.Status.Replicas == nil || *cb.Status.Replicas == 0:
		c.setCondition(cb, autoscalingv1beta1.ConditionProvisioning, metav1.ConditionFalse, ReasonBufferEmpty, "the buffer has zero replicas")
		return
	}
	p, ok := c.store.placement(client.ObjectKeyFromObject(cb))
	if !ok {
		return
	}
	total := *cb.Status.Replicas
	if p.Launched == 0 && p.Unplaced == 0 {
		c.setCondition(cb, autoscalingv1beta1.ConditionProvisioning, metav1.ConditionTrue, ReasonFitsExistingCapacity,
			fmt.Sprintf("all %d virtual pods have room on existing or launching capacity", total))
		return
	}
	msg := fmt.Sprintf("%d of %d virtual pods required new capacity, %d could not be placed", p.Launched, total, p.Unplaced)
	if p.Reason != "" {
		msg += ": " + p.Reason
	}
	c.setCondition(cb, autoscalingv1beta1.ConditionProvisioning, metav1.ConditionFalse, ReasonRequiresNewCapacity, msg)
}

func (c *Controller) setCondition(cb *autoscalingv1beta1.CapacityBuffer, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&cb.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: cb.Generation})
}
