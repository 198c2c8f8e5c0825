package policies

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// PolicyModules returns a CapacityPolicy's modules, and the index of each in spec.modules by
// name, to place problems on the manifest.
func PolicyModules(p *policyv1.CapacityPolicy) ([]Module, map[string]int) {
	index := make(map[string]int, len(p.Spec.Modules))
	modules := make([]Module, 0, len(p.Spec.Modules))
	for i, m := range p.Spec.Modules {
		index[m.Name] = i
		modules = append(modules, Module{Name: m.Name, Rego: m.Rego})
	}
	return modules, index
}

// Parameters decodes a CapacityPolicy's parameters as the JSON object Rego sees as
// data.parameters.
func Parameters(p *policyv1.CapacityPolicy) (map[string]any, error) {
	if p.Spec.Parameters == nil || len(p.Spec.Parameters.Raw) == 0 {
		return nil, nil
	}
	var params map[string]any
	if err := json.Unmarshal(p.Spec.Parameters.Raw, &params); err != nil {
		return nil, fmt.Errorf("parameters must be a JSON object: %w", err)
	}
	return params, nil
}

// CronParser reads budget schedules: the five-field form and descriptors such as @daily, in
// UTC, as upstream Karpenter's disruption budgets do.
var CronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ActiveSchedule is the index of the first of the budget's schedule windows open at now: one
// whose schedule fired at most its duration before now (the window is [fired, fired+duration)). Schedules that do not parse (admission
// refuses them) never open.
func ActiveSchedule(b *policyv1.CapacityBudget, now time.Time) (int, bool) {
	for i, s := range b.Spec.Schedules {
		sched, err := CronParser.Parse(s.Schedule)
		if err != nil {
			continue
		}
		if fired := sched.Next(now.Add(-s.Duration.Duration)); !fired.After(now) {
			return i, true
		}
	}
	return 0, false
}
