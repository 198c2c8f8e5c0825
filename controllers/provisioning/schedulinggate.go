package provisioning

import (
	"context"
	"encoding/json"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// The CapacityBudget gate (docs/architecture.md, "CapacityBudget gate"): the admission
// webhook gates new pods of namespaces whose budget can hold pods back, and the provisioner
// lifts the gate from the pods it has placed within the budget: at once from those placed on
// nodes with room, and from those placed on a new NodeClaim once the cloud provider has
// launched it. A launch that fails (insufficient capacity) leaves its pods gated, to be solved
// again, so kube-scheduler never binds them into room the plan gave to other pods. Pods a
// budget holds back stay gated.

// liftGate is a JSON patch that removes the pod's scheduling gates only while the
// CapacityBudget gate is the only one: a pod some other controller gates keeps both.
var liftGate = func() []byte {
	gate := []corev1.PodSchedulingGate{{Name: policyv1.CapacityBudgetGate}}
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": "/spec/schedulingGates", "value": gate},
		{"op": "remove", "path": "/spec/schedulingGates"},
	})
	return patch
}()

// registerGate lifts the gate from pods nominated to a NodeClaim when it launches.
func (p *Provisioner) registerGate(mgr ctrl.Manager) error {
	launched := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isLaunched(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return !isLaunched(e.ObjectOld) && isLaunched(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("provisioning.gate").WithOptions(ratelimit.Options(1)).
		For(&karpv1.NodeClaim{}, builder.WithPredicates(launched)).
		Complete(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			p.liftLaunched(ctx)
			return reconcile.Result{}, nil
		}))
}

func isLaunched(o client.Object) bool {
	nc, ok := o.(*karpv1.NodeClaim)
	return ok && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched)
}

// liftLaunched lifts the gate from the gated pods nominated to a node or a launched NodeClaim.
func (p *Provisioner) liftLaunched(ctx context.Context) {
	var pods []*corev1.Pod
	for _, pod := range p.cluster.BudgetGated() {
		if target, ok := p.cluster.Nominations().NominationOf(pod); ok && p.cluster.Launched(target) {
			pods = append(pods, pod)
		}
	}
	p.lift(ctx, pods)
}

// liftParallelism is how many pods' gates are lifted at once.
const liftParallelism = 32

// lift removes the CapacityBudget gate from the pods that carry it; the others are left alone.
// A pod whose patch fails stays gated and is lifted on a later pass.
func (p *Provisioner) lift(ctx context.Context, pods []*corev1.Pod) {
	gated := make([]*corev1.Pod, 0, len(pods))
	for _, pod := range pods {
		if scheduling.IsBudgetGated(pod) {
			gated = append(gated, pod)
		}
	}
	if len(gated) == 0 {
		return
	}
	var lifted, failed atomic.Int32
	workqueue.ParallelizeUntil(ctx, liftParallelism, len(gated), func(i int) {
		pod := gated[i]
		// A fresh object: the patch's answer is decoded into it, and the cache's must not change.
		target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
		err := p.client.Patch(ctx, target, client.RawPatch(types.JSONPatchType, liftGate))
		switch {
		case err == nil:
			lifted.Add(1)
		case apierrors.IsNotFound(err), apierrors.IsInvalid(err):
			// Gone, or no longer gated by us alone (the test operation failed).
		default:
			failed.Add(1)
			log.FromContext(ctx).V(1).Info("lifting the CapacityBudget gate", "pod", client.ObjectKeyFromObject(pod), "error", err.Error())
		}
	})
	log.FromContext(ctx).V(1).Info("lifted the CapacityBudget gate", "pods", lifted.Load(), "failed", failed.Load())
}
