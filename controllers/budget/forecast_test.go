package budget

import (
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
)

func TestForecast(t *testing.T) {
	// 2026-11-16 12:00 UTC: 14.5 days (348 h) left in November.
	now := time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC)
	if f := Forecast(100, 2, now); math.Abs(f-796) > 1e-9 {
		t.Errorf("forecast %v, want 100 + 2 x 348 = 796", f)
	}
	m := policyv1.Money("1000")
	h := policyv1.Money("2.00")
	monthly := &policyv1.CapacityBudget{Spec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{MonthlyCost: &m, HourlyCost: &h}}}
	if l, ok := MonthLimit(monthly, &policies.BudgetInForce{HasLimit: true, HourlyLimit: 2}, now); !ok || l != 1000 {
		t.Errorf("monthlyCost: %v %v", l, ok)
	}
	hourly := &policyv1.CapacityBudget{Spec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{HourlyCost: &h}}}
	if l, ok := MonthLimit(hourly, &policies.BudgetInForce{HasLimit: true, HourlyLimit: 2}, now); !ok || l != 2*720 {
		t.Errorf("hourly x 720 hours of November: %v %v", l, ok)
	}
	night := policyv1.Money("300")
	scheduled := &policyv1.CapacityBudget{Spec: policyv1.CapacityBudgetSpec{Limits: &policyv1.BudgetLimits{MonthlyCost: &m},
		Schedules: []policyv1.BudgetSchedule{{Schedule: "0 0 * * *", Duration: metav1.Duration{Duration: 24 * time.Hour}, Limits: &policyv1.BudgetLimits{MonthlyCost: &night}}}}}
	if l, ok := MonthLimit(scheduled, nil, now); !ok || l != 300 {
		t.Errorf("the open window's monthlyCost: %v %v", l, ok)
	}
	if _, ok := MonthLimit(&policyv1.CapacityBudget{}, &policies.BudgetInForce{}, now); ok {
		t.Error("a budget without limits has no month's limit")
	}
}

func TestAlerts(t *testing.T) {
	alerts := []policyv1.BudgetAlert{{Percent: 50}, {Percent: 80}, {Percent: 100}}
	for name, tc := range map[string]struct {
		runRate, forecast float64
		firing            bool
		percent           int32
		reached           []int32
	}{
		"quiet":                          {runRate: 0.5, forecast: 300, firing: false},
		"run-rate at 85% of the hourly":  {runRate: 1.7, forecast: 300, firing: true, percent: 80, reached: []int32{50, 80}},
		"forecast past the month's":      {runRate: 0.5, forecast: 1100, firing: true, percent: 100, reached: []int32{50, 80, 100}},
		"exactly at a threshold reaches": {runRate: 1.0, forecast: 0, firing: true, percent: 50, reached: []int32{50}},
	} {
		a := Alerts(alerts, tc.runRate, 2, true, tc.forecast, 1000, true)
		if a.Firing != tc.firing || a.Percent != tc.percent {
			t.Errorf("%s: firing %v at %d (%s)", name, a.Firing, a.Percent, a.Message)
		}
		for _, p := range tc.reached {
			if !a.Reached[p] {
				t.Errorf("%s: %d%% not reached", name, p)
			}
		}
	}
}
