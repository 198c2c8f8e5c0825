package nodeclass

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// EC2Resolver finds what an EC2NodeClass selects in EC2 and IAM; the AWS provider
// implements it (providers/aws.Resolver). Its errors name the selector that matched
// nothing.
type EC2Resolver interface {
	Subnets(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.Subnet, error)
	SecurityGroups(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.SecurityGroup, error)
	AMIs(ctx context.Context, nc *awsv1.EC2NodeClass) ([]awsv1.AMI, error)
	InstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error)
	DeleteInstanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) error
	DeleteLaunchTemplates(ctx context.Context, nc *awsv1.EC2NodeClass) error
}

// EC2Finalizer keeps an EC2NodeClass until no NodeClaim uses it and the launch templates and
// the instance profile made for it are deleted.
const EC2Finalizer = "karpenter.k8s.aws/termination"

// EC2Resync is how often a node class is resolved again: subnets, security groups and AMIs
// change in EC2 without a Kubernetes event (a new AMI release, a subnet tagged).
var EC2Resync = 5 * time.Minute

// EC2 reconciles EC2NodeClass status: subnets, security groups, AMIs, the instance profile,
// one condition for each and Ready.
type EC2 struct {
	client   client.Client
	resolver EC2Resolver
}

// NewEC2 builds the controller.
func NewEC2(c client.Client, r EC2Resolver) *EC2 { return &EC2{client: c, resolver: r} }

// Register watches EC2NodeClasses.
func (e *EC2) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("nodeclass.ec2").WithOptions(ratelimit.Options(1)).For(&awsv1.EC2NodeClass{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), e))
}

// Reconcile resolves the node class and writes what it found, or on deletion cleans up.
func (e *EC2) Reconcile(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	if !nc.DeletionTimestamp.IsZero() {
		return e.finalize(ctx, nc)
	}
	if !controllerutil.ContainsFinalizer(nc, EC2Finalizer) {
		patch := client.MergeFrom(nc.DeepCopy())
		controllerutil.AddFinalizer(nc, EC2Finalizer)
		if err := e.client.Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	before := nc.DeepCopy()
	set := func(t string, err error, reason string) bool {
		c := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, ObservedGeneration: nc.Generation}
		if err != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, err.Error()
		}
		meta.SetStatusCondition(&nc.Status.Conditions, c)
		return err == nil
	}
	subnets, err := e.resolver.Subnets(ctx, nc)
	ready := set(awsv1.ConditionTypeSubnetsReady, err, "SubnetsNotFound")
	if err == nil {
		nc.Status.Subnets = subnets
	}
	groups, err := e.resolver.SecurityGroups(ctx, nc)
	ready = set(awsv1.ConditionTypeSecurityGroupsReady, err, "SecurityGroupsNotFound") && ready
	if err == nil {
		nc.Status.SecurityGroups = groups
	}
	amis, err := e.resolver.AMIs(ctx, nc)
	ready = set(awsv1.ConditionTypeAMIsReady, err, "AMINotFound") && ready
	if err == nil {
		nc.Status.AMIs = amis
	}
	profile, err := e.resolver.InstanceProfile(ctx, nc)
	ready = set(awsv1.ConditionTypeInstanceProfileReady, err, "InstanceProfileNotReady") && ready
	if err == nil {
		nc.Status.InstanceProfile = profile
	}
	readiness := metav1.Condition{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: nc.Generation}
	if !ready {
		var notReady []string
		for _, c := range nc.Status.Conditions {
			if c.Type != awsv1.ConditionTypeReady && c.Status != metav1.ConditionTrue {
				notReady = append(notReady, c.Type)
			}
		}
		readiness.Status, readiness.Reason = metav1.ConditionFalse, "NotReady"
		readiness.Message = fmt.Sprintf("%v not ready", notReady)
	}
	meta.SetStatusCondition(&nc.Status.Conditions, readiness)
	setUnsupportedFields(nc)
	nc.Status.ObservedGeneration = nc.Generation
	if !equality.Semantic.DeepEqual(before.Status, nc.Status) {
		if err := e.client.Status().Patch(ctx, nc, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if !ready {
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}
	return reconcile.Result{RequeueAfter: EC2Resync}, nil
}

// finalize waits for the node class's NodeClaims to go, deletes its launch templates and its
// instance profile, and lets the node class go.
func (e *EC2) finalize(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, EC2Finalizer) {
		return reconcile.Result{}, nil
	}
	claims := &karpv1.NodeClaimList{}
	if err := e.client.List(ctx, claims); err != nil {
		return reconcile.Result{}, err
	}
	for _, c := range claims.Items {
		if ref := c.Spec.NodeClassRef; ref != nil && ref.Group == awsv1.SchemeGroupVersion.Group && ref.Kind == "EC2NodeClass" && ref.Name == nc.Name {
			return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
		}
	}
	if err := e.resolver.DeleteLaunchTemplates(ctx, nc); err != nil {
		return reconcile.Result{}, err
	}
	if err := e.resolver.DeleteInstanceProfile(ctx, nc); err != nil {
		return reconcile.Result{}, err
	}
	patch := client.MergeFrom(nc.DeepCopy())
	controllerutil.RemoveFinalizer(nc, EC2Finalizer)
	return reconcile.Result{}, client.IgnoreNotFound(e.client.Patch(ctx, nc, patch))
}

// setUnsupportedFields sets the UnsupportedFields condition while the class sets fields
// launches do not use yet, and removes it once none is set. It does not touch readiness: the
// class launches, without what those fields ask for.
func setUnsupportedFields(nc *awsv1.EC2NodeClass) {
	fields := nc.FieldsNotActedOn()
	if len(fields) == 0 {
		meta.RemoveStatusCondition(&nc.Status.Conditions, awsv1.ConditionTypeUnsupportedFields)
		return
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Field
	}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: awsv1.ConditionTypeUnsupportedFields, Status: metav1.ConditionTrue,
		Reason: "NotActedOn", Message: strings.Join(names, ", ") + ": accepted but not acted on yet (docs/aws.md)", ObservedGeneration: nc.Generation})
}
