package policies

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// InstanceTypeInfo is an instance type as policies see it.
type InstanceTypeInfo struct {
	Name          string   `json:"name"`
	Family        string   `json:"family"`
	Category      string   `json:"category,omitempty"`
	Generation    int      `json:"generation,omitempty"`
	Architecture  string   `json:"architecture,omitempty"`
	CPU           float64  `json:"cpu"`
	MemoryGiB     float64  `json:"memoryGiB"`
	GPUs          int      `json:"gpus,omitempty"`
	GPUName       string   `json:"gpuName,omitempty"`
	CapacityTypes []string `json:"capacityTypes,omitempty"`
	// MinPricePerHour is its cheapest available offering.
	MinPricePerHour float64 `json:"minPricePerHour"`
}

// InstanceTypes are a NodePool's instance types converted for Rego once, and shared by every
// namespace's evaluation in a batch.
type InstanceTypes struct {
	types    ast.Value
	families ast.Value
	// key fingerprints the list, for the engine's caches.
	key string
}

// NewInstanceTypes converts instance types for evaluation.
func NewInstanceTypes(infos []InstanceTypeInfo) (*InstanceTypes, error) {
	sorted, key := sortedTypes(infos)
	return convertTypes(sorted, key)
}

// sortedTypes orders the types by name and fingerprints them.
func sortedTypes(infos []InstanceTypeInfo) ([]InstanceTypeInfo, string) {
	sorted := append([]InstanceTypeInfo(nil), infos...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	h := sha256.New()
	for _, it := range sorted {
		fmt.Fprintf(h, "%s|%s|%s|%s|%d|%g|%g|%d|%s|%v|%g\n", it.Name, it.Family, it.Category, it.Architecture, it.Generation, it.CPU, it.MemoryGiB,
			it.GPUs, it.GPUName, it.CapacityTypes, it.MinPricePerHour)
	}
	return sorted, hex.EncodeToString(h.Sum(nil))
}

func convertTypes(sorted []InstanceTypeInfo, key string) (*InstanceTypes, error) {
	families := map[string]bool{}
	for _, it := range sorted {
		families[it.Family] = true
	}
	fams := make([]string, 0, len(families))
	for f := range families {
		fams = append(fams, f)
	}
	sort.Strings(fams)
	types, err := toValue(sorted)
	if err != nil {
		return nil, err
	}
	famValue, err := toValue(fams)
	if err != nil {
		return nil, err
	}
	return &InstanceTypes{types: types, families: famValue, key: key}, nil
}

// InstanceTypes converts instance types for evaluation, reusing the conversion of an equal
// list: a NodePool's types rarely change between batches.
func (e *Engine) InstanceTypes(infos []InstanceTypeInfo) (*InstanceTypes, error) {
	sorted, key := sortedTypes(infos)
	e.cacheMu.Lock()
	prev, ok := e.typeSets[key]
	e.cacheMu.Unlock()
	if ok {
		return prev, nil
	}
	its, err := convertTypes(sorted, key)
	if err != nil {
		return nil, err
	}
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	if len(e.typeSets) >= maxCached {
		e.typeSets = map[string]*InstanceTypes{}
	}
	e.typeSets[key] = its
	return its, nil
}

// maxCached bounds each of the engine's caches; a full cache starts over.
const maxCached = 4096

// typeDenial is one deny_instance_types result.
type typeDenial struct{ name, msg, rule string }

// toValue converts an input document for Rego. Generic maps, slices and ast.Values (parts
// converted once and shared) convert directly; anything else through its JSON form, as the
// API server would hold it.
func toValue(v any) (ast.Value, error) { return ast.InterfaceToValue(v) }

// budgetDoc is a CapacityBudget as the built-in library reads it (see rego/budget.rego): the
// budget as the exceptions in force leave it (effectiveBudget), with the raise of its hourly
// limit they grant.
func (e *Engine) budgetDoc(b *policyv1.CapacityBudget, x budgetExemption, now time.Time) (map[string]any, error) {
	spec, err := e.specValue(b)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{"namespace": b.Namespace, "name": b.Name, "spec": spec,
		"status": map[string]any{"monthToDateCost": string(b.Status.MonthToDateCost)}}
	if IsClusterBudget(b) {
		doc["kind"] = clusterBudgetKind
	}
	if i, ok := ActiveSchedule(b, now); ok {
		doc["activeSchedule"] = i
	}
	if x.extra > 0 {
		doc["extraHourlyCost"] = x.extra
		doc["exceptions"] = strings.Join(x.by, ", ")
	}
	return doc, nil
}

// EffectiveBudget is a namespace's budget as the CapacityExceptions in force at now leave it:
// the rules they lift taken out (the raise of the hourly limit is the Rego library's, not in
// the copy). The budget itself when no exception applies.
func (e *Engine) EffectiveBudget(b *policyv1.CapacityBudget, ns Namespace, now time.Time) *policyv1.CapacityBudget {
	eff, _ := e.effectiveBudget(b, ns, now)
	return eff
}

// specValue is a budget's spec converted for Rego, kept while the object is the same.
func (e *Engine) specValue(b *policyv1.CapacityBudget) (ast.Value, error) {
	key := b.Namespace + "/" + b.Name
	if v, ok := e.specs.Load(key); ok && v.(cachedSpec).budget == b {
		return v.(cachedSpec).value, nil
	}
	raw, err := json.Marshal(b.Spec)
	if err != nil {
		return nil, err
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, err
	}
	v, err := ast.InterfaceToValue(spec)
	if err != nil {
		return nil, err
	}
	e.specs.Store(key, cachedSpec{budget: b, value: v})
	return v, nil
}

type cachedSpec struct {
	budget *policyv1.CapacityBudget
	value  ast.Value
}

func budgetSource(b *policyv1.CapacityBudget) Source {
	if IsClusterBudget(b) {
		return Source{Kind: clusterBudgetKind, Name: b.Name}
	}
	return Source{Kind: "CapacityBudget", Namespace: b.Namespace, Name: b.Name}
}

func budgetEnforcement(b *policyv1.CapacityBudget, at policyv1.EnforcementPoint) policyv1.EnforcementAction {
	return b.EnforcementAt(at)
}

func usageDoc(u Usage) map[string]any {
	return map[string]any{"hourlyCost": u.HourlyCost, "inFlightHourlyCost": u.InFlightHourlyCost, "idleHourlyCost": u.IdleHourlyCost,
		"spotCPU": u.SpotCPU, "onDemandCPU": u.OnDemandCPU}
}

func namespaceDoc(ns Namespace) map[string]any {
	l := map[string]any{}
	for k, v := range ns.Labels {
		l[k] = v
	}
	return map[string]any{"name": ns.Name, "labels": l}
}

// ProvisioningInput is one (namespace, NodePool) of a batch.
type ProvisioningInput struct {
	Namespace     Namespace
	NodePool      string
	InstanceTypes *InstanceTypes
	// Budget is the namespace's CapacityBudget; nil when it has none.
	Budget *policyv1.CapacityBudget
	Usage  Usage
	Now    time.Time
	// Point is the enforcement point: provisioning (the default), or audit, which judges what
	// runs and keeps every constraint output in Constraints.Findings whatever the action.
	Point policyv1.EnforcementPoint
}

// Finding is one constraint output of a policy at the audit point: an instance type or a
// capacity type it refuses, or a price ceiling, with the policy's violation.
type Finding struct {
	// InstanceType or CapacityType is what is refused; PriceCeiling the most a node may cost.
	InstanceType, CapacityType string
	PriceCeiling               float64
	Violation                  Violation
}

// Constraints are what the policies in force make of one (namespace, NodePool): only Deny
// sources constrain; the others' results are in Decision.
type Constraints struct {
	Decision
	// DeniedInstanceTypes and DeniedCapacityTypes map what may not be launched for the
	// namespace to the violation that says why.
	DeniedInstanceTypes map[string]Violation
	DeniedCapacityTypes map[string]Violation
	// PriceCeiling is the most a new node of the namespace may cost per hour; 0 is none.
	PriceCeiling   float64
	PriceCeilingBy Violation
	// Budget is the namespace's budget in force; nil when it has none.
	Budget *BudgetInForce
	// Findings are, at the audit point, every constraint output of every source whatever its
	// action (a DryRun source's too: what it would refuse if enforced).
	Findings []Finding
}

// BudgetInForce is a CapacityBudget as it applies now.
type BudgetInForce struct {
	Source Source
	// Enforcement is the budget's action at the provisioning point.
	Enforcement policyv1.EnforcementAction
	// HasLimit is false when the budget limits no cost (Spot or families only).
	HasLimit    bool
	HourlyLimit float64
	// Committed is the run-rate plus the in-flight reservation; Remaining is the limit less it.
	Committed   float64
	Remaining   float64
	LimitReason string
	Spot        SpotBounds
	// Exemptions are what CapacityExceptions in force change of the budget.
	Exemptions []Exemption
}

// SpotBounds are a budget's Spot share bounds over the vCPU above the on-demand base.
type SpotBounds struct {
	MinPercent      float64
	MaxPercent      float64
	OnDemandBaseCPU float64
}

// Provisioning evaluates the provisioning decision point for one namespace on one NodePool:
// the built-in budget policies when the namespace has a CapacityBudget, and each
// CapacityPolicy that selects the namespace. With a ClusterCapacityBudget as the budget
// (IsClusterBudget; the usage its namespaces' together) it evaluates the built-in policies
// alone, without exceptions: CapacityPolicies and CapacityExceptions apply per namespace.
func (e *Engine) Provisioning(ctx context.Context, in ProvisioningInput) *Constraints {
	at := in.Point
	if at == "" {
		at = policyv1.PointProvisioning
	}
	audit := at == policyv1.PointAudit
	c := &Constraints{DeniedInstanceTypes: map[string]Violation{}, DeniedCapacityTypes: map[string]Violation{}}
	doc := map[string]any{"namespace": namespaceDoc(in.Namespace), "nodePool": map[string]any{"name": in.NodePool},
		"usage": usageDoc(in.Usage), "now": in.Now.UTC().Format(time.RFC3339)}
	run := func(u *unit, enforcement policyv1.EnforcementAction, src Source, exempt exemptFunc) {
		input, err := toValue(doc)
		var r result
		var denials []typeDenial
		if err == nil {
			r, err = e.eval(ctx, u, policyv1.DecisionPointProvisioning, at, input, exempt)
		}
		if err == nil && (enforcement == policyv1.EnforcementDeny || audit) && in.InstanceTypes != nil {
			denials, err = e.typeDenials(ctx, u, in, doc, at)
		}
		c.collect(u, policyv1.DecisionPointProvisioning, r, err, func(string) (Source, policyv1.EnforcementAction) { return src, enforcement }, exempt)
		if err != nil {
			return
		}
		c.constrain(r, denials, src, enforcement, exempt)
		if audit {
			c.find(r, denials, src, enforcement, exempt)
		}
		if u == e.builtin {
			c.Budget = budgetInForce(r, src, enforcement)
		}
	}
	cluster := in.Budget != nil && IsClusterBudget(in.Budget)
	if in.Budget != nil {
		raw := in.Budget
		eff, x := raw, budgetExemption{}
		if !cluster {
			eff, x = e.effectiveBudget(raw, in.Namespace, in.Now)
		}
		c.Exemptions = append(c.Exemptions, budgetExemptionRecord(raw, x)...)
		bd, err := e.budgetDoc(eff, x, in.Now)
		if err != nil {
			c.Errors = append(c.Errors, EvalError{Source: budgetSource(raw), DecisionPoint: policyv1.DecisionPointProvisioning, Err: err})
		} else {
			doc["budget"] = bd
			in.Budget = eff
			run(e.builtin, budgetEnforcement(raw, at), budgetSource(raw), nil)
			if c.Budget != nil {
				c.Budget.Exemptions = budgetExemptionRecord(raw, x)
			}
		}
	}
	if cluster {
		return c
	}
	for _, u := range *e.policies.Load() {
		if u.selects(in.Namespace) {
			run(u, u.enforcementAt(at), u.source, e.namespaceExempt(in.Namespace, u.source.Name, in.Now))
		}
	}
	e.observeExemptions(policyv1.DecisionPointProvisioning, c.Exemptions)
	return c
}

// BudgetInForce evaluates the built-in budget policies alone for one namespace's
// CapacityBudget: the limit and Spot bounds in force now and what remains, for the budget's
// status. CapacityPolicies are not evaluated: an error of theirs is not the budget's.
func (e *Engine) BudgetInForce(ctx context.Context, ns Namespace, b *policyv1.CapacityBudget, usage Usage, now time.Time) (*BudgetInForce, error) {
	eff, x := b, budgetExemption{}
	if !IsClusterBudget(b) {
		eff, x = e.effectiveBudget(b, ns, now)
	}
	bd, err := e.budgetDoc(eff, x, now)
	if err != nil {
		return nil, err
	}
	input, err := toValue(map[string]any{"namespace": namespaceDoc(ns), "nodePool": map[string]any{"name": ""},
		"usage": usageDoc(usage), "now": now.UTC().Format(time.RFC3339), "budget": bd})
	if err != nil {
		return nil, err
	}
	r, err := e.eval(ctx, e.builtin, policyv1.DecisionPointProvisioning, policyv1.PointProvisioning, input, nil)
	if err != nil {
		return nil, err
	}
	bif := budgetInForce(r, budgetSource(b), budgetEnforcement(b, policyv1.PointProvisioning))
	if bif == nil {
		return nil, fmt.Errorf("%s: the built-in policies gave no capacity_budget", budgetSource(b))
	}
	bif.Exemptions = budgetExemptionRecord(b, x)
	return bif, nil
}

// typeDenials evaluates deny_instance_types: with the NodePool's instance types and without
// usage, so that the result holds until the policy, the budget, the namespace's labels or the
// instance types change, and is cached until then. Evaluating it over hundreds of types is
// most of a provisioning evaluation's cost.
func (e *Engine) typeDenials(ctx context.Context, u *unit, in ProvisioningInput, doc map[string]any, at policyv1.EnforcementPoint) ([]typeDenial, error) {
	key := typeDenialKey(u, in)
	e.cacheMu.Lock()
	cached, ok := e.denials[key]
	e.cacheMu.Unlock()
	if ok {
		return cached, nil
	}
	typesDoc := make(map[string]any, len(doc)+2)
	for k, v := range doc {
		if k != "usage" {
			typesDoc[k] = v
		}
	}
	typesDoc["instanceTypes"], typesDoc["instanceFamilies"] = in.InstanceTypes.types, in.InstanceTypes.families
	input, err := toValue(typesDoc)
	if err != nil {
		return nil, err
	}
	r, err := e.eval(ctx, u, policyv1.DecisionPointProvisioning, at, input, nil)
	if err != nil {
		return nil, err
	}
	var out []typeDenial
	for _, v := range setOf(r, "deny_instance_types") {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		msg, _ := m["msg"].(string)
		rule, _ := m["rule"].(string)
		if name != "" {
			out = append(out, typeDenial{name, msg, rule})
		}
	}
	e.cacheMu.Lock()
	if len(e.denials) >= maxCached {
		e.denials = map[string][]typeDenial{}
	}
	e.denials[key] = out
	e.cacheMu.Unlock()
	return out, nil
}

// typeDenialKey identifies what deny_instance_types depends on: the compiled unit, the
// budget object, the namespace's labels, the NodePool and its instance types.
func typeDenialKey(u *unit, in ProvisioningInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%p|%s|%s|", u, in.NodePool, in.InstanceTypes.key)
	if in.Budget != nil {
		fmt.Fprintf(&b, "%s/%s/%s/%d/%p|", in.Budget.Namespace, in.Budget.Name, in.Budget.ResourceVersion, in.Budget.Generation, in.Budget)
	}
	keys := make([]string, 0, len(in.Namespace.Labels))
	for k := range in.Namespace.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString(in.Namespace.Name)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, in.Namespace.Labels[k])
	}
	return b.String()
}

// constrain takes up a unit's constraint outputs, when its source enforces them; an output
// whose rule an exception exempts from is dropped (and recorded).
func (c *Constraints) constrain(r result, denials []typeDenial, src Source, enforcement policyv1.EnforcementAction, exempt exemptFunc) {
	if enforcement != policyv1.EnforcementDeny {
		return
	}
	exempted := func(rule, msg string) bool {
		if exempt == nil {
			return false
		}
		by, ns := exempt("", rule)
		if by != "" {
			c.Exemptions = append(c.Exemptions, Exemption{Exception: by, Source: src, Namespace: ns, Rule: rule, Message: msg})
		}
		return by != ""
	}
	for _, d := range denials {
		if _, seen := c.DeniedInstanceTypes[d.name]; !seen && !exempted(d.rule, d.msg) {
			c.DeniedInstanceTypes[d.name] = Violation{Source: src, Enforcement: enforcement, Rule: d.rule, Message: d.msg}
		}
	}
	for _, v := range setOf(r, "deny_capacity_types") {
		m, _ := v.(map[string]any)
		ct, _ := m["capacityType"].(string)
		msg, _ := m["msg"].(string)
		rule, _ := m["rule"].(string)
		if _, seen := c.DeniedCapacityTypes[ct]; ct != "" && !seen && !exempted(rule, msg) {
			c.DeniedCapacityTypes[ct] = Violation{Source: src, Enforcement: enforcement, Rule: rule, Message: msg}
		}
	}
	for _, v := range setOf(r, "price_ceiling") {
		m, _ := v.(map[string]any)
		price, ok := number(m["pricePerHour"])
		msg, _ := m["msg"].(string)
		rule, _ := m["rule"].(string)
		if ok && price > 0 && (c.PriceCeiling == 0 || price < c.PriceCeiling) && !exempted(rule, msg) {
			c.PriceCeiling = price
			c.PriceCeilingBy = Violation{Source: src, Enforcement: enforcement, Message: msg}
		}
	}
}

// find records, at the audit point, a unit's constraint outputs whatever its action; those an
// exception exempts from are left to Exemptions.
func (c *Constraints) find(r result, denials []typeDenial, src Source, enforcement policyv1.EnforcementAction, exempt exemptFunc) {
	exempted := func(rule string) bool {
		if exempt == nil {
			return false
		}
		by, _ := exempt("", rule)
		return by != ""
	}
	for _, d := range denials {
		if !exempted(d.rule) {
			c.Findings = append(c.Findings, Finding{InstanceType: d.name, Violation: Violation{Source: src, Enforcement: enforcement, Rule: d.rule, Message: d.msg}})
		}
	}
	for _, v := range setOf(r, "deny_capacity_types") {
		m, _ := v.(map[string]any)
		ct, _ := m["capacityType"].(string)
		msg, _ := m["msg"].(string)
		rule, _ := m["rule"].(string)
		if ct != "" && !exempted(rule) {
			c.Findings = append(c.Findings, Finding{CapacityType: ct, Violation: Violation{Source: src, Enforcement: enforcement, Rule: rule, Message: msg}})
		}
	}
	for _, v := range setOf(r, "price_ceiling") {
		m, _ := v.(map[string]any)
		price, ok := number(m["pricePerHour"])
		msg, _ := m["msg"].(string)
		rule, _ := m["rule"].(string)
		if ok && price > 0 && !exempted(rule) {
			c.Findings = append(c.Findings, Finding{PriceCeiling: price, Violation: Violation{Source: src, Enforcement: enforcement, Rule: rule, Message: msg}})
		}
	}
}

func budgetInForce(r result, src Source, enforcement policyv1.EnforcementAction) *BudgetInForce {
	m, ok := r["capacity_budget"].(map[string]any)
	if !ok {
		return nil
	}
	b := &BudgetInForce{Source: src, Enforcement: enforcement}
	b.HourlyLimit, b.HasLimit = number(m["hourlyLimit"])
	b.Committed, _ = number(m["committed"])
	b.Remaining, _ = number(m["remaining"])
	b.LimitReason, _ = m["limitReason"].(string)
	if s, ok := m["spot"].(map[string]any); ok {
		b.Spot.MinPercent, _ = number(s["minPercent"])
		b.Spot.MaxPercent, _ = number(s["maxPercent"])
		b.Spot.OnDemandBaseCPU, _ = number(s["onDemandBaseCPU"])
	}
	return b
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// LaunchNamespace is a namespace's share of a NodeClaim about to launch.
type LaunchNamespace struct {
	Namespace Namespace
	// Cost is what the NodeClaim attributes to the namespace's pods, USD per hour.
	Cost float64
	CPU  float64
	Pods int
	// Budget is the namespace's CapacityBudget, nil when it has none; Usage includes the
	// NodeClaims in flight and those this batch already let through.
	Budget *policyv1.CapacityBudget
	Usage  Usage
}

// LaunchInput is a NodeClaim at the launch gate.
type LaunchInput struct {
	NodePool, InstanceType, Family, CapacityType, Zone string
	PricePerHour                                       float64
	Namespaces                                         []LaunchNamespace
	Now                                                time.Time
}

// Launch evaluates the launch gate for one NodeClaim.
func (e *Engine) Launch(ctx context.Context, in LaunchInput) *Decision {
	return e.evalNamespaces(ctx, policyv1.DecisionPointLaunch, launchClaim(in), launchParts(in), in.Now, false)
}

// LaunchPolicies evaluates only the CapacityPolicies at the launch gate for one NodeClaim,
// for a batch that LaunchBudgetsFit cleared.
func (e *Engine) LaunchPolicies(ctx context.Context, in LaunchInput) *Decision {
	d := &Decision{}
	if !e.joined(policyv1.DecisionPointLaunch) {
		return d
	}
	parts := launchParts(in)
	e.addBudgets(d, policyv1.DecisionPointLaunch, parts, in.Now)
	e.evalPolicies(ctx, d, policyv1.DecisionPointLaunch, launchClaim(in), parts, in.Now, false)
	e.observeExemptions(policyv1.DecisionPointLaunch, d.Exemptions)
	return d
}

// LaunchBudgetsFit reports whether the built-in budget rules at the launch gate find nothing
// (no violation, warning or error) for any of a batch's NodeClaims, given in order, each
// counting the ones before it in flight. Those rules only refuse a namespace more as the cost
// it adds grows (launch.rego keeps to that), so one evaluation with each namespace's cost
// summed over the batch, on its usage before the batch, answers for all of them; the
// NodeClaim in that input is empty. When it reports false, evaluate NodeClaim by NodeClaim.
func (e *Engine) LaunchBudgetsFit(ctx context.Context, ins []LaunchInput) bool {
	if len(ins) == 0 {
		return true
	}
	sum := LaunchInput{Now: ins[0].Now}
	index := map[string]int{}
	for _, in := range ins {
		for _, ns := range in.Namespaces {
			i, ok := index[ns.Namespace.Name]
			if !ok {
				index[ns.Namespace.Name] = len(sum.Namespaces)
				sum.Namespaces = append(sum.Namespaces, ns)
				continue
			}
			s := &sum.Namespaces[i]
			s.Cost, s.CPU, s.Pods = s.Cost+ns.Cost, s.CPU+ns.CPU, s.Pods+ns.Pods
		}
	}
	d := &Decision{}
	parts := launchParts(sum)
	budgets := e.addBudgets(d, policyv1.DecisionPointLaunch, parts, sum.Now)
	e.evalBuiltin(ctx, d, policyv1.DecisionPointLaunch, launchClaim(sum), parts, sum.Now, budgets)
	return len(d.Violations) == 0 && len(d.Warnings) == 0 && len(d.Errors) == 0
}

// joined reports whether a CapacityPolicy joins the decision point.
func (e *Engine) joined(point string) bool {
	for _, u := range *e.policies.Load() {
		if _, ok := u.queries[point]; ok {
			return true
		}
	}
	return false
}

func launchClaim(in LaunchInput) map[string]any {
	return map[string]any{"nodeClaim": map[string]any{"nodePool": in.NodePool, "instanceType": in.InstanceType, "family": in.Family,
		"capacityType": in.CapacityType, "zone": in.Zone, "pricePerHour": in.PricePerHour}}
}

func launchParts(in LaunchInput) []namespacePart {
	parts := make([]namespacePart, len(in.Namespaces))
	for i, ns := range in.Namespaces {
		parts[i] = namespacePart{ns: ns.Namespace, budget: ns.Budget, doc: map[string]any{"name": ns.Namespace.Name,
			"labels": namespaceDoc(ns.Namespace)["labels"], "cost": ns.Cost, "cpu": ns.CPU, "pods": ns.Pods, "usage": usageDoc(ns.Usage)}}
	}
	return parts
}

// namespacePart is one namespace's entry in an input that carries several.
type namespacePart struct {
	ns     Namespace
	budget *policyv1.CapacityBudget
	doc    map[string]any
}

// evalNamespaces evaluates a decision point whose input carries several namespaces: the
// built-in policies once with all of them (those with a budget carry it, and its enforcement
// applies to the results naming them), and each CapacityPolicy with the namespaces it selects
// (with none only when evenWithout).
func (e *Engine) evalNamespaces(ctx context.Context, point string, base map[string]any, parts []namespacePart, now time.Time, evenWithout bool) *Decision {
	d := &Decision{}
	budgets := e.addBudgets(d, point, parts, now)
	e.evalBuiltin(ctx, d, point, base, parts, now, budgets)
	e.evalPolicies(ctx, d, point, base, parts, now, evenWithout)
	e.observeExemptions(point, d.Exemptions)
	return d
}

// addBudgets puts each namespace's budget, as the exceptions in force leave it, into its entry
// and returns the budgets by namespace; a budget that cannot be read is an error in the
// decision.
func (e *Engine) addBudgets(d *Decision, point string, parts []namespacePart, now time.Time) map[string]*policyv1.CapacityBudget {
	budgets := map[string]*policyv1.CapacityBudget{}
	for _, p := range parts {
		if p.budget == nil {
			continue
		}
		eff, x := p.budget, budgetExemption{}
		if !IsClusterBudget(p.budget) {
			eff, x = e.effectiveBudget(p.budget, p.ns, now)
		}
		d.Exemptions = append(d.Exemptions, budgetExemptionRecord(p.budget, x)...)
		bd, err := e.budgetDoc(eff, x, now)
		if err != nil {
			d.Errors = append(d.Errors, EvalError{Source: budgetSource(p.budget), DecisionPoint: point, Err: err})
			continue
		}
		p.doc["budget"] = bd
		budgets[p.ns.Name] = p.budget
	}
	return budgets
}

func namespacesInput(base map[string]any, docs []any, now time.Time) map[string]any {
	in := map[string]any{"namespaces": docs, "now": now.UTC().Format(time.RFC3339)}
	for k, v := range base {
		in[k] = v
	}
	return in
}

// evalBuiltin evaluates the built-in policies once with every namespace, when some have a
// budget; each budget's enforcement applies to the results naming its namespace.
func (e *Engine) evalBuiltin(ctx context.Context, d *Decision, point string, base map[string]any, parts []namespacePart, now time.Time, budgets map[string]*policyv1.CapacityBudget) {
	if len(budgets) == 0 {
		return
	}
	all := make([]any, len(parts))
	for i, p := range parts {
		all[i] = p.doc
	}
	at := PointOf(point)
	e.evalInto(ctx, d, e.builtin, point, at, namespacesInput(base, all, now), func(ns string) (Source, policyv1.EnforcementAction) {
		if b, ok := budgets[ns]; ok {
			return budgetSource(b), budgetEnforcement(b, at)
		}
		return Source{Kind: "CapacityBudget", Namespace: ns}, policyv1.EnforcementDeny
	}, nil)
}

// evalPolicies evaluates each CapacityPolicy that joins the decision point with the
// namespaces it selects (with none only when evenWithout).
func (e *Engine) evalPolicies(ctx context.Context, d *Decision, point string, base map[string]any, parts []namespacePart, now time.Time, evenWithout bool) {
	for _, u := range *e.policies.Load() {
		if _, joins := u.queries[point]; !joins {
			continue
		}
		selected := []any{}
		var selParts []namespacePart
		for _, p := range parts {
			if u.selects(p.ns) {
				selected = append(selected, p.doc)
				selParts = append(selParts, p)
			}
		}
		if len(selected) > 0 || (evenWithout && len(parts) == 0) {
			at := PointOf(point)
			e.evalInto(ctx, d, u, point, at, namespacesInput(base, selected, now), unitEnforcement(u, at), e.namespacesExempt(selParts, u.source.Name, now))
		}
	}
}

func (e *Engine) evalInto(ctx context.Context, d *Decision, u *unit, point string, at policyv1.EnforcementPoint, doc map[string]any,
	enforcement func(string) (Source, policyv1.EnforcementAction), exempt exemptFunc) {
	input, err := toValue(doc)
	var r result
	if err == nil {
		r, err = e.eval(ctx, u, point, at, input, exempt)
	}
	d.collect(u, point, r, err, enforcement, exempt)
}

// DisruptionNode is a node a disruption command removes or launches.
type DisruptionNode struct {
	Name         string  `json:"name,omitempty"`
	InstanceType string  `json:"instanceType"`
	Family       string  `json:"family,omitempty"`
	CapacityType string  `json:"capacityType"`
	PricePerHour float64 `json:"pricePerHour"`
}

// DisruptionNamespace is how a disruption command changes a namespace's run-rate.
type DisruptionNamespace struct {
	Namespace Namespace
	// CostDelta is the namespace's attributed run-rate after the command less before.
	CostDelta float64
	Budget    *policyv1.CapacityBudget
	Usage     Usage
}

// DisruptionInput is a disruption command at the gate: consolidation, drift, expiration.
type DisruptionInput struct {
	Reason       string
	Nodes        []DisruptionNode
	Replacements []DisruptionNode
	Namespaces   []DisruptionNamespace
	Now          time.Time
}

// Disruption evaluates the disruption gate for one command.
func (e *Engine) Disruption(ctx context.Context, in DisruptionInput) *Decision {
	command, parts := disruptionInput(in)
	return e.evalNamespaces(ctx, policyv1.DecisionPointDisruption, command, parts, in.Now, true)
}

func disruptionInput(in DisruptionInput) (map[string]any, []namespacePart) {
	replacements := in.Replacements
	if replacements == nil {
		replacements = []DisruptionNode{}
	}
	command := map[string]any{"command": map[string]any{"reason": in.Reason, "nodes": in.Nodes, "replacements": replacements}}
	parts := make([]namespacePart, len(in.Namespaces))
	for i, ns := range in.Namespaces {
		parts[i] = namespacePart{ns: ns.Namespace, budget: ns.Budget, doc: map[string]any{"name": ns.Namespace.Name,
			"labels": namespaceDoc(ns.Namespace)["labels"], "costDelta": ns.CostDelta, "usage": usageDoc(ns.Usage)}}
	}
	return command, parts
}
