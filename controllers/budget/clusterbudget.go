package budget

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/karpenter-policy/karpenter/controllers/status"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/audit"
)

// ClusterBudgetStatus keeps ClusterCapacityBudget status: the namespaces it selects, their
// run-rate, in-flight reservation and Spot share together (the shared attribution, Usage),
// their spend this month accrued in status, the limit in force and what remains, the
// forecast and alerts, and the pods it holds back, and its karpenter_cluster_budget_* gauges. It reuses
// BudgetStatus's rules.
type ClusterBudgetStatus struct {
	*BudgetStatus
}

// NewClusterBudgetStatus returns the ClusterCapacityBudget status controller, writing Events
// through the budget status controller's recorder.
func NewClusterBudgetStatus(b *BudgetStatus) *ClusterBudgetStatus {
	return &ClusterBudgetStatus{BudgetStatus: b}
}

// Register watches ClusterCapacityBudgets, NodeClaims, Nodes coming and going, and namespaces'
// labels (which decide what the budgets select).
func (r *ClusterBudgetStatus) Register(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list policyv1.ClusterCapacityBudgetList
		if err := r.client.List(ctx, &list); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, b := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: b.Name}})
		}
		return out
	})
	nodesComeAndGo := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	labelsChange := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	}}
	return ctrl.NewControllerManagedBy(mgr).Named("policy.clustercapacitybudget.status").WithOptions(ratelimit.Options(1)).
		For(&policyv1.ClusterCapacityBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&karpv1.NodeClaim{}, all).Watches(&corev1.Node{}, all, builder.WithPredicates(nodesComeAndGo)).
		Watches(&corev1.Namespace{}, all, builder.WithPredicates(labelsChange)).Complete(r)
}

// maxListedNamespaces is how many namespaces status names (the CRD's maxItems).
const maxListedNamespaces = 100

// Reconcile brings one ClusterCapacityBudget's status up to date.
func (r *ClusterBudgetStatus) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &policyv1.ClusterCapacityBudget{}
	if err := r.client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			forgetCluster(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	all, err := r.usage.ByNamespace(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	var nss corev1.NamespaceList
	if err := r.client.List(ctx, &nss); err != nil {
		return reconcile.Result{}, err
	}
	now := r.clock.Now().UTC()
	st := c.Status.DeepCopy()
	st.ObservedGeneration = c.Generation
	conds := status.Conditions{List: &st.Conditions, Generation: c.Generation}
	sel, selErr := metav1.LabelSelectorAsSelector(&c.Spec.NamespaceSelector)
	var members []string
	var usage policies.Usage
	if selErr == nil {
		for _, ns := range nss.Items {
			if sel.Matches(labels.Set(ns.Labels)) {
				members = append(members, ns.Name)
				usage = usage.Add(all[ns.Name])
			}
		}
	}
	sort.Strings(members)
	st.NamespaceCount = int32(len(members))
	st.Namespaces = members[:min(len(members), maxListedNamespaces)]
	view := c.AsBudget()
	accrue(&st.CapacityBudgetStatus, now)
	st.HourlyCost, st.InFlightHourlyCost = money(usage.HourlyCost), money(usage.InFlightHourlyCost)
	spot := SpotStatusOf(usage, policies.SpecSpotBounds(view))
	st.BlockedPods = int32(r.heldBy(audit.PolicyName(policies.BudgetSource(view))))
	st.ActiveSchedule = nil
	if i, ok := policies.ActiveSchedule(view, now); ok {
		i32 := int32(i)
		st.ActiveSchedule = &i32
	}
	var bif *policies.BudgetInForce
	evalErr := selErr
	if evalErr == nil {
		bif, evalErr = r.engine.BudgetInForce(ctx, policies.Namespace{}, view, usage, now)
	}
	if evalErr != nil {
		st.HourlyLimit, st.RemainingHourlyCost = "", ""
		conds.Set(policyv1.ConditionTypeReady, false, "", "EvaluationFailed", evalErr.Error())
		metrics.ClusterBudgetHourlyLimit.DeleteLabelValues(c.Name)
	} else {
		conds.Set(policyv1.ConditionTypeReady, true, "Evaluated", "", fmt.Sprintf("selects %d namespaces", len(members)))
		committed := usage.HourlyCost + usage.InFlightHourlyCost
		if bif.HasLimit {
			st.HourlyLimit, st.RemainingHourlyCost = money(bif.HourlyLimit), money(bif.Remaining)
			conds.Set(policyv1.ConditionTypeBudgetExceeded, committed > bif.HourlyLimit+0.005, "OverLimit", "WithinLimit",
				fmt.Sprintf("hourly cost %.2f of its %d namespaces (%.2f running, %.2f in flight) of %.2f (%s)", committed, len(members), usage.HourlyCost, usage.InFlightHourlyCost, bif.HourlyLimit, bif.LimitReason))
			metrics.ClusterBudgetHourlyLimit.WithLabelValues(c.Name).Set(bif.HourlyLimit)
		} else {
			st.HourlyLimit, st.RemainingHourlyCost = "", ""
			conds.Set(policyv1.ConditionTypeBudgetExceeded, false, "", "NoLimit", "the budget limits no cost")
			metrics.ClusterBudgetHourlyLimit.DeleteLabelValues(c.Name)
		}
		spot = SpotStatusOf(usage, bif.Spot)
		conds.Set(policyv1.ConditionTypeSpotShareOutOfRange, spot.OutOfRange, "OutOfRange", "InRange", spot.Message)
		r.forecastStatus(c, "ClusterCapacityBudget "+c.Name, view, view, &st.CapacityBudgetStatus, bif, usage, conds, now)
	}
	st.SpotPercent = spot.Percent
	metrics.ClusterBudgetHourlyCost.WithLabelValues(c.Name, "running").Set(usage.HourlyCost)
	metrics.ClusterBudgetHourlyCost.WithLabelValues(c.Name, "inflight").Set(usage.InFlightHourlyCost)
	a, z := c.Status.DeepCopy(), st.DeepCopy()
	a.MonthToDateCost, a.AccruedAt, z.MonthToDateCost, z.AccruedAt = "", nil, "", nil
	a.ForecastMonthCost, a.ForecastPercent, z.ForecastMonthCost, z.ForecastPercent = "", "", "", ""
	changed := !equality.Semantic.DeepEqual(a, z) || c.Status.AccruedAt == nil || now.Sub(c.Status.AccruedAt.Time) >= BudgetRefresh
	c.Status = *st
	return status.Write(ctx, r.client, c, changed, BudgetRefresh)
}

// heldBy counts the pods the provisioner's last decisions held back for a policy (audit
// PolicyName), over every namespace: the held decisions' "pods" property.
func (r *ClusterBudgetStatus) heldBy(policy string) int {
	results, _ := r.cluster.PolicyDecisions().List()
	n := 0
	for _, res := range results {
		if res.Policy == policy && res.Properties["decision"] == "held" {
			k, _ := strconv.Atoi(res.Properties["pods"])
			n += k
		}
	}
	return n
}

// forgetCluster drops a deleted ClusterCapacityBudget's gauges.
func forgetCluster(name string) {
	id := map[string]string{"clustercapacitybudget": name}
	for _, g := range []*prometheus.GaugeVec{metrics.ClusterBudgetHourlyCost, metrics.ClusterBudgetHourlyLimit, metrics.ClusterBudgetForecastMonthCost,
		metrics.ClusterBudgetLimitUsed, metrics.ClusterBudgetAlertFiring} {
		g.DeletePartialMatch(id)
	}
}
