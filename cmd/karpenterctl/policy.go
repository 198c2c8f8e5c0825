package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/cover"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
	"github.com/karpenter-policy/karpenter/policies"
)

const policyUsage = `karpenterctl policy test PATH [PATH...] [--parameters FILE] [-v] [--coverage] [-o text|json|junit]

Runs the test_ rules of Rego policies the way 'opa test' does, before a pull request merges.
PATH is a .rego file, a CapacityPolicy manifest (.yaml, .yml, .json) or a directory searched
recursively for both (there, YAML that is no manifest, such as a Helm template, is skipped
unless it mentions CapacityPolicy). The .rego files are compiled and tested together, with
the object in --parameters (JSON or YAML) as data.parameters; each CapacityPolicy is compiled
and tested on its own with its spec.parameters, as the admission webhook does.

--coverage reports, per policy, the share of its rules' lines its tests evaluate (as 'opa test
--coverage' does) and the lines they do not; -o junit prints JUnit XML, a test case per test.

Exit status: 0 when every test passes, 1 when a test fails, a module does not compile or
there is no test to run, 2 on unreadable input or bad usage.
`

// policyTest is one test's outcome as karpenterctl reports it.
type policyTest struct {
	// Name is the rule's full name, e.g. data.karpenter.provisioning_test.test_denies_gpu.
	Name string `json:"name"`
	// Policy is the CapacityPolicy the test belongs to; empty for a .rego file.
	Policy string `json:"policy,omitempty"`
	Module string `json:"module"`
	// File and Line locate the test rule: the .rego file, or the manifest line inside the
	// CapacityPolicy's module.
	File            string  `json:"file"`
	Line            int     `json:"line"`
	Passed          bool    `json:"passed"`
	Message         string  `json:"message,omitempty"`
	DurationSeconds float64 `json:"durationSeconds"`
}

type policyReport struct {
	Tests  []policyTest `json:"tests"`
	Errors []string     `json:"errors,omitempty"`
	Passed int          `json:"passed"`
	Failed int          `json:"failed"`
	// Coverage is, with --coverage, each policy's (or the .rego files') coverage.
	Coverage []policyCoverage `json:"coverage,omitempty"`
	// coverage says whether to measure it.
	coverage bool
}

// policyCoverage is how much of one policy's rules (its modules that are not tests) its tests
// evaluate, by line, as opa test --coverage counts them.
type policyCoverage struct {
	// Policy is the CapacityPolicy; empty for the .rego files tested together.
	Policy          string  `json:"policy,omitempty"`
	File            string  `json:"file"`
	CoveredLines    int     `json:"coveredLines"`
	NotCoveredLines int     `json:"notCoveredLines"`
	Coverage        float64 `json:"coverage"`
	// NotCovered are the lines no test evaluated, in the file (the manifest's lines for a
	// CapacityPolicy), as FILE:LINE.
	NotCovered []string `json:"notCovered"`
}

func policyCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "test" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, policyUsage)
			return exitOK
		}
		fmt.Fprint(stderr, "karpenterctl policy: the only subcommand is test\n\n"+policyUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("karpenterctl policy test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	paramsFile := fs.String("parameters", "", "JSON or YAML object given to the .rego files as data.parameters")
	verbose := fs.Bool("v", false, "list passing tests too")
	coverage := fs.Bool("coverage", false, "report the share of each policy's rules its tests evaluate, and the lines they do not")
	output := fs.String("o", "text", "output format: text, json or junit")
	if err := fs.Parse(interleave(args[1:])); err != nil {
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, "karpenterctl policy test: give one or more PATH\n\n"+policyUsage)
		return exitUsage
	}
	if *output != "text" && *output != "json" && *output != "junit" {
		fmt.Fprintf(stderr, "karpenterctl policy test: -o must be text, json or junit, got %q\n", *output)
		return exitUsage
	}
	var params map[string]any
	if *paramsFile != "" {
		b, err := os.ReadFile(*paramsFile)
		if err == nil {
			err = yaml.Unmarshal(b, &params)
		}
		if err != nil {
			fmt.Fprintf(stderr, "karpenterctl policy test: --parameters %s: %v (want a JSON or YAML object)\n", *paramsFile, err)
			return exitUsage
		}
	}
	regoFiles, manifests, err := policySources(fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl policy test:", err)
		return exitUsage
	}
	ctx := context.Background()
	report := &policyReport{Tests: []policyTest{}, coverage: *coverage}
	if len(regoFiles) > 0 {
		modules := make([]policies.Module, 0, len(regoFiles))
		for _, f := range regoFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				fmt.Fprintln(stderr, "karpenterctl policy test:", err)
				return exitUsage
			}
			modules = append(modules, policies.Module{Name: f, Rego: string(b)})
		}
		report.runIn(ctx, "", "", modules, params, func(_ string, line int) int { return line })
	}
	docs, err := readPolicyManifests(manifests)
	if err != nil {
		fmt.Fprintln(stderr, "karpenterctl policy test:", err)
		return exitUsage
	}
	for i := range docs {
		d := &docs[i]
		if gvk := d.GVK(); gvk.Group != policyv1.GroupVersion.Group || gvk.Kind != "CapacityPolicy" {
			continue
		}
		var p policyv1.CapacityPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, &p); err != nil {
			report.Errors = append(report.Errors, fmt.Sprintf("%s:%d: CapacityPolicy %s: %v", d.File, d.Line, d.Name(), err))
			continue
		}
		pp, err := policies.Parameters(&p)
		if err != nil {
			report.Errors = append(report.Errors, fmt.Sprintf("%s:%d: CapacityPolicy %s: spec.parameters: %v", d.File, d.LineOf("spec.parameters"), p.Name, err))
			continue
		}
		modules, index := policies.PolicyModules(&p)
		fileLine := func(module string, line int) int {
			if i, ok := index[module]; ok {
				if l, ok := d.BlockScalarLine(fmt.Sprintf("spec.modules[%d].rego", i), line); ok {
					return l
				}
				return d.LineOf(fmt.Sprintf("spec.modules[%d].rego", i))
			}
			return d.Line
		}
		report.runIn(ctx, d.File, p.Name, modules, pp, fileLine)
	}
	if len(report.Tests) == 0 && len(report.Errors) == 0 {
		report.Errors = append(report.Errors, "no test_ rules found in "+strings.Join(fs.Args(), ", "))
	}
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	case "junit":
		report.junit(stdout)
	default:
		report.text(stdout, *verbose)
	}
	if report.Failed > 0 || len(report.Errors) > 0 {
		return exitInvalid
	}
	return exitOK
}

// runIn compiles and tests one module set; file is the manifest the modules are in, empty
// when each module is its own .rego file.
func (r *policyReport) runIn(ctx context.Context, file, policy string, modules []policies.Module, params map[string]any, line func(string, int) int) {
	where := func(module string) string {
		if file == "" {
			return module
		}
		return file
	}
	prefix := ""
	if policy != "" {
		prefix = "CapacityPolicy " + policy + ": "
	}
	compiled, problems := policies.Compile(modules)
	for _, p := range problems {
		r.Errors = append(r.Errors, fmt.Sprintf("%s:%d:%d: %s%s: %s", where(p.Module), line(p.Module, p.Line), p.Column, prefix, p.Module, p.Message))
	}
	if compiled == nil {
		return
	}
	var results []policies.TestResult
	var err error
	if r.coverage {
		var cov cover.Report
		results, cov, err = compiled.RunTestsWithCoverage(ctx, params)
		if err == nil {
			r.Coverage = append(r.Coverage, coverageOf(policy, file, cov, line))
		}
	} else {
		results, err = compiled.RunTests(ctx, params)
	}
	if err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("%s%v", prefix, err))
		return
	}
	for _, t := range results {
		r.Tests = append(r.Tests, policyTest{Name: t.Name, Policy: policy, Module: t.Module, File: where(t.Module),
			Line: line(t.Module, t.Line), Passed: t.Passed, Message: t.Message, DurationSeconds: t.Duration.Seconds()})
		if t.Passed {
			r.Passed++
		} else {
			r.Failed++
		}
	}
}

func (r *policyReport) text(w io.Writer, verbose bool) {
	for _, e := range r.Errors {
		fmt.Fprintln(w, "ERROR:", e)
	}
	for _, t := range r.Tests {
		name := t.Name
		if t.Policy != "" {
			name = t.Policy + "/" + name
		}
		switch {
		case !t.Passed:
			fmt.Fprintf(w, "FAIL: %s (%s:%d): %s\n", name, t.File, t.Line, t.Message)
		case verbose:
			fmt.Fprintf(w, "PASS: %s (%.3fms)\n", name, t.DurationSeconds*1000)
		}
	}
	total := r.Passed + r.Failed
	if total > 0 {
		fmt.Fprintln(w, strings.Repeat("-", 80))
		fmt.Fprintf(w, "PASS: %d/%d\n", r.Passed, total)
		if r.Failed > 0 {
			fmt.Fprintf(w, "FAIL: %d/%d\n", r.Failed, total)
		}
	}
	for _, c := range r.Coverage {
		name := c.Policy
		if name == "" {
			name = c.File
		}
		fmt.Fprintf(w, "COVERAGE: %s %.1f%% (%d of %d lines)", name, c.Coverage, c.CoveredLines, c.CoveredLines+c.NotCoveredLines)
		if len(c.NotCovered) > 0 {
			fmt.Fprintf(w, "; not covered: %s", strings.Join(c.NotCovered, ", "))
		}
		fmt.Fprintln(w)
	}
}

// coverageOf is one module set's coverage, with the lines not covered located in the file
// (a .rego file, or the manifest holding the CapacityPolicy).
func coverageOf(policy, file string, cov cover.Report, line func(string, int) int) policyCoverage {
	c := policyCoverage{Policy: policy, File: file, CoveredLines: cov.CoveredLines, NotCoveredLines: cov.NotCoveredLines, Coverage: cov.Coverage, NotCovered: []string{}}
	modules := make([]string, 0, len(cov.Files))
	for m := range cov.Files {
		modules = append(modules, m)
	}
	sort.Strings(modules)
	for _, m := range modules {
		where := file
		if where == "" {
			where = m
		}
		if c.File == "" {
			c.File = m
		}
		for _, rg := range cov.Files[m].NotCovered {
			for row := rg.Start.Row; row <= rg.End.Row; row++ {
				c.NotCovered = append(c.NotCovered, fmt.Sprintf("%s:%d", where, line(m, row)))
			}
		}
	}
	if policy == "" && len(modules) > 1 {
		c.File = strings.Join(modules, ",")
	}
	return c
}

// junit writes the tests as JUnit XML: one suite, a case per test (named by its policy and
// rule, classed by its policy or file), a failed case per compile error; coverage, with
// --coverage, as the suite's properties.
func (r *policyReport) junit(w io.Writer) {
	suite := junitSuite{Name: "karpenterctl policy test"}
	for i, e := range r.Errors {
		suite.add(junitCase{Name: fmt.Sprintf("error %d", i+1), Classname: "karpenterctl.policy", Failure: &junitMessage{Message: e, Type: "error", Text: e}})
	}
	for _, t := range r.Tests {
		class := t.Policy
		if class == "" {
			class = t.File
		}
		c := junitCase{Name: t.Name, Classname: class, Time: strconv.FormatFloat(t.DurationSeconds, 'f', 6, 64)}
		if !t.Passed {
			msg := fmt.Sprintf("%s:%d: %s", t.File, t.Line, t.Message)
			c.Failure = &junitMessage{Message: msg, Type: "test", Text: msg}
		}
		suite.add(c)
	}
	for _, c := range r.Coverage {
		name := c.Policy
		if name == "" {
			name = c.File
		}
		suite.Properties = append(suite.Properties, junitProperty{Name: "coverage " + name, Value: strconv.FormatFloat(c.Coverage, 'f', 1, 64) + "%"})
	}
	_ = writeJUnit(w, suite)
}

// manifestFile is a YAML or JSON file to read CapacityPolicies from; strict when it was
// named outright rather than found in a directory.
type manifestFile struct {
	path   string
	strict bool
}

// policySources sorts the PATHs into .rego files and manifests, searching directories
// recursively (in name order) for both.
func policySources(paths []string) (rego []string, manifests []manifestFile, err error) {
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		if !info.IsDir() {
			if strings.EqualFold(filepath.Ext(p), ".rego") {
				rego = append(rego, p)
			} else {
				manifests = append(manifests, manifestFile{path: p, strict: true})
			}
			continue
		}
		err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".rego":
				rego = append(rego, path)
			case ".yaml", ".yml", ".json":
				manifests = append(manifests, manifestFile{path: path})
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return rego, manifests, nil
}

// readPolicyManifests parses the manifest files. A file found in a directory that does not
// parse as manifests (a kustomize patch, a Helm template) is skipped unless it mentions
// CapacityPolicy; a file named outright must parse.
func readPolicyManifests(files []manifestFile) ([]offline.Document, error) {
	var docs []offline.Document
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, err
		}
		d, err := offline.Parse(f.path, b)
		if err != nil {
			if f.strict || bytes.Contains(b, []byte("CapacityPolicy")) {
				return nil, err
			}
			continue
		}
		docs = append(docs, d...)
	}
	return docs, nil
}

// interleave moves flags after the PATHs to the front, so that 'policy test dir -v' works
// as 'opa test dir -v' does.
func interleave(args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			rest = append(rest, args[i+1:]...)
			return append(flags, append([]string{"--"}, rest...)...)
		case strings.HasPrefix(a, "-") && a != "-":
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if (name == "parameters" || name == "o") && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		default:
			rest = append(rest, a)
		}
	}
	return append(flags, rest...)
}
