package policies

import (
	"context"
	"strings"
	"testing"
)

func TestCompileReportsEveryProblemWithItsPlace(t *testing.T) {
	_, problems := Compile([]Module{
		{Name: "a.rego", Rego: "package karpenter.provisioning\n\ndeny contains x if {\n  x := \n}\n"},
		{Name: "b.rego", Rego: "package team.rules\n\nallow := true\n"},
	})
	if len(problems) != 2 {
		t.Fatalf("want a problem per module, got %v", problems)
	}
	if p := problems[0]; p.Module != "a.rego" || p.Line != 5 || p.Column != 1 {
		t.Errorf("syntax error located at %s", p.Error())
	}
	if p := problems[1]; p.Module != "b.rego" || p.Line != 1 || !strings.Contains(p.Message, "not a decision point") {
		t.Errorf("package problem: %s", p.Error())
	}
}

func TestCompileFindsDecisionPointsAndRunsTests(t *testing.T) {
	c, problems := Compile([]Module{
		{Name: "gate.rego", Rego: "package karpenter.launch\n\ndeny contains \"too big\" if input.cpu > data.parameters.maxCPU\n"},
		{Name: "gate_test.rego", Rego: "package karpenter.launch_test\n\nimport data.karpenter.launch\n\n" +
			"test_big if launch.deny == {\"too big\"} with input as {\"cpu\": 96}\n" +
			"test_small if count(launch.deny) == 0 with input as {\"cpu\": 96}\n"},
	})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if len(c.DecisionPoints) != 1 || c.DecisionPoints[0] != "karpenter.launch" {
		t.Errorf("decision points = %v (test modules do not count)", c.DecisionPoints)
	}
	results, err := c.RunTests(context.Background(), map[string]any{"maxCPU": 64})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || !results[0].Passed || results[1].Passed {
		t.Fatalf("want test_big to pass and test_small to fail, got %+v", results)
	}
	if r := results[1]; r.Module != "gate_test.rego" || r.Line != 6 || !strings.Contains(r.Message, "false or undefined") {
		t.Errorf("failure not located: %+v", r)
	}
}

func TestTestPackageOnlyInTestModules(t *testing.T) {
	_, problems := Compile([]Module{{Name: "rules.rego", Rego: "package karpenter.launch_test\n\ntest_x if true\n"}})
	if len(problems) != 1 || !strings.Contains(problems[0].Message, "not a decision point") {
		t.Fatalf("a _test package outside a _test.rego file must be refused, got %v", problems)
	}
}
