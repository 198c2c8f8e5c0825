// Package audit judges what runs against the policies in force, at the audit enforcement
// point (docs/policies.md, "Audit"): every CapacityBudget (the namespace's run-rate against
// its limit, its Spot share, the instance families its pods run on), every CapacityPolicy's
// provisioning rules against the instance types, capacity types and prices its namespaces'
// pods run on, and the admission rules against NodePools and budgets as they are now. A
// DryRun policy gives the results it would give enforced: the shadow audit a team reads
// before it switches the policy to Deny.
//
// It is pure over a snapshot and the engine: it does no I/O, keeps no state and reads no
// clock (the time is its input's). The audit controller writes what it returns as OpenReports.
package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/planner"
	"github.com/karpenter-policy/karpenter/scheduling/snapshot"
)

// Outcome is a result's verdict, as OpenReports words it.
type Outcome string

// Outcomes.
const (
	Pass  Outcome = "pass"
	Fail  Outcome = "fail"
	Warn  Outcome = "warn"
	Skip  Outcome = "skip"
	Error Outcome = "error"
)

// Severity is how much a result matters, as OpenReports words it.
type Severity string

// Severities.
const (
	High   Severity = "high"
	Medium Severity = "medium"
	Low    Severity = "low"
	Info   Severity = "info"
)

// Subject is an object a result concerns.
type Subject struct {
	APIVersion, Kind, Namespace, Name string
}

// Result is one finding.
type Result struct {
	// Namespace is the report it belongs to: the namespace's, or "" for the cluster's.
	Namespace string
	// Policy names the policy object: "CapacityPolicy/NAME" or "CapacityBudget/NS/NAME".
	Policy string
	// Rule is the rule: a budget's (hourlyCost, monthlyCost, spot, instanceFamilies), the
	// rule a policy's result names, or the decision point when it names none.
	Rule     string
	Outcome  Outcome
	Severity Severity
	Subjects []Subject
	Message  string
	// Properties are what a dashboard reads: hourlyCost, hourlyLimit, spotPercent,
	// enforcement, ...
	Properties map[string]string
}

// Same reports whether two results say the same: the same key, outcome, severity, subjects,
// message and properties (a decision taken again unchanged).
func (r Result) Same(o Result) bool {
	return r.Key() == o.Key() && r.Outcome == o.Outcome && r.Severity == o.Severity && r.Message == o.Message &&
		slices.Equal(r.Subjects, o.Subjects) && maps.Equal(r.Properties, o.Properties)
}

// Key identifies what a result is about: its report, policy, rule and first subject. The
// newest result per key is kept.
func (r Result) Key() string {
	subject := ""
	if len(r.Subjects) > 0 {
		s := r.Subjects[0]
		subject = s.Kind + "/" + s.Namespace + "/" + s.Name
	}
	return r.Namespace + "|" + r.Policy + "|" + r.Rule + "|" + subject
}

// Input is what the audit judges.
type Input struct {
	// Snapshot is the cluster as it runs (nodes with their pods, NodePools with their types).
	Snapshot *snapshot.Snapshot
	Engine   *policies.Engine
	// Namespaces with their labels, by name; Budgets by namespace.
	Namespaces map[string]policies.Namespace
	Budgets    map[string]*policyv1.CapacityBudget
	// ClusterBudgets are the ClusterCapacityBudgets, judged in the ClusterReport.
	ClusterBudgets []*policyv1.ClusterCapacityBudget
	// Policies are the CapacityPolicies in force.
	Policies []*policyv1.CapacityPolicy
	// NodePools are every NodePool, for the admission rules.
	NodePools []*karpv1.NodePool
	Now       time.Time
}

// node is a running node as the audit reads it.
type node struct {
	name, nodeClaim, nodePool, instanceType, capacityType string
	price                                                 float64
}

func (n node) subjects() []Subject {
	out := []Subject{{APIVersion: "v1", Kind: "Node", Name: n.name}}
	if n.nodeClaim != "" {
		out = append(out, Subject{APIVersion: karpv1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: n.nodeClaim})
	}
	return out
}

// Evaluate judges the cluster. Results are sorted by report, policy, rule and subject.
func Evaluate(ctx context.Context, in Input) []Result {
	a := &auditor{in: in, byNamespace: map[string]map[string]node{}, types: map[string]*cloudprovider.InstanceType{}}
	a.index()
	a.budgets(ctx)
	a.clusterBudgets(ctx)
	a.policies(ctx)
	a.admission(ctx)
	a.nodePools()
	sort.SliceStable(a.out, func(i, j int) bool { return a.out[i].Key() < a.out[j].Key() })
	return a.out
}

type auditor struct {
	in Input
	// byNamespace are the nodes each namespace's pods run on, by node name.
	byNamespace map[string]map[string]node
	usage       map[string]policies.Usage
	types       map[string]*cloudprovider.InstanceType
	out         []Result
}

func (a *auditor) add(r Result) { a.out = append(a.out, r) }

// index finds the nodes each namespace runs on and attributes its usage.
func (a *auditor) index() {
	snap := a.in.Snapshot
	for _, np := range snap.NodePools {
		for _, it := range np.InstanceTypes {
			a.types[it.Name] = it
		}
	}
	for _, sn := range snap.StateNodes {
		if sn.Node == nil {
			continue
		}
		ct, _ := scheduling.CapacityTypeOf(sn.Labels)
		n := node{name: sn.Node.Name, nodePool: sn.NodePool, instanceType: sn.Labels[corev1.LabelInstanceTypeStable], capacityType: ct, price: sn.PricePerHour}
		if sn.NodeClaim != nil {
			n.nodeClaim = sn.NodeClaim.Name
		}
		for _, p := range sn.Pods {
			if scheduling.IsOwnedByDaemonSet(p) || scheduling.IsMirror(p) {
				continue
			}
			m := a.byNamespace[p.Namespace]
			if m == nil {
				m = map[string]node{}
				a.byNamespace[p.Namespace] = m
			}
			m[n.name] = n
		}
	}
	a.usage = planner.UsageOf(snap.NodesWithBufferRoom(), planner.NewPriceBook(snap.InstanceTypes()...))
}

func (a *auditor) namespace(name string) policies.Namespace {
	if ns, ok := a.in.Namespaces[name]; ok {
		return ns
	}
	return policies.Namespace{Name: name}
}

// nodesOf are a namespace's nodes, sorted, grouped by NodePool.
func (a *auditor) nodesOf(ns string) map[string][]node {
	out := map[string][]node{}
	for _, n := range a.byNamespace[ns] {
		out[n.nodePool] = append(out[n.nodePool], n)
	}
	for _, ns := range out {
		sort.Slice(ns, func(i, j int) bool { return ns[i].name < ns[j].name })
	}
	return out
}

// outcome is what a violation gives at the audit point: a Deny source fails, a Warn source
// warns, a DryRun source fails as it would enforced (its results say so in "enforcement").
func outcome(v policies.Violation) (Outcome, Severity) {
	switch v.Enforcement {
	case policyv1.EnforcementWarn:
		return Warn, Medium
	case policyv1.EnforcementDryRun:
		return Fail, Medium
	}
	return Fail, High
}

// PolicyName names a result's policy object: "CapacityPolicy/NAME" or
// "CapacityBudget/NAMESPACE/NAME".
func PolicyName(s policies.Source) string {
	if s.Kind == "CapacityBudget" {
		return "CapacityBudget/" + s.Namespace + "/" + s.Name
	}
	return s.Kind + "/" + s.Name
}

func money(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) }

// evaluations are the provisioning decision point for one namespace, per NodePool it runs on,
// with the instance types in use there, at the audit point.
type evaluation struct {
	pool  string
	nodes []node
	c     *policies.Constraints
}

func (a *auditor) evaluate(ctx context.Context, ns string) []evaluation {
	var out []evaluation
	pools := a.nodesOf(ns)
	names := make([]string, 0, len(pools))
	for p := range pools {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, pool := range names {
		nodes := pools[pool]
		var its []*cloudprovider.InstanceType
		seen := map[string]bool{}
		for _, n := range nodes {
			if it, ok := a.types[n.instanceType]; ok && !seen[n.instanceType] {
				seen[n.instanceType] = true
				its = append(its, it)
			}
		}
		types, err := a.in.Engine.InstanceTypes(planner.InstanceTypeInfos(its))
		if err != nil {
			continue
		}
		c := a.in.Engine.Provisioning(ctx, policies.ProvisioningInput{Namespace: a.namespace(ns), NodePool: pool, InstanceTypes: types,
			Budget: a.in.Budgets[ns], Usage: a.usage[ns], Now: a.in.Now, Point: policyv1.PointAudit})
		out = append(out, evaluation{pool: pool, nodes: nodes, c: c})
	}
	return out
}

// findings turns one evaluation's findings of a source into results: instance types,
// capacity types and prices in use that the source refuses, one result per rule with the
// nodes as subjects. It returns whether the source found anything.
func (a *auditor) findings(ns string, e evaluation, src policies.Source) bool {
	type group struct {
		v     policies.Violation
		nodes []node
		what  []string
	}
	groups := map[string]*group{}
	var order []string
	for _, f := range e.c.Findings {
		if f.Violation.Source != src {
			continue
		}
		for _, n := range e.nodes {
			hit := (f.InstanceType != "" && f.InstanceType == n.instanceType) || (f.CapacityType != "" && f.CapacityType == n.capacityType) ||
				(f.PriceCeiling > 0 && n.price > f.PriceCeiling+0.0001)
			if !hit {
				continue
			}
			rule := f.Violation.Rule
			if rule == "" {
				rule = ruleOf(src, f)
			}
			g, ok := groups[rule]
			if !ok {
				g = &group{v: f.Violation}
				groups[rule] = g
				order = append(order, rule)
			}
			g.nodes = append(g.nodes, n)
			g.what = append(g.what, fmt.Sprintf("%s (%s, %s, $%.4f/hour)", n.name, n.instanceType, n.capacityType, n.price))
		}
	}
	for _, rule := range order {
		g := groups[rule]
		out, sev := outcome(g.v)
		r := Result{Namespace: ns, Policy: PolicyName(src), Rule: rule, Outcome: out, Severity: sev,
			Message:    fmt.Sprintf("%s; running on %d nodes of NodePool %s it refuses: %s", g.v.Message, len(g.nodes), poolName(e.pool), strings.Join(uniq(g.what), ", ")),
			Properties: map[string]string{"enforcement": string(g.v.Enforcement), "nodePool": e.pool, "nodes": strconv.Itoa(len(g.nodes))}}
		for _, n := range g.nodes {
			r.Subjects = append(r.Subjects, n.subjects()...)
		}
		a.add(r)
	}
	return len(order) > 0
}

func poolName(p string) string {
	if p == "" {
		return "(none)"
	}
	return p
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// ruleOf names a finding's rule when the result names none: a budget's rule, or the kind of
// output.
func ruleOf(src policies.Source, f policies.Finding) string {
	switch {
	case src.Kind == "CapacityBudget" && f.InstanceType != "":
		return policyv1.BudgetRuleInstanceFamilies
	case src.Kind == "CapacityBudget":
		return policyv1.BudgetRuleSpot
	case f.InstanceType != "":
		return "deny_instance_types"
	case f.CapacityType != "":
		return "deny_capacity_types"
	}
	return "price_ceiling"
}

// objectOf is an object as the admission decision point reads it.
func objectOf(o runtime.Object) map[string]any {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil
	}
	return m
}
