package policies

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// Exemption is a CapacityException applied to one decision: what it let through.
type Exemption struct {
	// Exception is the CapacityException's name.
	Exception string
	// Source is the policy object exempted from.
	Source Source
	// Namespace is the namespace exempted.
	Namespace string
	// Rule is the rule exempted ("" for a result that names none); for a budget, the rules its
	// exception changed, comma-separated.
	Rule string
	// Message is the result the exception let through, or for a budget what it changed.
	Message string
}

func (x Exemption) String() string {
	return fmt.Sprintf("CapacityException %s exempts namespace %s from %s: %s", x.Exception, x.Namespace, x.Source, x.Message)
}

// exception is a CapacityException with its selector parsed once.
type exception struct {
	obj        *policyv1.CapacityException
	selector   labels.Selector
	namespaces map[string]bool
	extra      float64
}

// compileException parses an exception's selector and amount.
func compileException(ex *policyv1.CapacityException) (*exception, error) {
	c := &exception{obj: ex}
	if ex.Spec.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(ex.Spec.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("CapacityException %s: spec.namespaceSelector: %w", ex.Name, err)
		}
		c.selector = sel
	}
	if len(ex.Spec.Namespaces) > 0 {
		c.namespaces = map[string]bool{}
		for _, n := range ex.Spec.Namespaces {
			c.namespaces[n] = true
		}
	}
	if ex.Spec.ExtraHourlyCost != nil {
		f, err := strconv.ParseFloat(string(*ex.Spec.ExtraHourlyCost), 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("CapacityException %s: spec.extraHourlyCost %q is not an amount", ex.Name, *ex.Spec.ExtraHourlyCost)
		}
		c.extra = f
	}
	return c, nil
}

// selects reports whether the exception names or selects the namespace; with neither it
// selects none.
func (c *exception) selects(ns Namespace) bool {
	if c.namespaces != nil {
		return c.namespaces[ns.Name]
	}
	return c.selector != nil && c.selector.Matches(labels.Set(ns.Labels))
}

// exempts are the rules the exception exempts the namespace from in one policy object at now:
// ok is false when it exempts from nothing; all is true when it exempts from every rule.
func (c *exception) exempts(ns Namespace, kind policyv1.ExemptKind, name string, now time.Time) (rules []string, all, ok bool) {
	if !c.obj.ActiveAt(now) || !c.selects(ns) {
		return nil, false, false
	}
	for _, e := range c.obj.Spec.Exempt {
		if e.Kind != kind || (e.Name != policyv1.AnyName && e.Name != name) {
			continue
		}
		ok = true
		if len(e.Rules) == 0 {
			all = true
		}
		rules = append(rules, e.Rules...)
	}
	return rules, all, ok
}

// Applies reports whether a CapacityException exempts a namespace from a rule of a policy
// object at now ("" as the rule: from any). It is the one answer to "does this exception
// apply": the admission webhook, the provisioner, disruption, the audit and karpenterctl all
// decide by it (the engine through the same method of the parsed exception), each with its
// own clock's now, so that an exception stops applying everywhere at spec.expiresAt
// (docs/policies.md, "CapacityException").
func Applies(ex *policyv1.CapacityException, ns Namespace, kind policyv1.ExemptKind, name, rule string, now time.Time) bool {
	c, err := compileException(ex)
	if err != nil {
		return false
	}
	return c.applies(ns, kind, name, rule, now)
}

func (c *exception) applies(ns Namespace, kind policyv1.ExemptKind, name, rule string, now time.Time) bool {
	rules, all, ok := c.exempts(ns, kind, name, now)
	return ok && (all || rule == "" || slices.Contains(rules, rule))
}

// SetExceptions replaces the engine's CapacityExceptions; one whose selector or amount does
// not parse is left out and reported (admission refuses such objects).
func (e *Engine) SetExceptions(list []policyv1.CapacityException) []error {
	var out []*exception
	var errs []error
	for i := range list {
		c, err := compileException(list[i].DeepCopy())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].obj.Name < out[j].obj.Name })
	e.exceptions.Store(&out)
	e.generation.Add(1)
	return errs
}

// Exceptions are the CapacityExceptions the engine holds, by name.
func (e *Engine) Exceptions() []*policyv1.CapacityException {
	var out []*policyv1.CapacityException
	for _, c := range e.loadExceptions() {
		out = append(out, c.obj)
	}
	return out
}

func (e *Engine) loadExceptions() []*exception {
	if p := e.exceptions.Load(); p != nil {
		return *p
	}
	return nil
}

// policyExemptions says which rules of a CapacityPolicy the exceptions in force exempt a
// namespace from: all, or some rules, each with the exceptions that exempt from it.
type policyExemptions struct {
	// allBy names an exception that exempts from every rule; "" when none does.
	allBy  string
	ruleBy map[string]string
}

func (p policyExemptions) none() bool { return p.allBy == "" && len(p.ruleBy) == 0 }

// by names the exception that exempts from the rule, or "".
func (p policyExemptions) by(rule string) string {
	if p.allBy != "" {
		return p.allBy
	}
	return p.ruleBy[rule]
}

func (e *Engine) policyExemptions(ns Namespace, policy string, now time.Time) policyExemptions {
	var out policyExemptions
	if len(e.loadExceptions()) == 0 {
		return out
	}
	for _, c := range e.loadExceptions() {
		rules, all, ok := c.exempts(ns, policyv1.ExemptCapacityPolicy, policy, now)
		if !ok {
			continue
		}
		if all && out.allBy == "" {
			out.allBy = c.obj.Name
		}
		for _, r := range rules {
			if out.ruleBy == nil {
				out.ruleBy = map[string]string{}
			}
			if _, seen := out.ruleBy[r]; !seen {
				out.ruleBy[r] = c.obj.Name
			}
		}
	}
	return out
}

// budgetExemption is what the exceptions in force make of one budget for one namespace.
type budgetExemption struct {
	// lifted are the budget rules lifted; extra raises the hourly limit instead of lifting it.
	lifted map[string]bool
	extra  float64
	// raised are the limit rules an exception with extraHourlyCost names (both, when it names
	// all): the hourly limit in force, the lower of the two, is raised.
	raised map[string]bool
	by     []string
}

func (b budgetExemption) none() bool { return len(b.lifted) == 0 && b.extra == 0 }

// key identifies the exemption, for the engine's caches.
func (b budgetExemption) key() string {
	if b.none() {
		return ""
	}
	var rules []string
	for r := range b.lifted {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	return fmt.Sprintf("%s|%g|%s", strings.Join(rules, ","), b.extra, strings.Join(b.by, ","))
}

// budgetExemptionOf gathers the exceptions in force for a budget and namespace. An exception
// with extraHourlyCost raises the limits it exempts from (hourlyCost, monthlyCost, or all)
// by that amount instead of lifting them; several exceptions' amounts add up, and a lift wins
// over a raise. Its other rules are lifted.
func (e *Engine) budgetExemptionOf(kind policyv1.ExemptKind, name string, ns Namespace, now time.Time) budgetExemption {
	exceptions := e.loadExceptions()
	if len(exceptions) == 0 {
		return budgetExemption{}
	}
	out := budgetExemption{lifted: map[string]bool{}, raised: map[string]bool{}}
	for _, c := range exceptions {
		rules, all, ok := c.exempts(ns, kind, name, now)
		if !ok {
			continue
		}
		if all {
			rules = policyv1.BudgetRules
		}
		changed := false
		for _, r := range rules {
			if c.extra > 0 && (r == policyv1.BudgetRuleHourlyCost || r == policyv1.BudgetRuleMonthlyCost) {
				continue
			}
			if !out.lifted[r] {
				out.lifted[r], changed = true, true
			}
		}
		raises := c.extra > 0 && (all || slices.Contains(rules, policyv1.BudgetRuleHourlyCost) || slices.Contains(rules, policyv1.BudgetRuleMonthlyCost))
		if raises {
			out.extra += c.extra
			changed = true
			for _, r := range []string{policyv1.BudgetRuleHourlyCost, policyv1.BudgetRuleMonthlyCost} {
				if all || slices.Contains(rules, r) {
					out.raised[r] = true
				}
			}
		}
		if changed {
			out.by = append(out.by, c.obj.Name)
		}
	}
	// A lift wins over a raise: a raise of limits that are lifted raises nothing.
	if out.extra > 0 {
		still := false
		for r := range out.raised {
			if out.lifted[r] {
				delete(out.raised, r)
			} else {
				still = true
			}
		}
		if !still {
			out.extra = 0
		}
	}
	return out
}

// describe says what the exemption does to the budget, for Exemption.Message.
func (b budgetExemption) describe() string {
	var parts []string
	var lifted []string
	for _, r := range policyv1.BudgetRules {
		if b.lifted[r] {
			lifted = append(lifted, r)
		}
	}
	if len(lifted) > 0 {
		parts = append(parts, "lifts "+strings.Join(lifted, ", "))
	}
	if b.extra > 0 {
		parts = append(parts, fmt.Sprintf("raises the hourly limit by %.2f", b.extra))
	}
	return strings.Join(parts, "; ")
}

// rules names the rules the exemption changes, comma-separated.
func (b budgetExemption) rules() string {
	var out []string
	for _, r := range policyv1.BudgetRules {
		if b.lifted[r] || b.raised[r] {
			out = append(out, r)
		}
	}
	return strings.Join(out, ",")
}

// exemptBudget is the budget with the lifted rules taken out of its spec and its schedules;
// the raise is passed to the Rego library beside it (budgetDoc).
func exemptBudget(b *policyv1.CapacityBudget, x budgetExemption) *policyv1.CapacityBudget {
	out := b.DeepCopy()
	strip := func(l *policyv1.BudgetLimits) *policyv1.BudgetLimits {
		if l == nil {
			return nil
		}
		if x.lifted[policyv1.BudgetRuleHourlyCost] {
			l.HourlyCost = nil
		}
		if x.lifted[policyv1.BudgetRuleMonthlyCost] {
			l.MonthlyCost = nil
		}
		if l.HourlyCost == nil && l.MonthlyCost == nil {
			return nil
		}
		return l
	}
	out.Spec.Limits = strip(out.Spec.Limits)
	if x.lifted[policyv1.BudgetRuleSpot] {
		out.Spec.Spot = nil
	}
	if x.lifted[policyv1.BudgetRuleInstanceFamilies] {
		out.Spec.InstanceFamilies = nil
	}
	for i := range out.Spec.Schedules {
		s := &out.Spec.Schedules[i]
		s.Limits = strip(s.Limits)
		if x.lifted[policyv1.BudgetRuleSpot] {
			s.Spot = nil
		}
	}
	return out
}

// effectiveBudget is the budget as the exceptions in force at now leave it for the namespace,
// with the exemption (none when no exception applies: then the budget itself). The copies are
// cached while the budget and the exemption are the same, so that the engine's caches keyed
// by the budget keep working.
func (e *Engine) effectiveBudget(b *policyv1.CapacityBudget, ns Namespace, now time.Time) (*policyv1.CapacityBudget, budgetExemption) {
	x := e.budgetExemptionOf(policyv1.ExemptCapacityBudget, b.Name, ns, now)
	if x.none() {
		return b, x
	}
	key := fmt.Sprintf("%p|%s|%s", b, b.ResourceVersion, x.key())
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	if eff, ok := e.effective[key]; ok {
		return eff, x
	}
	if len(e.effective) >= maxCached {
		e.effective = map[string]*policyv1.CapacityBudget{}
	}
	eff := exemptBudget(b, x)
	e.effective[key] = eff
	return eff, x
}

// budgetExemptionRecord is the Exemption a budget's exceptions make of a decision.
func budgetExemptionRecord(b *policyv1.CapacityBudget, x budgetExemption) []Exemption {
	if x.none() {
		return nil
	}
	out := make([]Exemption, 0, len(x.by))
	for _, name := range x.by {
		out = append(out, Exemption{Exception: name, Source: budgetSource(b), Namespace: b.Namespace, Rule: x.rules(), Message: x.describe()})
	}
	return out
}

// ExceptionNamespaces are the namespaces among nss that an exception names or selects, by
// name, whether or not it is active: its status lists them.
func ExceptionNamespaces(ex *policyv1.CapacityException, nss []Namespace) ([]string, error) {
	c, err := compileException(ex)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range nss {
		if c.selects(ns) {
			out = append(out, ns.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// namespaceExempt is the exemption test of a CapacityPolicy's results at a decision point
// about one namespace: every result concerns it. Nil when no exception applies.
func (e *Engine) namespaceExempt(ns Namespace, policy string, now time.Time) exemptFunc {
	px := e.policyExemptions(ns, policy, now)
	if px.none() {
		return nil
	}
	return func(_, rule string) (string, string) {
		if by := px.by(rule); by != "" {
			return by, ns.Name
		}
		return "", ""
	}
}

// namespacesExempt is the exemption test of a CapacityPolicy's results at a decision point
// about several namespaces: a result naming a namespace is exempt when that namespace is; a
// result naming none, only when every namespace in the input is. Nil when no exception
// applies to any of them.
func (e *Engine) namespacesExempt(parts []namespacePart, policy string, now time.Time) exemptFunc {
	if len(e.loadExceptions()) == 0 {
		return nil
	}
	byNS := map[string]policyExemptions{}
	some := false
	for _, p := range parts {
		px := e.policyExemptions(p.ns, policy, now)
		byNS[p.ns.Name] = px
		some = some || !px.none()
	}
	if !some {
		return nil
	}
	return func(ns, rule string) (string, string) {
		if ns != "" {
			if by := byNS[ns].by(rule); by != "" {
				return by, ns
			}
			return "", ""
		}
		first, names := "", make([]string, 0, len(parts))
		for _, p := range parts {
			by := byNS[p.ns.Name].by(rule)
			if by == "" {
				return "", ""
			}
			if first == "" {
				first = by
			}
			names = append(names, p.ns.Name)
		}
		return first, strings.Join(names, ",")
	}
}
