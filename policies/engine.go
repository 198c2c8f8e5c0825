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
	Source      Source
	Enforcement policyv1.EnforcementAction
	// Namespace is the namespace the result concerns, when the rule said so.
	Namespace string
	Message   string
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
	source        Source
	enforcement   policyv1.EnforcementAction
	failurePolicy policyv1.FailurePolicy
	// selector picks the namespaces a CapacityPolicy applies to; nil for the built-in.
	selector labels.Selector
	queries  map[string]*rego.PreparedEvalQuery
	// key identifies the spec compiled, to reuse the unit while the policy is unchanged.
	key string
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
	// evalErrors counts failed evaluations by source (Source.String()); violations counts
	// results by source and kind.
	evalErrors sync.Map
	violations sync.Map
	// specs caches budgets' specs converted for Rego, by namespace/name.
	specs sync.Map
	// cacheMu guards typeSets (instance-type lists converted for Rego, by fingerprint) and
	// denials (deny_instance_types results, by typeDenialKey).
	cacheMu  sync.Mutex
	typeSets map[string]*InstanceTypes
	denials  map[string][]typeDenial
	Observer Observer
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
	e := &Engine{builtin: u, typeSets: map[string]*InstanceTypes{}, denials: map[string][]typeDenial{}}
	e.policies.Store(&[]*unit{})
	return e, nil
}

func prepare(c *Compiled, params map[string]any, src Source) (*unit, error) {
	data := map[string]any{}
	if params != nil {
		data["parameters"] = params
	}
	store := inmem.NewFromObject(data)
	u := &unit{source: src, queries: map[string]*rego.PreparedEvalQuery{}}
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

// Violations counts a source's results since the engine started: deny results of a Deny
// source, warn results (and a Warn source's denials), and a DryRun source's denials.
func (e *Engine) Violations(source string) (denied, warned, dryRun int64) {
	load := func(kind string) int64 {
		if n, ok := e.violations.Load(source + "\x00" + kind); ok {
			return n.(*atomic.Int64).Load()
		}
		return 0
	}
	return load("deny"), load("warn"), load("dryrun")
}

func (e *Engine) countViolation(source, kind string, n int) {
	if n == 0 {
		return
	}
	c, _ := e.violations.LoadOrStore(source+"\x00"+kind, new(atomic.Int64))
	c.(*atomic.Int64).Add(int64(n))
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

// eval runs a unit's query for a decision point; a missing query (the unit does not join the
// point) gives an empty result.
func (e *Engine) eval(ctx context.Context, u *unit, point string, input ast.Value) (result, error) {
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
	if err == nil && u.selector != nil {
		denied, warned := len(setOf(out, "deny")), len(setOf(out, "warn"))
		switch u.enforcementOr(policyv1.EnforcementDeny) {
		case policyv1.EnforcementDeny:
			e.countViolation(u.source.String(), "deny", denied)
		case policyv1.EnforcementWarn:
			warned += denied
		case policyv1.EnforcementDryRun:
			e.countViolation(u.source.String(), "dryrun", denied)
		}
		e.countViolation(u.source.String(), "warn", warned)
	}
	switch {
	case err != nil:
		outcome = "error"
	case len(setOf(out, "deny")) > 0:
		outcome = strings.ToLower(string(u.enforcementOr(policyv1.EnforcementDeny)))
	case len(setOf(out, "warn")) > 0:
		outcome = "warn"
	}
	if e.Observer != nil {
		e.Observer.ObserveEvaluation(point, outcome, time.Since(start))
	}
	return out, err
}

func (u *unit) enforcementOr(def policyv1.EnforcementAction) policyv1.EnforcementAction {
	if u.enforcement == "" {
		return def
	}
	return u.enforcement
}

func setOf(r result, key string) []any {
	v, _ := r[key].([]any)
	return v
}

// messages reads deny or warn entries: strings, or objects with "msg" and optionally
// "namespace".
func messages(r result, key string) []struct{ ns, msg string } {
	var out []struct{ ns, msg string }
	for _, v := range setOf(r, key) {
		switch m := v.(type) {
		case string:
			out = append(out, struct{ ns, msg string }{"", m})
		case map[string]any:
			msg, _ := m["msg"].(string)
			ns, _ := m["namespace"].(string)
			if msg == "" {
				b, _ := json.Marshal(m)
				msg = string(b)
			}
			out = append(out, struct{ ns, msg string }{ns, msg})
		default:
			b, _ := json.Marshal(v)
			out = append(out, struct{ ns, msg string }{"", string(b)})
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

// collect adds a unit's deny and warn results (or its error) to the decision.
func (d *Decision) collect(u *unit, point string, r result, err error, enforcement func(ns string) (Source, policyv1.EnforcementAction)) {
	if err != nil {
		d.Errors = append(d.Errors, EvalError{Source: u.source, DecisionPoint: point, Err: err})
		if u.failurePolicy == policyv1.FailurePolicyFail {
			d.Violations = append(d.Violations, Violation{Source: u.source, Enforcement: policyv1.EnforcementDeny,
				Message: fmt.Sprintf("%s: evaluation failed (failurePolicy Fail): %v", u.source, err)})
		}
		return
	}
	for _, m := range messages(r, "deny") {
		src, enf := enforcement(m.ns)
		d.Violations = append(d.Violations, Violation{Source: src, Enforcement: enf, Namespace: m.ns, Message: m.msg})
	}
	for _, m := range messages(r, "warn") {
		src, _ := enforcement(m.ns)
		d.Warnings = append(d.Warnings, Violation{Source: src, Enforcement: policyv1.EnforcementWarn, Namespace: m.ns, Message: m.msg})
	}
}

// unitEnforcement is a CapacityPolicy's own enforcement, whatever namespace a result names.
func unitEnforcement(u *unit) func(string) (Source, policyv1.EnforcementAction) {
	return func(string) (Source, policyv1.EnforcementAction) {
		return u.source, u.enforcementOr(policyv1.EnforcementDeny)
	}
}

// AttributedCost is what a pod on a node is charged, by the one definition used everywhere
// (docs/architecture.md, "Cost attribution"): the node's price times the mean of the pod's shares of the node's
// allocatable cpu and memory. The unrequested remainder is idle cost, charged to no one.
func AttributedCost(price, cpu, memory, allocatableCPU, allocatableMemory float64) float64 {
	share := 0.0
	if allocatableCPU > 0 {
		share += cpu / allocatableCPU
	}
	if allocatableMemory > 0 {
		share += memory / allocatableMemory
	}
	return price * share / 2
}
