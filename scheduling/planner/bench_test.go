package planner

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
	"github.com/karpenter-policy/karpenter/test"
	"github.com/karpenter-policy/karpenter/test/bench"
)

// The solver's mixed 5000-pod benchmark over 20 namespaces, each with a CapacityBudget (an
// hourly limit, Spot bounds on half of them, an instance-family allow and deny list), plus two
// CapacityPolicies (no GPU families in dev namespaces, a price ceiling), against the same pods
// solved without policies:
//
//	go test ./scheduling/planner -run='^$' -bench=Mixed -benchmem

const benchNamespaces = 20

func benchPlanner(b testing.TB, hourly string) (*Planner, []string) {
	e, err := policies.NewEngine()
	if err != nil {
		b.Fatal(err)
	}
	p := &Planner{Engine: e, Namespaces: map[string]policies.Namespace{}, Budgets: map[string]*policyv1.CapacityBudget{}, Now: now}
	var names []string
	for i := range benchNamespaces {
		name := fmt.Sprintf("team-%02d", i)
		names = append(names, name)
		tier := "prod"
		if i%2 == 1 {
			tier = "dev"
		}
		p.Namespaces[name] = policies.Namespace{Name: name, Labels: map[string]string{"tier": tier}}
		p.Budgets[name] = budget(name, hourly, func(b *policyv1.CapacityBudget) {
			b.Spec.InstanceFamilies = &policyv1.InstanceFamilies{Allow: []string{"synthetic*", "m*", "c*"}, Deny: []string{"*metal*"}}
			if i%2 == 0 {
				b.Spec.Spot = &policyv1.SpotShare{MinPercent: ptr(int32(50)), MaxPercent: ptr(int32(90))}
			}
		})
	}
	probs := e.SetPolicies([]policyv1.CapacityPolicy{
		*test.NoGPUInDev(),
		{ObjectMeta: metav1.ObjectMeta{Name: "price-ceiling"}, Spec: policyv1.CapacityPolicySpec{
			Parameters: &k8sruntime.RawExtension{Raw: []byte(`{"maxPricePerHour": 15}`)},
			Modules: []policyv1.PolicyModule{{Name: "ceiling.rego", Rego: `package karpenter.provisioning

price_ceiling contains {"pricePerHour": data.parameters.maxPricePerHour, "msg": "no node over the ceiling"}
`}}}},
	})
	if len(probs) > 0 {
		b.Fatal(probs)
	}
	return p, names
}

func benchmarkMixed(b *testing.B, withPolicies bool) { benchmarkMixedUnder(b, withPolicies, "500") }

// benchmarkMixedUnder is the benchmark with each namespace's hourly limit at hourly.
func benchmarkMixedUnder(b *testing.B, withPolicies bool, hourly string) {
	p, names := benchPlanner(b, hourly)
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
	}}}}
	in := &solver.Input{Pods: bench.MixedPodsIn(5000, names), NodePools: []*solver.NodePool{{NodePool: np, InstanceTypes: bench.SyntheticTypes(400)}}}
	var res *solver.Result
	blocked := 0
	if withPolicies {
		// The steady state: the engine has seen these policies, budgets and instance types in
		// an earlier batch (deny_instance_types is cached until one of them changes).
		if _, err := p.Solve(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	b.ResetTimer()
	for b.Loop() {
		if withPolicies {
			out, err := p.Solve(context.Background(), in)
			if err != nil {
				b.Fatal(err)
			}
			res, blocked = out.Result, len(out.Blocked)
		} else {
			var err error
			if res, err = solver.Solve(in); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms)
	if n := len(res.Unschedulable) - blocked; n > 0 {
		b.Fatalf("%d pods unschedulable, first: %s", n, res.Unschedulable[0].Reason)
	}
	b.ReportMetric(float64(len(in.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64(len(res.NodeClaims)), "nodes")
	b.ReportMetric(res.PricePerHour(), "$/hour")
	b.ReportMetric(float64(blocked), "blocked")
	b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/1e6, "MB/solve")
}

func BenchmarkMixed5000With20NamespacesNoPolicies(b *testing.B) { benchmarkMixed(b, false) }
func BenchmarkMixed5000With20NamespacesPolicies(b *testing.B)   { benchmarkMixed(b, true) }

// BenchmarkMixed5000With20NamespacesTightBudgets limits each namespace to $2/hour, about a
// third of what its pods ask for: pods are held back, and the held pods are tried again on
// NodeClaims no dearer than what is left (refill.go).
func BenchmarkMixed5000With20NamespacesTightBudgets(b *testing.B) { benchmarkMixedUnder(b, true, "2") }
