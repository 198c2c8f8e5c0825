// Package policies is the policy engine: the built-in Rego library and the Go code around
// OPA v1 that compiles, tests and evaluates it at the decision points karpenter.provisioning,
// karpenter.launch, karpenter.disruption and karpenter.admission. It does no Kubernetes I/O:
// it takes plain inputs and returns decisions.
package policies

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
)

// Module is one Rego source file.
type Module struct {
	Name string
	Rego string
}

// Problem is a compile error located in a module.
type Problem struct {
	Module  string
	Line    int
	Column  int
	Message string
}

func (p Problem) Error() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %s", p.Module, p.Message)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.Module, p.Line, p.Column, p.Message)
}

// Compiled is a set of modules that parsed and compiled together.
type Compiled struct {
	Compiler *ast.Compiler
	Modules  map[string]*ast.Module
	// DecisionPoints are the decision points the non-test modules join.
	DecisionPoints []string
}

// IsTestModule reports whether a module holds tests: its name ends in _test.rego.
func IsTestModule(name string) bool { return strings.HasSuffix(name, "_test.rego") }

// Compile parses the modules as Rego v1 and compiles them together. Each module's package
// must be a decision point (karpenter.provisioning, ...); a test module's may also be the
// decision point's package with a _test suffix. Every problem is returned, each with the
// module, line and column it is at.
func Compile(modules []Module) (*Compiled, []Problem) {
	return compile(modules, nil)
}

// compile is Compile that also accepts modules in the library packages given: the built-in
// policies share their CapacityBudget arithmetic through one.
func compile(modules []Module, libraries []string) (*Compiled, []Problem) {
	var problems []Problem
	parsed := map[string]*ast.Module{}
	points := map[string]bool{}
	for _, m := range modules {
		mod, err := ast.ParseModuleWithOpts(m.Name, m.Rego, ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: Capabilities()})
		if err != nil {
			problems = append(problems, astProblems(m.Name, err)...)
			continue
		}
		pkg := strings.TrimPrefix(mod.Package.Path.String(), "data.")
		point := strings.TrimSuffix(pkg, "_test")
		if slices.Contains(libraries, point) {
			parsed[m.Name] = mod
			continue
		}
		if !isDecisionPoint(point) || (pkg != point && !IsTestModule(m.Name)) {
			problems = append(problems, Problem{Module: m.Name, Line: mod.Package.Location.Row, Column: mod.Package.Location.Col,
				Message: fmt.Sprintf("package %s is not a decision point; use one of %s (tests may add _test)", pkg, strings.Join(policyv1.DecisionPoints, ", "))})
			continue
		}
		if !IsTestModule(m.Name) {
			points[point] = true
		}
		parsed[m.Name] = mod
	}
	if len(problems) > 0 {
		return nil, problems
	}
	compiler := ast.NewCompiler().WithEnablePrintStatements(false).WithCapabilities(Capabilities())
	compiler.Compile(parsed)
	if compiler.Failed() {
		return nil, astProblems("", compiler.Errors)
	}
	c := &Compiled{Compiler: compiler, Modules: parsed}
	for _, p := range policyv1.DecisionPoints {
		if points[p] {
			c.DecisionPoints = append(c.DecisionPoints, p)
		}
	}
	return c, nil
}

func isDecisionPoint(pkg string) bool {
	for _, p := range policyv1.DecisionPoints {
		if p == pkg {
			return true
		}
	}
	return false
}

func astProblems(module string, err error) []Problem {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return []Problem{{Module: module, Message: err.Error()}}
	}
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		p := Problem{Module: module, Message: explainDenied(e.Message)}
		if e.Location != nil {
			p.Line, p.Column = e.Location.Row, e.Location.Col
			if e.Location.File != "" {
				p.Module = e.Location.File
			}
		}
		out = append(out, p)
	}
	return out
}

// TestResult is the outcome of one test_ rule.
type TestResult struct {
	// Name is the rule's full name, e.g. data.karpenter.provisioning_test.test_denies_gpu.
	Name   string
	Module string
	Line   int
	Passed bool
	// Message says why a test failed or could not be evaluated.
	Message  string
	Duration time.Duration
}

// RunTests runs every test_ rule of the compiled modules, with parameters as
// data.parameters, the way `opa test` does, and returns the results sorted by name.
func (c *Compiled) RunTests(ctx context.Context, parameters map[string]any) ([]TestResult, error) {
	return c.runTests(ctx, parameters, nil)
}

// RunTestsWithCoverage is RunTests that also reports which lines of the non-test modules the
// tests evaluated.
func (c *Compiled) RunTestsWithCoverage(ctx context.Context, parameters map[string]any) ([]TestResult, cover.Report, error) {
	cov := cover.New()
	results, err := c.runTests(ctx, parameters, cov)
	if err != nil {
		return nil, cover.Report{}, err
	}
	// The report counts every module evaluated; keep the rules, not the tests.
	report := cov.Report(c.Modules)
	covered, notCovered := 0, 0
	for name, f := range report.Files {
		if IsTestModule(name) {
			delete(report.Files, name)
			continue
		}
		covered += f.CoveredLines
		notCovered += f.NotCoveredLines
	}
	report.CoveredLines, report.NotCoveredLines, report.Coverage = covered, notCovered, 0
	if covered+notCovered > 0 {
		report.Coverage = 100 * float64(covered) / float64(covered+notCovered)
	}
	return results, report, nil
}

func (c *Compiled) runTests(ctx context.Context, parameters map[string]any, cov *cover.Cover) ([]TestResult, error) {
	data := map[string]any{}
	if parameters != nil {
		data["parameters"] = parameters
	}
	store := inmem.NewFromObject(data)
	runner := tester.NewRunner().SetCompiler(c.Compiler).SetStore(store).SetModules(c.Modules).
		SetTimeout(10 * time.Second).RaiseBuiltinErrors(true)
	if cov != nil {
		runner = runner.SetCoverageQueryTracer(cov)
	}
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("running policy tests: %w", err)
	}
	var out []TestResult
	for r := range ch {
		res := TestResult{Name: r.Package + "." + r.Name, Passed: r.Pass(), Duration: r.Duration}
		if r.Location != nil {
			res.Module, res.Line = r.Location.File, r.Location.Row
		}
		switch {
		case r.Error != nil:
			res.Message = r.Error.Error()
		case r.Fail:
			res.Message = "test rule is false or undefined"
			if r.FailedAt != nil && r.FailedAt.Location != nil {
				res.Message = fmt.Sprintf("failed at %s:%d: %s", r.FailedAt.Location.File, r.FailedAt.Location.Row, r.FailedAt.String())
			}
		}
		if r.Skip {
			continue
		}
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
