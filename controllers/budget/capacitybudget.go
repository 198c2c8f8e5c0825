// Package budget keeps the spending budgets current: CapacityBudget and ClusterCapacityBudget
// status (run-rate, in-flight reservation, spend this month and its forecast, Spot share, the
// limit in force and what remains, alerts with their Events and gauges), the showback gauges
// over the cluster model's attribution (controllers/state.Attribution), and the CapacityBudget
// gate's namespace label (NamespaceGate). It never writes spec, and no labels or annotations
// but that gate label; it decides nothing the planner or the policy engine decides.
package budget

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/karpenter-policy/karpenter/controllers/status"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
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
	"github.com/karpenter-policy/karpenter/controllers/state"
	"github.com/karpenter-policy/karpenter/policies"
)

// BudgetStatus keeps CapacityBudget status: the namespace's run-rate on running nodes and
// in flight (by the cost attribution of docs/architecture.md, "Cost attribution"), its spend this month accrued in
// status so that a restart loses nothing, its Spot share, the limit in force and what remains,
// and the pods the budget keeps pending.
type BudgetStatus struct {
	client   client.Client
	cluster  *state.Cluster
	engine   *policies.Engine
	clock    clock.Clock
	usage    *state.Attribution
	recorder events.EventRecorder
}

// WithRecorder sets where the alerts' Events go.
func (r *BudgetStatus) WithRecorder(rec events.EventRecorder) *BudgetStatus {
	r.recorder = rec
	return r
}

// NewBudgetStatus returns the CapacityBudget status controller.
func NewBudgetStatus(c client.Client, cluster *state.Cluster, usage *state.Attribution, e *policies.Engine, clk clock.Clock) *BudgetStatus {
	return &BudgetStatus{client: c, cluster: cluster, usage: usage, engine: e, clock: clk}
}

// BudgetRefresh is how often a budget's status is brought up to date without a change to
// trigger it: the spend this month accrues, schedule windows open and close.
const BudgetRefresh = 15 * time.Second

// Register watches CapacityBudgets, and NodeClaims and Nodes, which change what namespaces run.
func (r *BudgetStatus) Register(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list policyv1.CapacityBudgetList
		if err := r.client.List(ctx, &list); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, b := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&b)})
		}
		return out
	})
	// Status writes do not trigger a reconcile; spec changes, NodeClaims and nodes coming and
	// going do, and BudgetRefresh catches pods binding.
	nodesComeAndGo := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	return ctrl.NewControllerManagedBy(mgr).Named("policy.capacitybudget.status").WithOptions(ratelimit.Options(1)).
		For(&policyv1.CapacityBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&karpv1.NodeClaim{}, all).Watches(&corev1.Node{}, all, builder.WithPredicates(nodesComeAndGo)).Complete(r)
}

// Reconcile brings one budget's status up to date.
func (r *BudgetStatus) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	b := &policyv1.CapacityBudget{}
	if err := r.client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			forget(req.Namespace)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	all, err := r.usage.ByNamespace(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	ns := policies.Namespace{Name: b.Namespace}
	nsObj := &corev1.Namespace{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: b.Namespace}, nsObj); err == nil {
		ns.Labels = nsObj.Labels
	}
	now := r.clock.Now().UTC()
	usage := all[b.Namespace]
	bif, evalErr := r.engine.BudgetInForce(ctx, ns, b, usage, now)
	st := b.Status.DeepCopy()
	st.ObservedGeneration = b.Generation
	accrue(st, now)
	// Spend accrues with every write; a reconcile that changes nothing else writes only
	// once per BudgetRefresh.
	unchanged := func() bool {
		a, z := b.Status.DeepCopy(), st.DeepCopy()
		a.MonthToDateCost, a.AccruedAt, z.MonthToDateCost, z.AccruedAt = "", nil, "", nil
		// The forecast moves with the clock, as the spend does.
		a.ForecastMonthCost, a.ForecastPercent, z.ForecastMonthCost, z.ForecastPercent = "", "", "", ""
		return equality.Semantic.DeepEqual(a, z) && b.Status.AccruedAt != nil && now.Sub(b.Status.AccruedAt.Time) < BudgetRefresh
	}
	st.HourlyCost, st.InFlightHourlyCost = money(usage.HourlyCost), money(usage.InFlightHourlyCost)
	bounds := spotBoundsOf(b, bif)
	spot := SpotStatusOf(usage, bounds)
	metrics.BudgetSpotRange.WithLabelValues(b.Namespace, "min").Set(bounds.MinPercent)
	metrics.BudgetSpotRange.WithLabelValues(b.Namespace, "max").Set(bounds.MaxPercent)
	st.SpotPercent = spot.Percent
	st.BlockedPods = int32(r.cluster.PolicyBlocks().PolicyBlocked(b.Namespace))
	st.ActiveSchedule = nil
	if i, ok := policies.ActiveSchedule(b, now); ok {
		i32 := int32(i)
		st.ActiveSchedule = &i32
	}
	conds := status.Conditions{List: &st.Conditions, Generation: b.Generation}
	if evalErr != nil {
		st.HourlyLimit, st.RemainingHourlyCost = "", ""
		conds.Set(policyv1.ConditionTypeReady, false, "", "EvaluationFailed", evalErr.Error())
		// No limit is known to be in force: the gauge does not keep the last one.
		metrics.BudgetHourlyLimit.DeleteLabelValues(b.Namespace)
	} else {
		conds.Set(policyv1.ConditionTypeReady, true, "Evaluated", "", "")
		committed := usage.HourlyCost + usage.InFlightHourlyCost
		if bif.HasLimit {
			st.HourlyLimit, st.RemainingHourlyCost = money(bif.HourlyLimit), money(bif.Remaining)
			over := committed > bif.HourlyLimit+0.005
			conds.Set(policyv1.ConditionTypeBudgetExceeded, over, "OverLimit", "WithinLimit",
				fmt.Sprintf("hourly cost %.2f (%.2f running, %.2f in flight) of %.2f (%s)", committed, usage.HourlyCost, usage.InFlightHourlyCost, bif.HourlyLimit, bif.LimitReason))
			metrics.BudgetHourlyLimit.WithLabelValues(b.Namespace).Set(bif.HourlyLimit)
		} else {
			st.HourlyLimit, st.RemainingHourlyCost = "", ""
			conds.Set(policyv1.ConditionTypeBudgetExceeded, false, "", "NoLimit", "the budget limits no cost")
			// The limits were removed (or an exception lifts them): no series for a limit
			// that is not there.
			metrics.BudgetHourlyLimit.DeleteLabelValues(b.Namespace)
		}
		conds.Set(policyv1.ConditionTypeSpotShareOutOfRange, spot.OutOfRange, "OutOfRange", "InRange", spot.Message)
		r.forecastStatus(b, "CapacityBudget "+b.Namespace+"/"+b.Name, b, r.engine.EffectiveBudget(b, ns, now), st, bif, usage, conds, now)
	}
	metrics.BudgetHourlyCost.WithLabelValues(b.Namespace, "running").Set(usage.HourlyCost)
	metrics.BudgetHourlyCost.WithLabelValues(b.Namespace, "inflight").Set(usage.InFlightHourlyCost)
	metrics.BudgetSpotPercent.WithLabelValues(b.Namespace).Set(spot.Value)
	changed := !unchanged()
	b.Status = *st
	return status.Write(ctx, r.client, b, changed, BudgetRefresh)
}

// accrue adds the spend since status was last brought up to date, at the run-rate status
// held then (what ran in the meantime), and starts over at a new calendar month (UTC).
func accrue(st *policyv1.CapacityBudgetStatus, now time.Time) {
	spent := parseMoney(st.MonthToDateCost)
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if st.AccruedAt != nil {
		from := st.AccruedAt.UTC()
		if from.Before(monthStart) {
			spent, from = 0, monthStart
		}
		if now.After(from) {
			spent += parseMoney(st.HourlyCost) * now.Sub(from).Hours()
		}
	} else {
		spent = 0
	}
	st.MonthToDateCost = policyv1.Money(strconv.FormatFloat(spent, 'f', 4, 64))
	st.AccruedAt = &metav1.Time{Time: now}
}

// SpotStatus is what a budget's status, SpotShareOutOfRange condition and
// karpenter_budget_spot_percent gauge say of a namespace's Spot share: one share
// (policies.SpotBounds.Share), one range test (policies.SpotBounds.InRange).
type SpotStatus struct {
	// Value is the share in percent, for the gauge; Percent is it rounded to a tenth, for status.
	Value   float64
	Percent string
	// OutOfRange and Message are the condition's status and message.
	OutOfRange bool
	Message    string
}

// SpotStatusOf is the Spot status of a namespace's usage under the bounds in force.
func SpotStatusOf(u policies.Usage, b policies.SpotBounds) SpotStatus {
	share := u.SpotShare(b)
	st := SpotStatus{Value: share.Percent, Percent: strconv.FormatFloat(round1(share.Percent), 'f', 1, 64), OutOfRange: !b.InRange(share),
		Message: fmt.Sprintf("Spot share above the %.1f-vCPU on-demand base is %.1f%%, bounds [%.0f, %.0f]", b.OnDemandBaseCPU, share.Percent, b.MinPercent, b.MaxPercent)}
	if !share.Counted {
		st.Message = "nothing runs above the on-demand base"
	}
	return st
}

// spotBoundsOf are the Spot bounds in force: as evaluated, or when the budget could not be
// evaluated, its spec's.
func spotBoundsOf(b *policyv1.CapacityBudget, bif *policies.BudgetInForce) policies.SpotBounds {
	if bif != nil {
		return bif.Spot
	}
	return policies.SpecSpotBounds(b)
}

// money prints an amount with four decimals: a small namespace's run-rate is a few cents an
// hour, and the spend this month accrues from the run-rate status holds.
func money(f float64) policyv1.Money {
	return policyv1.Money(strconv.FormatFloat(max(0, f), 'f', 4, 64))
}

func parseMoney(m policyv1.Money) float64 {
	f, err := strconv.ParseFloat(string(m), 64)
	if err != nil {
		return 0
	}
	return f
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// forget drops a deleted budget's gauges.
func forget(namespace string) {
	metrics.BudgetHourlyLimit.DeleteLabelValues(namespace)
	metrics.BudgetSpotPercent.DeleteLabelValues(namespace)
	metrics.BudgetSpotRange.DeletePartialMatch(map[string]string{"namespace": namespace})
	metrics.BudgetHourlyCost.DeleteLabelValues(namespace, "running")
	metrics.BudgetHourlyCost.DeleteLabelValues(namespace, "inflight")
	metrics.BudgetForecastMonthCost.DeleteLabelValues(namespace)
	metrics.BudgetLimitUsed.DeletePartialMatch(map[string]string{"namespace": namespace})
	metrics.BudgetAlertFiring.DeletePartialMatch(map[string]string{"namespace": namespace})
}
