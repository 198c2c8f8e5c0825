// Package policy keeps the policy engine's sets current and the status of the objects that
// change its verdicts: CapacityPolicy status (compile errors by module, line and column;
// tests; evaluation errors) and CapacityException status (active or expired, the namespaces
// it applies to). The budgets' controllers are in controllers/budget. It never writes spec,
// labels or annotations.
package policy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/karpenter-policy/karpenter/controllers/status"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
	"github.com/karpenter-policy/karpenter/policies"
)

// EngineSync loads the cluster's CapacityPolicies and CapacityExceptions into the engine
// whenever one changes. It runs on every replica, leader or not: the admission webhook
// evaluates policies too, and every replica decides an exception the same way
// (policies.Applies, with its own clock's now).
type EngineSync struct {
	client client.Client
	engine *policies.Engine
}

// NewEngineSync returns the controller that feeds the engine.
func NewEngineSync(c client.Client, e *policies.Engine) *EngineSync {
	return &EngineSync{client: c, engine: e}
}

// Register watches CapacityPolicies and CapacityExceptions.
func (s *EngineSync) Register(mgr ctrl.Manager) error {
	// Every replica's engine follows the policies: admission runs on all of them.
	opts := ratelimit.Options(1)
	opts.NeedLeaderElection = ptr.To(false)
	// One key: every change loads the whole set again.
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "engine"}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("policy.engine").
		Watches(&policyv1.CapacityPolicy{}, one).Watches(&policyv1.CapacityException{}, one).
		WithOptions(opts).
		Complete(s)
}

// Reconcile recompiles what changed and swaps the engine's sets in one step each.
func (s *EngineSync) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var exceptions policyv1.CapacityExceptionList
	if err := s.client.List(ctx, &exceptions); err != nil {
		return reconcile.Result{}, err
	}
	for _, err := range s.engine.SetExceptions(exceptions.Items) {
		log.FromContext(ctx).Info("CapacityException left out of the engine", "error", err.Error())
	}
	var list policyv1.CapacityPolicyList
	if err := s.client.List(ctx, &list); err != nil {
		return reconcile.Result{}, err
	}
	live := list.Items[:0]
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	for _, pp := range s.engine.SetPolicies(live) {
		log.FromContext(ctx).Info("CapacityPolicy left out of the engine", "CapacityPolicy", pp.Policy, "problems", fmt.Sprint(pp.Problems))
	}
	return reconcile.Result{}, nil
}

// PolicyStatus keeps CapacityPolicy status: Compiled, TestsPassed, EvaluationFailed, Ready.
type PolicyStatus struct {
	client client.Client
	engine *policies.Engine
	// errorsBase are, by policy UID, the evaluation errors status held when this process
	// first saw the policy: the engine counts from zero after a restart, status goes on.
	mu         sync.Mutex
	errorsBase map[types.UID]int64
}

// NewPolicyStatus returns the CapacityPolicy status controller.
func NewPolicyStatus(c client.Client, e *policies.Engine) *PolicyStatus {
	return &PolicyStatus{client: c, engine: e}
}

// Register watches CapacityPolicies.
func (r *PolicyStatus) Register(mgr ctrl.Manager) error {
	// status.violations counts the audit's reports: a report written recounts the policies its
	// results name (before and after the write).
	named := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		var results []reportsv1alpha1.ReportResult
		switch r := o.(type) {
		case *reportsv1alpha1.Report:
			results = r.Results
		case *reportsv1alpha1.ClusterReport:
			results = r.Results
		}
		seen := map[string]bool{}
		var reqs []reconcile.Request
		for _, x := range results {
			name, ok := strings.CutPrefix(x.Policy, "CapacityPolicy/")
			if ok && !seen[name] {
				seen[name] = true
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			}
		}
		return reqs
	})
	managed := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()["app.kubernetes.io/managed-by"] == "karpenter-policy"
	}))
	return ctrl.NewControllerManagedBy(mgr).Named("policy.capacitypolicy.status").WithOptions(ratelimit.Options(1)).
		For(&policyv1.CapacityPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&reportsv1alpha1.Report{}, named, managed).Watches(&reportsv1alpha1.ClusterReport{}, named, managed).Complete(r)
}

// maxListed is how many compile errors and test failures status lists (the CRD's maxItems);
// the counts and the condition messages still say how many there are.
const maxListed = 50

// statusRefresh is how often status picks up evaluation errors counted since.
const statusRefresh = time.Minute

// Reconcile compiles the policy's modules, runs its tests with its parameters, and writes
// what it found.
func (r *PolicyStatus) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &policyv1.CapacityPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	st.CompileErrors, st.DecisionPoints, st.Tests = nil, nil, nil
	compiled := r.compile(ctx, p, st)
	src := policies.Source{Kind: "CapacityPolicy", Name: p.Name}.String()
	st.EvaluationErrors = r.errorsSinceCreated(p) + r.engine.EvaluationErrors(src)
	v, err := r.violations(ctx, p.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	st.Violations = v
	conds := status.Conditions{List: &st.Conditions, Generation: p.Generation}
	if compiled {
		conds.Set(policyv1.ConditionTypeCompiled, true, "Compiled", "", fmt.Sprintf("joins %v", st.DecisionPoints))
	} else {
		e := st.CompileErrors[0]
		conds.Set(policyv1.ConditionTypeCompiled, false, "", "CompileErrors", fmt.Sprintf("%d errors; first %s:%d:%d: %s", len(st.CompileErrors), e.Module, e.Line, e.Column, e.Message))
	}
	testsOK := compiled && (st.Tests == nil || st.Tests.Failed == 0)
	switch {
	case !compiled:
		conds.Set(policyv1.ConditionTypeTestsPassed, false, "", "NotCompiled", "the modules do not compile")
	case st.Tests == nil:
		conds.Set(policyv1.ConditionTypeTestsPassed, true, "NoTests", "", "the policy has no _test.rego module")
	case st.Tests.Failed > 0:
		conds.Set(policyv1.ConditionTypeTestsPassed, false, "", "TestsFailed", fmt.Sprintf("%d of %d tests failed; first %s", st.Tests.Failed, st.Tests.Passed+st.Tests.Failed, st.Tests.Failures[0].Name))
	default:
		conds.Set(policyv1.ConditionTypeTestsPassed, true, "TestsPassed", "", fmt.Sprintf("%d tests passed", st.Tests.Passed))
	}
	conds.Set(policyv1.ConditionTypeEvaluationFailed, st.EvaluationErrors > 0, "EvaluationErrors", "NoErrors",
		fmt.Sprintf("%d evaluations failed (failurePolicy %s)", st.EvaluationErrors, failurePolicy(p)))
	conds.Set(policyv1.ConditionTypeReady, compiled && testsOK, "Ready", "NotReady", "")
	changed := !equality.Semantic.DeepEqual(&p.Status, st)
	p.Status = *st
	return status.Write(ctx, r.client, p, changed, statusRefresh)
}

func failurePolicy(p *policyv1.CapacityPolicy) policyv1.FailurePolicy {
	if p.Spec.FailurePolicy == "" {
		return policyv1.FailurePolicyIgnore
	}
	return p.Spec.FailurePolicy
}

// compile fills compile errors, decision points and test results; it reports whether the
// modules compiled.
func (r *PolicyStatus) compile(ctx context.Context, p *policyv1.CapacityPolicy, st *policyv1.CapacityPolicyStatus) bool {
	params, err := policies.Parameters(p)
	if err != nil {
		st.CompileErrors = []policyv1.PolicyError{{Module: "spec.parameters", Message: err.Error()}}
		return false
	}
	modules, _ := policies.PolicyModules(p)
	c, problems := policies.Compile(modules)
	for _, pr := range problems[:min(len(problems), maxListed)] {
		st.CompileErrors = append(st.CompileErrors, policyv1.PolicyError{Module: pr.Module, Line: int32(pr.Line), Column: int32(pr.Column), Message: pr.Message})
	}
	if c == nil {
		return false
	}
	st.DecisionPoints = c.DecisionPoints
	hasTests := false
	for _, m := range modules {
		hasTests = hasTests || policies.IsTestModule(m.Name)
	}
	if !hasTests {
		return true
	}
	results, err := c.RunTests(ctx, params)
	if err != nil {
		st.Tests = &policyv1.PolicyTestResults{Failed: 1, Failures: []policyv1.PolicyTestFailure{{Name: "tests", Message: err.Error()}}}
		return true
	}
	st.Tests = &policyv1.PolicyTestResults{}
	for _, t := range results {
		if t.Passed {
			st.Tests.Passed++
			continue
		}
		st.Tests.Failed++
		if len(st.Tests.Failures) < maxListed {
			st.Tests.Failures = append(st.Tests.Failures, policyv1.PolicyTestFailure{Name: t.Name, Message: t.Message})
		}
	}
	return true
}

// violations counts the policy's results in the audit's reports (docs/policies.md, "Audit"):
// fail results where it denies, warn results, fail results where it is in DryRun (what it
// would refuse enforced). The reports are rebuilt from the cluster by whichever replica
// leads, so a restart or a failover counts the same; nil when there is none.
func (r *PolicyStatus) violations(ctx context.Context, name string) (*policyv1.PolicyViolations, error) {
	sel := client.MatchingLabels{"app.kubernetes.io/managed-by": "karpenter-policy"}
	var reports reportsv1alpha1.ReportList
	if err := r.client.List(ctx, &reports, sel); err != nil {
		return nil, err
	}
	var cluster reportsv1alpha1.ClusterReportList
	if err := r.client.List(ctx, &cluster, sel); err != nil {
		return nil, err
	}
	policy := "CapacityPolicy/" + name
	v := &policyv1.PolicyViolations{}
	count := func(rs []reportsv1alpha1.ReportResult) {
		for _, x := range rs {
			if x.Policy != policy {
				continue
			}
			switch {
			case x.Result == "warn":
				v.Warned++
			case x.Result == "fail" && x.Properties["enforcement"] == string(policyv1.EnforcementDryRun):
				v.DryRun++
			case x.Result == "fail":
				v.Denied++
			}
		}
	}
	for _, rep := range reports.Items {
		count(rep.Results)
	}
	for _, rep := range cluster.Items {
		count(rep.Results)
	}
	if v.Denied+v.Warned+v.DryRun == 0 {
		return nil, nil
	}
	return v, nil
}

// errorsSinceCreated is the evaluation errors status held when this process first saw the
// policy, so that a restart does not set the count back to zero.
func (r *PolicyStatus) errorsSinceCreated(p *policyv1.CapacityPolicy) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errorsBase == nil {
		r.errorsBase = map[types.UID]int64{}
	}
	base, ok := r.errorsBase[p.UID]
	if !ok {
		base = p.Status.EvaluationErrors
		r.errorsBase[p.UID] = base
	}
	return base
}
