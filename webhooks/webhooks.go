// Package webhooks registers the conversion and validating webhooks, and the mutating webhook
// of the CapacityBudget gate, with a manager. The logic lives in webhooks/conversion and
// webhooks/validation; this package only adapts it to admission requests. The gate only adds
// a scheduling gate to new pods; it must never change anything else of a pod.
package webhooks

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	autoscalingv1beta1 "github.com/karpenter-policy/karpenter/api/autoscaling/v1beta1"
	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/webhooks/conversion"
	"github.com/karpenter-policy/karpenter/webhooks/validation"
)

// Validating webhooks. matchPolicy Equivalent: a v1beta1 request is converted to v1 and
// validated there, so one validator serves both versions.
//
// +kubebuilder:webhook:path=/validate-karpenter-sh-v1-nodepool,mutating=false,failurePolicy=fail,sideEffects=None,groups=karpenter.sh,resources=nodepools,verbs=create;update,versions=v1,name=validation.nodepools.karpenter.sh,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-karpenter-sh-v1alpha1-nodeoverlay,mutating=false,failurePolicy=fail,sideEffects=None,groups=karpenter.sh,resources=nodeoverlays,verbs=create;update,versions=v1alpha1,name=validation.nodeoverlays.karpenter.sh,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-autoscaling-x-k8s-io-v1beta1-capacitybuffer,mutating=false,failurePolicy=ignore,sideEffects=None,groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=create;update,versions=v1beta1,name=validation.capacitybuffers.autoscaling.x-k8s.io,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-karpenter-k8s-aws-v1-ec2nodeclass,mutating=false,failurePolicy=fail,sideEffects=None,groups=karpenter.k8s.aws,resources=ec2nodeclasses,verbs=create;update,versions=v1,name=validation.ec2nodeclasses.karpenter.k8s.aws,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-karpenter-kwok-sh-v1alpha1-kwoknodeclass,mutating=false,failurePolicy=fail,sideEffects=None,groups=karpenter.kwok.sh,resources=kwoknodeclasses,verbs=create;update,versions=v1alpha1,name=validation.kwoknodeclasses.karpenter.kwok.sh,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-policy-karpenter-sh-v1-capacitybudget,mutating=false,failurePolicy=fail,sideEffects=None,groups=policy.karpenter.sh,resources=capacitybudgets,verbs=create;update,versions=v1,name=validation.capacitybudgets.policy.karpenter.sh,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-policy-karpenter-sh-v1-capacitypolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=policy.karpenter.sh,resources=capacitypolicies,verbs=create;update,versions=v1,name=validation.capacitypolicies.policy.karpenter.sh,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-policy-karpenter-sh-v1-clustercapacitybudget,mutating=false,failurePolicy=fail,sideEffects=None,groups=policy.karpenter.sh,resources=clustercapacitybudgets,verbs=create;update,versions=v1,name=validation.clustercapacitybudgets.policy.karpenter.sh,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:webhook:path=/validate-policy-karpenter-sh-v1-capacityexception,mutating=false,failurePolicy=fail,sideEffects=None,groups=policy.karpenter.sh,resources=capacityexceptions,verbs=create;update,versions=v1,name=validation.capacityexceptions.policy.karpenter.sh,admissionReviewVersions=v1,matchPolicy=Equivalent

// Register adds the conversion webhook (/convert), the validating webhooks and the
// CapacityBudget gate to mgr.
func Register(mgr ctrl.Manager, conv *conversion.Converter, v *validation.Validator, rev Reviewer) error {
	server := mgr.GetWebhookServer()
	server.Register("/convert", &ConversionHandler{Converter: conv})
	for path, wh := range Validating(mgr.GetScheme(), v, rev) {
		server.Register(path, wh)
	}
	for path, wh := range Mutating(mgr.GetScheme(), mgr.GetClient()) {
		server.Register(path, wh)
	}
	return nil
}

// Validating are the validating webhooks by path (the path controller-runtime's builder gives
// a kind: /validate-<group with dashes>-<version>-<kind>), each serving AdmissionReviews.
// Panics are recovered into an error response.
func Validating(scheme *runtime.Scheme, v *validation.Validator, rev Reviewer) map[string]*admission.Webhook {
	out := map[string]*admission.Webhook{}
	add := func(gvk schema.GroupVersionKind, wh *admission.Webhook) {
		out["/validate-"+strings.ReplaceAll(gvk.Group, ".", "-")+"-"+gvk.Version+"-"+strings.ToLower(gvk.Kind)] = wh
	}
	nodePool := karpv1.SchemeGroupVersion.WithKind("NodePool")
	add(nodePool, admission.WithValidator(scheme, reviewed(typed(nodePool.GroupKind(), func(_ context.Context, o *karpv1.NodePool) field.ErrorList { return v.NodePool(o) }), rev)))
	nodeOverlay := karpv1alpha1.SchemeGroupVersion.WithKind("NodeOverlay")
	add(nodeOverlay, admission.WithValidator(scheme, reviewed(typed(nodeOverlay.GroupKind(), func(_ context.Context, o *karpv1alpha1.NodeOverlay) field.ErrorList { return v.NodeOverlay(o) }), rev)))
	// CapacityBuffers: the CRD's schema and CEL say what is valid; admission only warns about
	// what is accepted and not acted on (failurePolicy Ignore: warnings are all it has).
	buffer := autoscalingv1beta1.SchemeGroupVersion.WithKind("CapacityBuffer")
	add(buffer, admission.WithValidator(scheme, reviewed(warned(typed(buffer.GroupKind(), func(context.Context, *autoscalingv1beta1.CapacityBuffer) field.ErrorList { return nil }),
		(*autoscalingv1beta1.CapacityBuffer).FieldsNotActedOn), rev)))
	ec2 := awsv1.SchemeGroupVersion.WithKind("EC2NodeClass")
	add(ec2, admission.WithValidator(scheme, warned(typed(ec2.GroupKind(), func(_ context.Context, o *awsv1.EC2NodeClass) field.ErrorList { return v.EC2NodeClass(o) }),
		(*awsv1.EC2NodeClass).FieldsNotActedOn)))
	kwok := kwokv1alpha1.SchemeGroupVersion.WithKind("KWOKNodeClass")
	add(kwok, admission.WithValidator(scheme, typed(kwok.GroupKind(), func(_ context.Context, o *kwokv1alpha1.KWOKNodeClass) field.ErrorList { return v.KWOKNodeClass(o) })))
	budget := policyv1.SchemeGroupVersion.WithKind("CapacityBudget")
	add(budget, admission.WithValidator(scheme, reviewed(warned(typed(budget.GroupKind(), func(_ context.Context, o *policyv1.CapacityBudget) field.ErrorList { return v.CapacityBudget(o) }),
		(*policyv1.CapacityBudget).FieldsNotActedOn), rev)))
	clusterBudget := policyv1.SchemeGroupVersion.WithKind("ClusterCapacityBudget")
	add(clusterBudget, admission.WithValidator(scheme, reviewed(warned(typed(clusterBudget.GroupKind(), func(_ context.Context, o *policyv1.ClusterCapacityBudget) field.ErrorList {
		return v.ClusterCapacityBudget(o)
	}),
		(*policyv1.ClusterCapacityBudget).FieldsNotActedOn), rev)))
	policy := policyv1.SchemeGroupVersion.WithKind("CapacityPolicy")
	add(policy, admission.WithValidator(scheme, reviewed(warned(typed(policy.GroupKind(), v.CapacityPolicy), (*policyv1.CapacityPolicy).FieldsNotActedOn), rev)))
	// A CapacityException's expiresAt is checked against the clock when it is written: on
	// create, and on an update that changes it.
	exception := policyv1.SchemeGroupVersion.WithKind("CapacityException")
	exv := typed(exception.GroupKind(), func(_ context.Context, o *policyv1.CapacityException) field.ErrorList {
		return v.CapacityException(o, nil)
	})
	exv.(*typedValidator[*policyv1.CapacityException]).validateUpdate = func(_ context.Context, old, o *policyv1.CapacityException) field.ErrorList {
		return v.CapacityException(o, old)
	}
	add(exception, admission.WithValidator(scheme, reviewed(warned(exv, (*policyv1.CapacityException).FieldsNotActedOn), rev)))
	return out
}

// typedValidator adapts a field.ErrorList validator to admission: an Invalid error (HTTP 422)
// whose causes name the fields, as the API server's own validation reports them.
type typedValidator[T client.Object] struct {
	kind     schema.GroupKind
	validate func(context.Context, T) field.ErrorList
	// validateUpdate, when set, validates an update with the old object instead of validate.
	validateUpdate func(ctx context.Context, old, obj T) field.ErrorList
	rev            Reviewer
	// warn, when set, names fields accepted but not acted on: admission warnings.
	warn func(T) field.ErrorList
}

// warned adds warnings about fields accepted but not acted on to a validator.
func warned[T client.Object](v admission.Validator[T], warn func(T) field.ErrorList) admission.Validator[T] {
	t := v.(*typedValidator[T])
	t.warn = warn
	return t
}

// Reviewer runs the policy engine's karpenter.admission decision point on an object that
// passed validation: Warn results and the object's $/hour impact come back as admission
// warnings, Deny results refuse it.
type Reviewer interface {
	Review(ctx context.Context, operation string, obj, old client.Object) (warnings, denials []string)
}

// reviewed adds the policy review to a validator; nil adds nothing.
func reviewed[T client.Object](v admission.Validator[T], rev Reviewer) admission.Validator[T] {
	t := v.(*typedValidator[T])
	t.rev = rev
	return t
}

func typed[T client.Object](kind schema.GroupKind, validate func(context.Context, T) field.ErrorList) admission.Validator[T] {
	return &typedValidator[T]{kind: kind, validate: validate}
}

func (t *typedValidator[T]) check(ctx context.Context, old, obj T, update bool) error {
	// An object on its way out is not held to rules it may predate: removing finalizers
	// must always succeed.
	if obj.GetDeletionTimestamp() != nil {
		return nil
	}
	var errs field.ErrorList
	if update && t.validateUpdate != nil {
		errs = t.validateUpdate(ctx, old, obj)
	} else {
		errs = t.validate(ctx, obj)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(t.kind, obj.GetName(), errs)
	}
	return nil
}

func (t *typedValidator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	var none T
	if err := t.check(ctx, none, obj, false); err != nil {
		return nil, err
	}
	return t.review(ctx, "CREATE", obj, nil)
}

func (t *typedValidator[T]) ValidateUpdate(ctx context.Context, old, obj T) (admission.Warnings, error) {
	if err := t.check(ctx, old, obj, true); err != nil {
		return nil, err
	}
	return t.review(ctx, "UPDATE", obj, old)
}

func (t *typedValidator[T]) review(ctx context.Context, op string, obj T, old client.Object) (admission.Warnings, error) {
	if obj.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	var notActedOn admission.Warnings
	if t.warn != nil {
		for _, e := range t.warn(obj) {
			notActedOn = append(notActedOn, fmt.Sprintf("%s %s: %s: %s", t.kind.Kind, obj.GetName(), e.Field, e.Detail))
		}
	}
	if t.rev == nil {
		return notActedOn, nil
	}
	warnings, denials := t.rev.Review(ctx, op, obj, old)
	warnings = append(notActedOn, warnings...)
	if len(denials) > 0 {
		return warnings, apierrors.NewForbidden(schema.GroupResource{Group: t.kind.Group, Resource: t.kind.Kind}, obj.GetName(),
			fmt.Errorf("denied by policy: %s", strings.Join(denials, "; ")))
	}
	return warnings, nil
}

func (t *typedValidator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}
