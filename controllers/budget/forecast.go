package budget

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/karpenter-policy/karpenter/controllers/status"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/policies"
)

// monthBounds are the start of the calendar month (UTC) now is in and of the next.
func monthBounds(now time.Time) (start, end time.Time) {
	now = now.UTC()
	start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0)
}

// Forecast is what a budget's namespace spends this month if it runs at runRate from now to
// the end of the month (UTC), on top of what it spent so far.
func Forecast(monthToDate, runRate float64, now time.Time) float64 {
	_, end := monthBounds(now)
	return monthToDate + runRate*end.Sub(now).Hours()
}

// MonthLimit is the month's limit in force for a budget (as exceptions leave it): the
// monthlyCost of the open schedule window or of the spec, or else the hourly limit in force
// times the month's hours; false when the budget limits no cost.
func MonthLimit(b *policyv1.CapacityBudget, bif *policies.BudgetInForce, now time.Time) (float64, bool) {
	limits := b.Spec.Limits
	if i, ok := policies.ActiveSchedule(b, now); ok && b.Spec.Schedules[i].Limits != nil {
		limits = b.Spec.Schedules[i].Limits
	}
	if limits != nil && limits.MonthlyCost != nil {
		if f, err := strconv.ParseFloat(string(*limits.MonthlyCost), 64); err == nil {
			return f, true
		}
	}
	if bif == nil || !bif.HasLimit {
		return 0, false
	}
	start, end := monthBounds(now)
	return bif.HourlyLimit * end.Sub(start).Hours(), true
}

// AlertState is what a budget's alerts say: the highest threshold reached, by which measure.
type AlertState struct {
	Firing  bool
	Percent int32
	Message string
	// Reached are, by threshold, whether it is reached.
	Reached map[int32]bool
}

// Alerts judges a budget's alerts: a threshold is reached when the run-rate (running and in
// flight) is at least that share of the hourly limit in force, or the forecast at least that
// share of the month's limit.
func Alerts(alerts []policyv1.BudgetAlert, runRate, hourlyLimit float64, hasHourly bool, forecast, monthLimit float64, hasMonth bool) AlertState {
	st := AlertState{Reached: map[int32]bool{}}
	sorted := append([]policyv1.BudgetAlert(nil), alerts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Percent > sorted[j].Percent })
	for _, a := range sorted {
		p := float64(a.Percent) / 100
		switch {
		case hasHourly && hourlyLimit > 0 && runRate >= p*hourlyLimit:
			st.Reached[a.Percent] = true
			if !st.Firing {
				st.Firing, st.Percent = true, a.Percent
				st.Message = fmt.Sprintf("run-rate $%.4f/hour is %.1f%% of the hourly limit $%.4f (alert at %d%%)", runRate, 100*runRate/hourlyLimit, hourlyLimit, a.Percent)
			}
		case hasMonth && monthLimit > 0 && forecast >= p*monthLimit:
			st.Reached[a.Percent] = true
			if !st.Firing {
				st.Firing, st.Percent = true, a.Percent
				st.Message = fmt.Sprintf("forecast $%.2f this month is %.1f%% of the month's limit $%.2f (alert at %d%%)", forecast, 100*forecast/monthLimit, monthLimit, a.Percent)
			}
		default:
			st.Reached[a.Percent] = false
		}
	}
	if !st.Firing && len(alerts) > 0 {
		st.Message = "no alert threshold is reached"
	}
	return st
}

// forecastStatus fills a budget's forecast, its AlertFiring condition and their metrics, and
// says in an Event when the condition turns. obj is the object the Events are about and name
// how they name it; a ClusterCapacityBudget (no namespace) has no per-namespace gauges.
func (r *BudgetStatus) forecastStatus(obj runtime.Object, name string, b, eff *policyv1.CapacityBudget, st *policyv1.CapacityBudgetStatus, bif *policies.BudgetInForce, usage policies.Usage, conds status.Conditions, now time.Time) {
	g := gaugesOf(b)
	runRate := usage.HourlyCost + usage.InFlightHourlyCost
	forecast := Forecast(parseMoney(st.MonthToDateCost), runRate, now)
	st.ForecastMonthCost = money(forecast)
	g.forecast.WithLabelValues(g.id).Set(forecast)
	g.used.DeletePartialMatch(map[string]string{g.label: g.id})
	g.firing.DeletePartialMatch(map[string]string{g.label: g.id})
	monthLimit, hasMonth := MonthLimit(eff, bif, now)
	st.ForecastPercent = ""
	if hasMonth && monthLimit > 0 {
		pct := 100 * forecast / monthLimit
		st.ForecastPercent = strconv.FormatFloat(round1(pct), 'f', 1, 64)
		g.used.WithLabelValues(g.id, "forecast").Set(pct)
	}
	hasHourly := bif != nil && bif.HasLimit
	if hasHourly && bif.HourlyLimit > 0 {
		g.used.WithLabelValues(g.id, "runrate").Set(100 * runRate / bif.HourlyLimit)
	}
	if len(b.Spec.Alerts) == 0 {
		meta.RemoveStatusCondition(&st.Conditions, policyv1.ConditionTypeAlertFiring)
		return
	}
	var hourlyLimit float64
	if hasHourly {
		hourlyLimit = bif.HourlyLimit
	}
	a := Alerts(b.Spec.Alerts, runRate, hourlyLimit, hasHourly, forecast, monthLimit, hasMonth)
	for p, reached := range a.Reached {
		v := 0.0
		if reached {
			v = 1
		}
		g.firing.WithLabelValues(g.id, strconv.Itoa(int(p))).Set(v)
	}
	was := meta.IsStatusConditionTrue(b.Status.Conditions, policyv1.ConditionTypeAlertFiring)
	conds.Set(policyv1.ConditionTypeAlertFiring, a.Firing, fmt.Sprintf("Above%dPercent", a.Percent), "BelowThresholds", a.Message)
	switch {
	case a.Firing && !was && r.recorder != nil:
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "AlertFiring", "Alert", "%s: %s", name, a.Message)
	case !a.Firing && was && r.recorder != nil:
		r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, "AlertResolved", "Alert", "%s: %s", name, a.Message)
	}
}

// budgetGauges are the forecast, limit-used and alert gauges of a budget, and its label:
// karpenter_budget_* by namespace, or karpenter_cluster_budget_* by ClusterCapacityBudget.
type budgetGauges struct {
	forecast, used, firing *prometheus.GaugeVec
	label, id              string
}

func gaugesOf(b *policyv1.CapacityBudget) budgetGauges {
	if policies.IsClusterBudget(b) {
		return budgetGauges{metrics.ClusterBudgetForecastMonthCost, metrics.ClusterBudgetLimitUsed, metrics.ClusterBudgetAlertFiring, "clustercapacitybudget", b.Name}
	}
	return budgetGauges{metrics.BudgetForecastMonthCost, metrics.BudgetLimitUsed, metrics.BudgetAlertFiring, "namespace", b.Namespace}
}
