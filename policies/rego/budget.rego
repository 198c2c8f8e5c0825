# The CapacityBudget library: what a budget allows right now. The decision-point modules
# (provisioning.rego, launch.rego, disruption.rego, admission.rego) call these functions with
# one namespace's budget, usage and the time; they hold no decision of their own.
#
# A budget b is {"namespace", "name", "spec", "status", "activeSchedule"} (and "kind" for a
# ClusterCapacityBudget, whose namespace is ""; its usage is its namespaces' together): spec and status as
# the API holds them (amounts are decimal strings), activeSchedule the index of the schedule
# window open now (computed by the engine from the cron schedules), absent when none is.
# usage u is {"hourlyCost", "inFlightHourlyCost", "idleHourlyCost", "spotCPU", "onDemandCPU"}:
# numbers; idleHourlyCost is the unrequested room of the nodes the namespace has pods on,
# which kube-scheduler may fill with its pods whatever the budget says.
# now is nanoseconds since the epoch.
package karpenter.budget

# name is how messages name the budget: CapacityBudget team-a/default, or
# ClusterCapacityBudget team-a for one shared by the namespaces it selects (kind set).
name(b) := sprintf("ClusterCapacityBudget %s", [b.name]) if {
	b.kind == "ClusterCapacityBudget"
} else := sprintf("CapacityBudget %s/%s", [b.namespace, b.name])

# money reads an amount; an absent or empty amount is zero.
money(s) := 0 if s == ""

money(s) := to_number(s) if s != ""

# active_schedule is the schedule window open now; undefined when none is.
active_schedule(b) := b.spec.schedules[b.activeSchedule]

# limits are the limits in force: an open window's replace the spec's.
limits(b) := l if {
	l := active_schedule(b).limits
} else := object.get(b.spec, "limits", {})

# spot are the Spot bounds in force: an open window's replace the spec's.
spot(b) := s if {
	s := active_schedule(b).spot
} else := object.get(b.spec, "spot", {})

# month_end is the start of the next calendar month (UTC), in nanoseconds.
month_end(now) := time.add_date(time.parse_rfc3339_ns(sprintf("%d-%s-01T00:00:00Z", [d[0], two_digits(d[1])])), 0, 1, 0) if {
	d := time.date(now)
}

two_digits(n) := sprintf("0%d", [n]) if n < 10

two_digits(n) := sprintf("%d", [n]) if n >= 10

# hours_left is what remains of the month, at least one minute so that the rate stays finite.
hours_left(now) := max([(month_end(now) - now) / 3600000000000, 1 / 60])

# month_to_date is the spend so far this month, from status.
month_to_date(b) := money(object.get(b, ["status", "monthToDateCost"], ""))

# monthly_rate is the hourly rate the monthly limit allows from now to the end of the month.
monthly_rate(b, now) := max([0, (money(limits(b).monthlyCost) - month_to_date(b)) / hours_left(now)])

# hourly_limits are the candidate hourly limits, each with how it came about: hourlyCost and
# the rate monthlyCost allows, where the budget has them.
hourly_limits(b, now) := hourly_candidate(b) | monthly_candidate(b, now)

hourly_candidate(b) := {{"limit": money(h), "why": sprintf("hourlyCost %s", [h])}} if {
	h := limits(b).hourlyCost
} else := set()

monthly_candidate(b, now) := {{"limit": monthly_rate(b, now), "why": why}} if {
	m := limits(b).monthlyCost
	why := sprintf("monthlyCost %s with %s spent and %dh left", [m, format2(month_to_date(b)), round(hours_left(now))])
} else := set()

# base_hourly_limit is the lowest of the budget's own hourly limits in force; undefined when
# the budget has no limits.
base_hourly_limit(b, now) := min({money(h) | h := limits(b).hourlyCost} | {monthly_rate(b, now) | limits(b).monthlyCost})

# extra_hourly_cost is what CapacityExceptions in force add to the hourly limit (their
# extraHourlyCost, summed by the engine); 0 when none applies.
extra_hourly_cost(b) := object.get(b, "extraHourlyCost", 0)

# hourly_limit is the hourly limit in force: the lowest of the budget's, raised by its
# exceptions; undefined when the budget has no limits. It leaves the reasons out: the
# decision points ask for it for every namespace of every NodeClaim, and for the reason only
# when they refuse.
hourly_limit(b, now) := base_hourly_limit(b, now) + extra_hourly_cost(b)

# limit_reason says where the hourly limit in force comes from.
limit_reason(b, now) := concat("", [c.why, exception_note(b)]) if {
	some c in hourly_limits(b, now)
	c.limit == base_hourly_limit(b, now)
}

# exception_note names the raise of the limit, when exceptions grant one.
exception_note(b) := sprintf(" + %s by CapacityException %s", [format2(extra_hourly_cost(b)), b.exceptions]) if {
	extra_hourly_cost(b) > 0
} else := ""

# committed is the namespace's run-rate on running nodes, its in-flight reservation, and the
# idle room of its nodes that its pending pods may take.
committed(u) := (object.get(u, "hourlyCost", 0) + object.get(u, "inFlightHourlyCost", 0)) + object.get(u, "idleHourlyCost", 0)

# remaining is what the namespace may still add, in USD per hour, never below zero.
remaining(b, u, now) := max([0, hourly_limit(b, now) - committed(u)])

# exceeds holds when adding cost to the namespace's committed run-rate passes the limit.
# A cent of tolerance keeps rounding in attribution from refusing what exactly fits.
exceeds(b, u, now, cost) if committed(u) + cost > hourly_limit(b, now) + 0.005

# over_message is the denial every decision point gives for an overrun.
over_message(b, u, now, cost) := sprintf("%s: hourly cost %s + %s would exceed %s (%s)", [
	name(b), format2(committed(u)), format2(cost), format2(hourly_limit(b, now)), limit_reason(b, now),
])

# base_cpu is the vCPU that always runs on-demand.
base_cpu(b) := units.parse(object.get(spot(b), "onDemandBaseCPU", "0"))

# spot_bounds are the Spot bounds in force as numbers.
spot_bounds(b) := {
	"minPercent": object.get(spot(b), "minPercent", 0),
	"maxPercent": object.get(spot(b), "maxPercent", 100),
	"onDemandBaseCPU": base_cpu(b),
}

# spot_share is the namespace's Spot share under the bounds in force, as the Go side defines
# it (docs/policies.md, "Spot share"): {"percent", "counted", "inRange", "below", "above"}.
# The built-in karpenter.spot_share is that definition, so no policy judges a share otherwise.
spot_share(b, u) := karpenter.spot_share(object.get(u, "spotCPU", 0), object.get(u, "onDemandCPU", 0), spot_bounds(b))

# spot_share_above_base is the Spot share of the vCPU above the on-demand base, in percent;
# undefined when nothing runs above the base.
spot_share_above_base(b, u) := s.percent if {
	s := spot_share(b, u)
	s.counted
}

# spot_in_range holds when the share is within the bounds (SpotTolerance aside), or nothing
# runs above the base.
spot_in_range(b, u) if spot_share(b, u).inRange

# family_denied_by is the first deny pattern that matches the type's family or name.
family_denied_by(b, it) := p if {
	some p in object.get(b.spec, ["instanceFamilies", "deny"], [])
	matches(p, it)
}

# family_allowed holds when the allow list is empty or one of its patterns matches.
family_allowed(b, it) if count(object.get(b.spec, ["instanceFamilies", "allow"], [])) == 0

family_allowed(b, it) if {
	some p in b.spec.instanceFamilies.allow
	matches(p, it)
}

# Globs have no delimiters: "*metal*" matches m5.metal.
matches(p, it) if glob.match(p, null, it.family)

matches(p, it) if glob.match(p, null, it.name)

# type_refusal says why the budget refuses an instance type; undefined when it allows it.
type_refusal(b, it) := sprintf("%s: instance type %s (family %s) matches instanceFamilies.deny %q", [name(b), it.name, it.family, p]) if {
	p := family_denied_by(b, it)
} else := sprintf("%s: instance type %s (family %s) is not in instanceFamilies.allow %v", [name(b), it.name, it.family, b.spec.instanceFamilies.allow]) if {
	not family_allowed(b, it)
}

# format2 prints an amount with two decimals, format1 a share with one. Numbers are rounded
# and printed as integers: sprintf's %f refuses integral numbers and %d fractional ones.
format2(x) := sprintf("%d.%s", [floor(c / 100), two_digits(c % 100)]) if c := round(x * 100)

format1(x) := sprintf("%d.%d", [floor(c / 10), c % 10]) if c := round(x * 10)
