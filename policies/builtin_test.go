package policies

import (
	"context"
	"sort"
	"testing"
)

// minBuiltinCoverage is the share of the built-in rules' lines the Rego tests must evaluate.
const minBuiltinCoverage = 90.0

// TestBuiltinPolicies runs every _test.rego of the built-in policies, the way `opa test
// --coverage` does, and fails below minBuiltinCoverage.
func TestBuiltinPolicies(t *testing.T) {
	c, err := CompileBuiltin(true)
	if err != nil {
		t.Fatal(err)
	}
	results, report, err := c.RunTestsWithCoverage(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) == 0 {
		t.Fatal("no Rego tests found")
	}
	for _, r := range results {
		if !r.Passed {
			t.Errorf("%s (%s:%d): %s", r.Name, r.Module, r.Line, r.Message)
		}
	}
	files := make([]string, 0, len(report.Files))
	for f := range report.Files {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		fr := report.Files[f]
		t.Logf("%s: %.1f%% covered (%d lines, %d not covered)", f, fr.Coverage, fr.CoveredLines+fr.NotCoveredLines, fr.NotCoveredLines)
		for _, r := range fr.NotCovered {
			t.Logf("  not covered: %s:%d-%d", f, r.Start.Row, r.End.Row)
		}
	}
	t.Logf("%d Rego tests, built-in coverage %.1f%%", len(results), report.Coverage)
	if report.Coverage < minBuiltinCoverage {
		t.Errorf("built-in Rego coverage %.1f%% is below %.0f%%", report.Coverage, minBuiltinCoverage)
	}
}
