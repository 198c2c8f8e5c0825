package policies

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/test"
)

// Per-evaluation latency of the decision points, as the provisioner and the admission
// webhook call them:
//
//	go test ./policies -run='^$' -bench=. -benchmem

func benchTypes(b *testing.B, n int) *InstanceTypes {
	infos := make([]InstanceTypeInfo, n)
	families := []string{"m6i", "c6i", "r6i", "m5", "c5", "r5", "t3", "g5", "p4d", "m6i"}
	for i := range infos {
		f := families[i%len(families)]
		infos[i] = InstanceTypeInfo{Name: fmt.Sprintf("%s.size%d", f, i), Family: f, CPU: float64(i%96 + 1), MemoryGiB: float64(2 * (i%96 + 1)), MinPricePerHour: 0.05 * float64(i%96+1)}
	}
	its, err := NewInstanceTypes(infos)
	if err != nil {
		b.Fatal(err)
	}
	return its
}

func benchEngine(b *testing.B, policies bool) *Engine {
	e, err := NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	if policies {
		if probs := e.SetPolicies([]policyv1.CapacityPolicy{testPolicy("no-gpu-in-dev", test.NoGPUInDevRego, "", "")}); len(probs) > 0 {
			b.Fatal(probs)
		}
	}
	return e
}

func benchmarkProvisioning(b *testing.B, types int, withPolicy, cached bool) {
	e := benchEngine(b, withPolicy)
	in := ProvisioningInput{Namespace: dev, NodePool: "default", InstanceTypes: benchTypes(b, types), Budget: testBudget("team-dev", "13.00"),
		Usage: Usage{HourlyCost: 6, InFlightHourlyCost: 1, SpotCPU: 10, OnDemandCPU: 6}, Now: mid}
	rv := 0
	for b.Loop() {
		if !cached {
			// A new budget object: what a budget edited between every two batches costs. Its
			// resourceVersion moves, as an edit's does: a new object may reuse the freed one's
			// address, and the engine's caches would take it for the same.
			rv++
			in.Budget = testBudget("team-dev", "13.00")
			in.Budget.ResourceVersion = strconv.Itoa(rv)
		}
		if c := e.Provisioning(context.Background(), in); len(c.Errors) > 0 {
			b.Fatal(c.Errors)
		}
	}
}

// One (namespace, NodePool) with a CapacityBudget: the built-in policies over the NodePool's
// instance types, and with a CapacityPolicy selecting the namespace. Uncached, the instance
// types go through deny_instance_types; cached (the steady state: policies, budgets and
// instance types unchanged since the last batch) only the usage-dependent rules run.
func BenchmarkProvisioningBudget100TypesUncached(b *testing.B) {
	benchmarkProvisioning(b, 100, false, false)
}
func BenchmarkProvisioningBudget400TypesUncached(b *testing.B) {
	benchmarkProvisioning(b, 400, false, false)
}
func BenchmarkProvisioningBudgetPolicy400TypesUncached(b *testing.B) {
	benchmarkProvisioning(b, 400, true, false)
}
func BenchmarkProvisioningBudgetPolicy400TypesCached(b *testing.B) {
	benchmarkProvisioning(b, 400, true, true)
}

// The launch gate for a NodeClaim shared by three namespaces with budgets.
func BenchmarkLaunchGate(b *testing.B) {
	e := benchEngine(b, true)
	in := LaunchInput{NodePool: "default", InstanceType: "m6i.2xlarge", Family: "m6i", CapacityType: "spot", PricePerHour: 0.16, Now: mid}
	for i, ns := range []Namespace{dev, prd, {Name: "team-c"}} {
		in.Namespaces = append(in.Namespaces, LaunchNamespace{Namespace: ns, Cost: 0.05, CPU: 2, Pods: 2,
			Budget: testBudget(ns.Name, fmt.Sprint(10+i)), Usage: Usage{HourlyCost: 5, InFlightHourlyCost: 1}})
	}
	for b.Loop() {
		if d := e.Launch(context.Background(), in); len(d.Errors) > 0 {
			b.Fatal(d.Errors)
		}
	}
}

// Admission of a CapacityBudget.
func BenchmarkAdmissionBudget(b *testing.B) {
	e := benchEngine(b, true)
	bud := testBudget("team-prod", "5.00")
	for b.Loop() {
		if d := e.Admission(context.Background(), AdmissionInput{Operation: "UPDATE", Kind: "CapacityBudget", Object: map[string]any{}, Namespace: &prd,
			Budget: bud, Usage: Usage{HourlyCost: 3}, Now: mid}); len(d.Errors) > 0 {
			b.Fatal(d.Errors)
		}
	}
}

// benchExceptions are n CapacityExceptions, the first raising team-dev's budget, the others
// exempting other namespaces from a CapacityPolicy: what every evaluation looks through.
func benchExceptions(n int) []policyv1.CapacityException {
	out := make([]policyv1.CapacityException, n)
	for i := range out {
		ns := fmt.Sprintf("team-%d", i)
		out[i] = testException(fmt.Sprintf("x%d", i), mid.Add(time.Hour), policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityPolicy, Name: "*", Rules: []string{"gpu"}})
		out[i].Spec.Namespaces = []string{ns}
	}
	out[0] = testException("raise", mid.Add(time.Hour), policyv1.ExemptPolicy{Kind: policyv1.ExemptCapacityBudget, Name: "default", Rules: []string{policyv1.BudgetRuleHourlyCost}})
	out[0].Spec.Namespaces = []string{dev.Name}
	extra := policyv1.Money("2.00")
	out[0].Spec.ExtraHourlyCost = &extra
	return out
}

// The cached provisioning evaluation with 50 CapacityExceptions in force, one of which raises
// the namespace's budget: the exceptions' cost on the provisioning path.
func BenchmarkProvisioningBudgetPolicy400TypesCached50Exceptions(b *testing.B) {
	e := benchEngine(b, true)
	if errs := e.SetExceptions(benchExceptions(50)); len(errs) > 0 {
		b.Fatal(errs)
	}
	in := ProvisioningInput{Namespace: dev, NodePool: "default", InstanceTypes: benchTypes(b, 400), Budget: testBudget("team-dev", "13.00"),
		Usage: Usage{HourlyCost: 6, InFlightHourlyCost: 1, SpotCPU: 10, OnDemandCPU: 6}, Now: mid}
	for b.Loop() {
		if c := e.Provisioning(context.Background(), in); len(c.Errors) > 0 || c.Budget.HourlyLimit != 15 {
			b.Fatal(c.Errors, c.Budget)
		}
	}
}

// Admission of a CapacityBudget offline (karpenterctl), its usage and labels unknown: each
// policy's rules are partially evaluated to find what cannot be decided.
func BenchmarkAdmissionBudgetOffline(b *testing.B) {
	e := benchEngine(b, true)
	bud := testBudget("team-prod", "5.00")
	unknown := []string{UnknownUsage, UnknownNamespaceLabels, UnknownOperation, UnknownOldObject}
	for b.Loop() {
		if d := e.Admission(context.Background(), AdmissionInput{Operation: "CREATE", Kind: "CapacityBudget", Object: map[string]any{}, Namespace: &Namespace{Name: "team-prod"},
			Budget: bud, Now: mid, Point: policyv1.PointCI, Unknown: unknown}); len(d.Errors) > 0 || len(d.Undecided) == 0 {
			b.Fatal(d.Errors, d.Undecided)
		}
	}
}
