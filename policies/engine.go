package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// Source is the object a decision comes from.
type Source struct {
	// Kind is CapacityBudget or CapacityPolicy.
	Kind      string
	Namespace string
	Name      string
}

func (s Source) String() string {
	if s.Namespace == "" {
		return s.Kind + " " + s.Name
	}
	return s.Kind + " " + s.Namespace + "/" + s.Name
}

// Violation is one deny or warn result.
type Violation struct {
	Source Source
	// Enforcement is the source's action at the enforcement point that evaluated it.
	Enforcement policyv1.EnforcementAction
	// Namespace is the namespace the result concerns, when the rule said so.
	Namespace string
	// Rule is the rule the result names ({"msg": ..., "rule": ...}), which a CapacityException
	// may exempt from; "" when it names none.
	Rule    string
	Message string
}

// EvalError is a policy that could not be evaluated; under failurePolicy Fail it also
// becomes a Deny violation.
type EvalError struct {
	Source        Source
	DecisionPoint string
	Err           error
}

func (e EvalError) Error() string {
	return fmt.Sprintf("%s: evaluating %s: %v", e.Source, e.DecisionPoint, e.Err)
}

// Observer hears of every evaluation, for metrics: result is allow, deny, warn, dryrun or
// error.
type Observer interface {
	ObserveEvaluation(decisionPoint, result string, d time.Duration)
}

// Namespace is a namespace as policies see it.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Usage is what a namespace runs at now, by the cost attribution of docs/architecture.md
// ("Cost attribution").
type Usage struct {
	// HourlyCost is attributed from its pods on registered nodes, USD per hour.
	HourlyCost float64 `json:"hourlyCost"`
	// InFlightHourlyCost is attributed from its pods nominated to NodeClaims not yet
	// registered: the reservation that stops concurrent launches from overrunning.
	InFlightHourlyCost float64 `json:"inFlightHourlyCost"`
	// IdleHourlyCost is the unrequested remainder of the nodes and in-flight NodeClaims the
	// namespace has pods on: kube-scheduler may bind its pending pods there whatever the
	// budget says, so launch decisions count it as committed (status does not), as far as
	// its pending pods the CapacityBudget gate does not hold can fill it.
	IdleHourlyCost float64 `json:"idleHourlyCost"`
	// SpotCPU and OnDemandCPU are the vCPU its placed pods request, by capacity type.
	SpotCPU     float64 `json:"spotCPU"`
	OnDemandCPU float64 `json:"onDemandCPU"`
}

// Add sums usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{HourlyCost: u.HourlyCost + o.HourlyCost, InFlightHourlyCost: u.InFlightHourlyCost + o.InFlightHourlyCost, IdleHourlyCost: u.IdleHourlyCost + o.IdleHourlyCost,
		SpotCPU: u.SpotCPU + o.SpotCPU, OnDemandCPU: u.OnDemandCPU + o.OnDemandCPU}
}

// unit is one compiled set of modules with what governs it: the built-in CapacityBudget
// policies, or one CapacityPolicy.
type unit struct {
	source Source
	// enforcement and scoped are the policy's actions (policyv1.EnforcementAt); the built-in
	// unit takes each budget's instead.
	enforcement   policyv1.EnforcementAction
	scoped        []policyv1.ScopedEnforcement
	failurePolicy policyv1.FailurePolicy
	// selector picks the namespaces a CapacityPolicy applies to; nil for the built-in.
	selector labels.Selector
	queries  map[string]*rego.PreparedEvalQuery
	// key identifies the spec compiled, to reuse the unit while the policy is unchanged.
	key string
	// compiler and store are what the queries were prepared from, for partial evaluation
	// (Undecided).
	compiler *ast.Compiler
	store    storage.Store
	// partial caches prepared partial queries (Undecided) by decision point, result set and
	// unknown inputs; inputRefs are the input refs the unit's modules read, found once.
	partial   sync.Map
	inputOnce sync.Once
	inputRefs []ast.Ref
}

func (u *unit) selects(ns Namespace) bool {
	return u.selector == nil || u.selector.Matches(labels.Set(ns.Labels))
}

// Engine evaluates the built-in CapacityBudget policies and the cluster's CapacityPolicies at
// the decision points. It compiles each module set once into prepared queries and swaps the
// set atomically when policies change; evaluations run concurrently.
type Engine struct {
	// EvalTimeout bounds each evaluation of a CapacityPolicy (0: DefaultEvalTimeout); one that
	// runs out is an evaluation error, handled by the policy's failurePolicy. The built-in
	// budget policies are not bounded.
	EvalTimeout time.Duration
	builtin     *unit
	policies    atomic.Pointer[[]*unit]
	// mu serialises SetPolicies.
	mu sync.Mutex
	// evalErrors counts failed evaluations by source (Source.String()).
	evalErrors sync.Map
	// specs caches budgets' specs converted for Rego, by namespace/name.
	specs sync.Map
	// cacheMu guards typeSets (instance-type lists converted for Rego, by fingerprint) and
	// denials (deny_instance_types results, by typeDenialKey).
	cacheMu  sync.Mutex
	typeSets map[string]*InstanceTypes
	denials  map[string][]typeDenial
	// effective caches budgets as exceptions leave them (effectiveBudget); guarded by cacheMu.
	effective map[string]*policyv1.CapacityBudget
	// exceptions are the CapacityExceptions, parsed (SetExceptions).
	exceptions atomic.Pointer[[]*exception]
	// generation moves whenever the policies or exceptions are set.
	generation atomic.Uint64
	Observer   Observer
}

// Generation moves whenever SetPolicies or SetExceptions changes what the engine holds, so
// that a periodic pass can tell that the policies changed.
func (e *Engine) Generation() uint64 { return e.generation.Load() }

// ExemptionObserver hears, when the Observer implements it, of every exemption a
// CapacityException makes, for metrics.
type ExemptionObserver interface {
	ObserveExemption(decisionPoint string, x Exemption)
}

// DefaultEvalTimeout is how long one evaluation of a CapacityPolicy may take, unless the
// Engine says otherwise (the manager's --policy-evaluation-timeout).
const DefaultEvalTimeout = 100 * time.Millisecond

// NewEngine compiles the built-in policies.
func NewEngine() (*Engine, error) {
	c, err := CompileBuiltin(false)
	if err != nil {
		return nil, err
	}
	u, err := prepare(c, nil, Source{Kind: "CapacityBudget"})
	if err != nil {
		return nil, err
	}
	e := &Engine{builtin: u, typeSets: map[string]*InstanceTypes{}, denials: map[string][]typeDenial{}, effective: map[string]*policyv1.CapacityBudget{}}
	e.policies.Store(&[]*unit{})
	return e, nil
}

func prepare(c *Compiled, params map[string]any, src Source) (*unit, error) {
	data := map[string]any{}
	if params != nil {
		data["parameters"] = params
	}
	store := inmem.NewFromObject(data)
	u := &unit{source: src, queries: map[string]*rego.PreparedEvalQuery{}, compiler: c.Compiler, store: store}
	for _, point := range policyv1.DecisionPoints {
		if !c.joins(point) {
			continue
		}
		q, err := rego.New(rego.Query("data."+point), rego.Compiler(c.Compiler), rego.Store(store),
			rego.StrictBuiltinErrors(true)).PrepareForEval(context.Background())
		if err != nil {
			return nil, fmt.Errorf("%s: preparing %s: %w", src, point, err)
		}
		u.queries[point] = &q
	}
	return u, nil
}

// joins reports whether a non-test module of the set is in the decision point's package.
func (c *Compiled) joins(point string) bool {
	for name, m := range c.Modules {
		if !IsTestModule(name) && strings.TrimPrefix(m.Package.Path.String(), "data.") == point {
			return true
		}
	}
	return false
}

// PolicyProblem is a CapacityPolicy the engine could not take up, with why.
type PolicyProblem struct {
	Policy   string
	Problems []Problem
}

// SetPolicies compiles the CapacityPolicies that changed since the last call and swaps the
// engine's set in one step: an evaluation sees the old set or the new one, never a mix. A
// policy that does not compile is left out and reported (admission refuses such policies;
// this covers objects written while the webhook was away).
func (e *Engine) SetPolicies(ps []policyv1.CapacityPolicy) []PolicyProblem {
	e.mu.Lock()
	defer e.mu.Unlock()
	previous := map[string]*unit{}
	for _, u := range *e.policies.Load() {
		previous[u.source.Name] = u
	}
	var next []*unit
	var problems []PolicyProblem
	for i := range ps {
		p := &ps[i]
		key := specKey(p)
		if u, ok := previous[p.Name]; ok && u.key == key {
			next = append(next, u)
			continue
		}
		u, probs := compilePolicy(p)
		if len(probs) > 0 {
			problems = append(problems, PolicyProblem{Policy: p.Name, Problems: probs})
			continue
		}
		u.key = key
		next = append(next, u)
	}
	sort.Slice(next, func(i, j int) bool { return next[i].source.Name < next[j].source.Name })
	e.policies.Store(&next)
	e.generation.Add(1)
	return problems
}

func specKey(p *policyv1.CapacityPolicy) string {
	b, _ := json.Marshal(p.Spec)
	return string(b)
}

func compilePolicy(p *policyv1.CapacityPolicy) (*unit, []Problem) {
	params, err := Parameters(p)
	if err != nil {
		return nil, []Problem{{Module: "spec.parameters", Message: err.Error()}}
	}
	modules, _ := PolicyModules(p)
	c, probs := Compile(modules)
	if len(probs) > 0 {
		return nil, probs
	}
	src := Source{Kind: "CapacityPolicy", Name: p.Name}
	u, err := prepare(c, params, src)
	if err != nil {
		return nil, []Problem{{Module: p.Name, Message: err.Error()}}
	}
	u.enforcement = p.Spec.Enforcement
	if u.enforcement == "" {
		u.enforcement = policyv1.EnforcementDeny
	}
	u.scoped = append([]policyv1.ScopedEnforcement(nil), p.Spec.ScopedEnforcement...)
	u.failurePolicy = p.Spec.FailurePolicy
	if u.failurePolicy == "" {
		u.failurePolicy = policyv1.FailurePolicyIgnore
	}
	if p.Spec.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
		if err != nil {
			return nil, []Problem{{Module: "spec.namespaceSelector", Message: err.Error()}}
		}
		u.selector = sel
	} else {
		u.selector = labels.Everything()
	}
	return u, nil
}

// EvaluationErrors is how many evaluations of a source failed since the engine started, e.g.
// for "CapacityPolicy no-gpu-in-dev".
func (e *Engine) EvaluationErrors(source string) int64 {
	if n, ok := e.evalErrors.Load(source); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// Policies lists the CapacityPolicies in force, by name.
func (e *Engine) Policies() []string {
	var out []string
	for _, u := range *e.policies.Load() {
		out = append(out, u.source.Name)
	}
	return out
}

// result is one unit's evaluation at a decision point: its package document.
type result map[string]any

// eval runs a unit's query for a decision point, at an enforcement point; a missing query (the
// unit does not join the point) gives an empty result.
//
// Results a CapacityException exempts from (exempt) do not count in the outcome observed:
// they blocked nothing.
func (e *Engine) eval(ctx context.Context, u *unit, point string, at policyv1.EnforcementPoint, input ast.Value, exempt exemptFunc) (result, error) {
	q, ok := u.queries[point]
	if !ok {
		return nil, nil
	}
	start := time.Now()
	var rs rego.ResultSet
	var err error
	if u.selector != nil {
		timeout := e.EvalTimeout
		if timeout <= 0 {
			timeout = DefaultEvalTimeout
		}
		tctx, cancel := context.WithTimeout(ctx, timeout)
		rs, err = q.Eval(tctx, rego.EvalParsedInput(input))
		if err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("evaluation ran out of its %s deadline (--policy-evaluation-timeout)", timeout)
		}
		cancel()
	} else {
		rs, err = q.Eval(ctx, rego.EvalParsedInput(input))
	}
	if err != nil {
		n, _ := e.evalErrors.LoadOrStore(u.source.String(), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	outcome := "allow"
	var out result
	if err == nil && len(rs) > 0 && len(rs[0].Expressions) > 0 {
		out, _ = rs[0].Expressions[0].Value.(map[string]any)
	}
	denied, warned := kept(out, "deny", exempt), kept(out, "warn", exempt)
	switch {
	case err != nil:
		outcome = "error"
	case denied > 0:
		outcome = strings.ToLower(string(u.enforcementAt(at)))
	case warned > 0:
		outcome = "warn"
	}
	if e.Observer != nil {
		e.Observer.ObserveEvaluation(point, outcome, time.Since(start))
	}
	return out, err
}

// enforcementAt is a CapacityPolicy's action at an enforcement point; the built-in unit's
// results take their budget's (Deny here, for counting only).
func (u *unit) enforcementAt(at policyv1.EnforcementPoint) policyv1.EnforcementAction {
	return policyv1.EnforcementAt(u.enforcement, u.scoped, at)
}

// PointOf is the enforcement point a decision point is evaluated at by the controllers:
// provisioning for karpenter.provisioning and karpenter.launch, disruption for
// karpenter.disruption, admission for karpenter.admission (karpenterctl evaluates that one at
// ci).
func PointOf(decisionPoint string) policyv1.EnforcementPoint {
	switch decisionPoint {
	case policyv1.DecisionPointDisruption:
		return policyv1.PointDisruption
	case policyv1.DecisionPointAdmission:
		return policyv1.PointAdmission
	}
	return policyv1.PointProvisioning
}

// kept counts a result's deny or warn entries that no exception exempts from.
func kept(r result, key string, exempt exemptFunc) int {
	if exempt == nil {
		return len(setOf(r, key))
	}
	n := 0
	for _, m := range messages(r, key) {
		if by, _ := exempt(m.ns, m.rule); by == "" {
			n++
		}
	}
	return n
}

func setOf(r result, key string) []any {
	v, _ := r[key].([]any)
	return v
}

// entry is one deny or warn result.
type entry struct{ ns, rule, msg string }

// messages reads deny or warn entries: strings, or objects with "msg" and optionally
// "namespace" and "rule".
func messages(r result, key string) []entry {
	var out []entry
	for _, v := range setOf(r, key) {
		switch m := v.(type) {
		case string:
			out = append(out, entry{msg: m})
		case map[string]any:
			msg, _ := m["msg"].(string)
			ns, _ := m["namespace"].(string)
			rule, _ := m["rule"].(string)
			if msg == "" {
				b, _ := json.Marshal(m)
				msg = string(b)
			}
			out = append(out, entry{ns, rule, msg})
		default:
			b, _ := json.Marshal(v)
			out = append(out, entry{msg: string(b)})
		}
	}
	return out
}

// Decision is what the units said at a decision point.
type Decision struct {
	// Violations are deny results, each with its source's enforcement: only those with
	// Enforcement Deny block.
	Violations []Violation
	// Warnings are warn results; they never block.
	Warnings []Violation
	// Errors are evaluations that failed; under failurePolicy Fail each is also a Deny
	// violation.
	Errors []EvalError
	// Exemptions are what CapacityExceptions let through: results dropped, budgets changed.
	Exemptions []Exemption
	// Undecided are the policies whose results read inputs not known (offline admission):
	// those results are left out.
	Undecided []Undecided
}

// Denied are the violations that block.
func (d *Decision) Denied() []Violation { return filter(d.Violations, policyv1.EnforcementDeny) }

// Warned are the results to report without blocking: warn results and the violations of
// Warn sources.
func (d *Decision) Warned() []Violation {
	return append(append([]Violation(nil), d.Warnings...), filter(d.Violations, policyv1.EnforcementWarn)...)
}

// DryRun are the violations of DryRun sources: recorded, never acted on.
func (d *Decision) DryRun() []Violation { return filter(d.Violations, policyv1.EnforcementDryRun) }

func filter(vs []Violation, e policyv1.EnforcementAction) []Violation {
	var out []Violation
	for _, v := range vs {
		if v.Enforcement == e {
			out = append(out, v)
		}
	}
	return out
}

// exemptFunc names the CapacityException that exempts a result (by the namespace it names and
// its rule) from its source, and the namespace exempted; "" when none does.
type exemptFunc func(ns, rule string) (exception, namespace string)

// collect adds a unit's deny and warn results (or its error) to the decision; results an
// exception exempts from become Exemptions instead.
func (d *Decision) collect(u *unit, point string, r result, err error, enforcement func(ns string) (Source, policyv1.EnforcementAction), exempt exemptFunc) {
	if err != nil {
		d.Errors = append(d.Errors, EvalError{Source: u.source, DecisionPoint: point, Err: err})
		if u.failurePolicy == policyv1.FailurePolicyFail {
			d.Violations = append(d.Violations, Violation{Source: u.source, Enforcement: policyv1.EnforcementDeny,
				Message: fmt.Sprintf("%s: evaluation failed (failurePolicy Fail): %v", u.source, err)})
		}
		return
	}
	for _, key := range []string{"deny", "warn"} {
		for _, m := range messages(r, key) {
			src, enf := enforcement(m.ns)
			if exempt != nil {
				if by, ns := exempt(m.ns, m.rule); by != "" {
					d.Exemptions = append(d.Exemptions, Exemption{Exception: by, Source: src, Namespace: ns, Rule: m.rule, Message: m.msg})
					continue
				}
			}
			v := Violation{Source: src, Enforcement: enf, Namespace: m.ns, Rule: m.rule, Message: m.msg}
			if key == "deny" {
				d.Violations = append(d.Violations, v)
			} else {
				v.Enforcement = policyv1.EnforcementWarn
				d.Warnings = append(d.Warnings, v)
			}
		}
	}
}

// unitEnforcement is a CapacityPolicy's own action at the enforcement point, whatever
// namespace a result names.
func unitEnforcement(u *unit, at policyv1.EnforcementPoint) func(string) (Source, policyv1.EnforcementAction) {
	return func(string) (Source, policyv1.EnforcementAction) {
		return u.source, u.enforcementAt(at)
	}
}

// observeExemptions reports a decision's exemptions to the observer.
func (e *Engine) observeExemptions(point string, xs []Exemption) {
	o, ok := e.Observer.(ExemptionObserver)
	if !ok {
		return
	}
	for _, x := range xs {
		o.ObserveExemption(point, x)
	}
}

// Variant is an engine that shares this one's compiled policies and exceptions, with the
// CapacityPolicy name left out, or replaced by p when p is not nil. karpenterctl reviews a
// CapacityPolicy with it as the cluster would: by the policies in force before it, its own
// earlier version among them when there is one, not by itself.
func (e *Engine) Variant(name string, p *policyv1.CapacityPolicy) (*Engine, []PolicyProblem) {
	v := &Engine{EvalTimeout: e.EvalTimeout, builtin: e.builtin, Observer: e.Observer,
		typeSets: map[string]*InstanceTypes{}, denials: map[string][]typeDenial{}, effective: map[string]*policyv1.CapacityBudget{}}
	v.exceptions.Store(e.exceptions.Load())
	var units []*unit
	for _, u := range *e.policies.Load() {
		if u.source.Name != name {
			units = append(units, u)
		}
	}
	var problems []PolicyProblem
	if p != nil {
		u, probs := compilePolicy(p)
		if len(probs) > 0 {
			problems = append(problems, PolicyProblem{Policy: p.Name, Problems: probs})
		} else {
			u.key = specKey(p)
			units = append(units, u)
		}
	}
	sort.Slice(units, func(i, j int) bool { return units[i].source.Name < units[j].source.Name })
	v.policies.Store(&units)
	return v, problems
}

// Joins reports whether the CapacityPolicy in force by that name joins the decision point.
func (e *Engine) Joins(policy, point string) bool {
	for _, u := range *e.policies.Load() {
		if u.source.Name == policy {
			_, ok := u.queries[point]
			return ok
		}
	}
	return false
}
