package policy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/karpenter-policy/karpenter/controllers/status"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/policies"
)

// ExceptionStatus keeps CapacityException status: Active and Expired, by the same test every
// enforcement point makes (ActiveAt with the clock's now), and the namespaces it names or
// selects. At expiresAt it writes Expired and says so in an Event; the decisions themselves
// stop honouring the exception at that instant without waiting for it. It also keeps the
// karpenter_policy_exceptions gauge.
type ExceptionStatus struct {
	client   client.Client
	clock    clock.Clock
	recorder events.EventRecorder
}

// NewExceptionStatus returns the CapacityException status controller.
func NewExceptionStatus(c client.Client, recorder events.EventRecorder, clk clock.Clock) *ExceptionStatus {
	return &ExceptionStatus{client: c, clock: clk, recorder: recorder}
}

// ExceptionRefresh is how often an exception's status is looked at again while it is active,
// so that its namespaces and the gauge follow, and it is marked Expired at most this long
// after expiresAt.
const ExceptionRefresh = time.Minute

// Register watches CapacityExceptions, and Namespaces (a label change changes which the
// exceptions select).
func (r *ExceptionStatus) Register(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list policyv1.CapacityExceptionList
		if err := r.client.List(ctx, &list); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, e := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&e)})
		}
		return out
	})
	labelsChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	}}
	return ctrl.NewControllerManagedBy(mgr).Named("policy.capacityexception.status").WithOptions(ratelimit.Options(1)).
		For(&policyv1.CapacityException{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, all, builder.WithPredicates(labelsChanged)).Complete(r)
}

// maxNamespacesListed is how many namespaces status lists (the CRD's maxItems).
const maxNamespacesListed = 100

// Reconcile brings one exception's status up to date.
func (r *ExceptionStatus) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	defer r.countAll(ctx)
	ex := &policyv1.CapacityException{}
	if err := r.client.Get(ctx, req.NamespacedName, ex); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var nsList corev1.NamespaceList
	if err := r.client.List(ctx, &nsList); err != nil {
		return reconcile.Result{}, err
	}
	nss := make([]policies.Namespace, 0, len(nsList.Items))
	for _, ns := range nsList.Items {
		nss = append(nss, policies.Namespace{Name: ns.Name, Labels: ns.Labels})
	}
	names, selectErr := policies.ExceptionNamespaces(ex, nss)
	now := r.clock.Now()
	active := ex.ActiveAt(now)
	// The status written last said Active: this reconcile turns it (a new leader after a
	// restart turns it too, from the status the last one wrote).
	wasActive := meta.IsStatusConditionTrue(ex.Status.Conditions, policyv1.ConditionTypeActive)
	st := ex.Status.DeepCopy()
	st.ObservedGeneration = ex.Generation
	st.NamespaceCount = int32(len(names))
	st.Namespaces = names[:min(len(names), maxNamespacesListed)]
	expires := ex.Spec.ExpiresAt.UTC().Format(time.RFC3339)
	conds := status.Conditions{List: &st.Conditions, Generation: ex.Generation}
	if active {
		conds.Set(policyv1.ConditionTypeActive, true, "InForce", "", fmt.Sprintf("applies to %d namespaces until %s", len(names), expires))
		conds.Set(policyv1.ConditionTypeExpired, false, "", "NotExpired", fmt.Sprintf("expires in %s", ex.Spec.ExpiresAt.Sub(now).Round(time.Second)))
	} else {
		conds.Set(policyv1.ConditionTypeActive, false, "", "Expired", fmt.Sprintf("expired at %s", expires))
		conds.Set(policyv1.ConditionTypeExpired, true, "Expired", "", fmt.Sprintf("expired at %s; its namespaces are held to their policies again", expires))
	}
	// Ready says the exception was evaluated: its namespaces are known (a selector that does
	// not parse, written while the webhook was away, makes it select none).
	if selectErr != nil {
		conds.Set(policyv1.ConditionTypeReady, false, "", "InvalidSelector", selectErr.Error())
	} else {
		conds.Set(policyv1.ConditionTypeReady, true, "Evaluated", "", "")
	}
	changed := !equality.Semantic.DeepEqual(&ex.Status, st)
	ex.Status = *st
	if changed {
		if err := r.client.Status().Update(ctx, ex); err != nil {
			return ratelimit.Retry(err)
		}
		// The Event follows the status it reports: written once, by the reconcile that
		// turned the condition.
		if wasActive && !active {
			r.recorder.Eventf(ex, nil, corev1.EventTypeNormal, "Expired", "Expire",
				"CapacityException %s expired at %s: %s are held to their policies again; nothing running is evicted for it",
				ex.Name, expires, namespacesPhrase(names))
		}
	}
	if !active {
		return reconcile.Result{}, nil
	}
	// Come back at expiry, and at least every ExceptionRefresh.
	return reconcile.Result{RequeueAfter: min(ex.Spec.ExpiresAt.Sub(now)+time.Second, ExceptionRefresh)}, nil
}

func namespacesPhrase(names []string) string {
	switch {
	case len(names) == 0:
		return "no namespace"
	case len(names) > 10:
		return fmt.Sprintf("namespaces %s and %d more", strings.Join(names[:10], ", "), len(names)-10)
	}
	return "namespaces " + strings.Join(names, ", ")
}

// countAll sets the karpenter_policy_exceptions gauge from every exception, by state and the
// policy objects each names.
func (r *ExceptionStatus) countAll(ctx context.Context) {
	var list policyv1.CapacityExceptionList
	if err := r.client.List(ctx, &list); err != nil {
		return
	}
	now := r.clock.Now()
	type key struct{ state, kind, name string }
	counts := map[key]int{}
	for i := range list.Items {
		ex := &list.Items[i]
		state := "active"
		if !ex.ActiveAt(now) {
			state = "expired"
		}
		seen := map[key]bool{}
		for _, x := range ex.Spec.Exempt {
			k := key{state, string(x.Kind), x.Name}
			if !seen[k] {
				seen[k] = true
				counts[k]++
			}
		}
	}
	metrics.PolicyExceptions.Reset()
	for k, n := range counts {
		metrics.PolicyExceptions.WithLabelValues(k.state, k.kind, k.name).Set(float64(n))
	}
}
