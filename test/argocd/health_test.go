// Package argocd_test runs the ArgoCD health checks of config/argocd with gopher-lua, the Lua
// interpreter ArgoCD embeds, against objects as the API server returns them.
package argocd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-policy/karpenter/test/env"
)

// health runs a health script on an object given as YAML and returns status and message.
func health(t *testing.T, script, object string) (string, string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(env.RepoRoot(), "config", "argocd", script))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	raw, err := yaml.YAMLToJSON([]byte(object))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	fn, err := L.LoadString(string(src))
	if err != nil {
		t.Fatalf("%s does not parse: %v", script, err)
	}
	L.Push(fn)
	if err := L.PCall(0, 1, nil); err != nil {
		t.Fatalf("%s fails on %s: %v", script, object, err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("%s returns %v, not a table", script, L.Get(-1))
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case float64:
		return lua.LNumber(x)
	case bool:
		return lua.LBool(x)
	}
	return lua.LNil
}

func check(t *testing.T, script, object, wantStatus, wantMessage string) {
	t.Helper()
	status, msg := health(t, script, object)
	if status != wantStatus || !strings.Contains(msg, wantMessage) {
		t.Errorf("%s: got %s %q, want %s containing %q\n%s", script, status, msg, wantStatus, wantMessage, object)
	}
}

// A ClusterCapacityBudget has the same status, and the same script: over its limit,
// Degraded with the namespaces together.
func TestClusterCapacityBudgetHealth(t *testing.T) {
	const s = "health-capacitybudget.lua"
	check(t, s, `metadata: {generation: 1}
status:
  observedGeneration: 1
  namespaceCount: 3
  hourlyCost: "1.2000"
  hourlyLimit: "1.0000"
  conditions:
  - {type: Ready, status: "True", message: "selects 3 namespaces"}
  - {type: BudgetExceeded, status: "True", message: "hourly cost 1.20 of its 3 namespaces (1.20 running, 0.00 in flight) of 1.00 (hourlyCost 1.00)"}`,
		"Degraded", "Over budget: hourly cost 1.20 of its 3 namespaces")
}

func TestCapacityBudgetHealth(t *testing.T) {
	const s = "health-capacitybudget.lua"
	check(t, s, "metadata: {generation: 1}\nspec: {}", "Progressing", "Waiting")
	check(t, s, `metadata: {generation: 2}
status: {observedGeneration: 1, conditions: [{type: Ready, status: "True"}]}`, "Progressing", "new spec")
	check(t, s, `metadata: {generation: 2}
status:
  observedGeneration: 2
  hourlyCost: "0.1312"
  hourlyLimit: "10.0000"
  conditions:
  - {type: Ready, status: "True"}
  - {type: BudgetExceeded, status: "False"}
  - {type: SpotShareOutOfRange, status: "True", message: "Spot share above the 4.0-vCPU on-demand base is 40.0%, bounds [60, 100]"}`,
		"Healthy", "Hourly cost 0.1312 of 10.0000; Spot share above")
	check(t, s, `metadata: {generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Ready, status: "True"}
  - {type: BudgetExceeded, status: "True", message: "hourly cost 7.20 of 5.00 (hourlyCost 5.00)"}`, "Degraded", "Over budget: hourly cost 7.20")
	check(t, s, `metadata: {generation: 1}
status: {observedGeneration: 1, conditions: [{type: Ready, status: "False", message: "evaluating: boom"}]}`, "Degraded", "boom")
}

func TestCapacityPolicyHealth(t *testing.T) {
	const s = "health-capacitypolicy.lua"
	check(t, s, "metadata: {generation: 1}", "Progressing", "compiled")
	check(t, s, `metadata: {generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Compiled, status: "False", message: "1 errors; first a.rego:5:1: unexpected eof"}
  - {type: Ready, status: "False"}`, "Degraded", "Does not compile: 1 errors; first a.rego:5:1")
	check(t, s, `metadata: {generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Compiled, status: "True"}
  - {type: TestsPassed, status: "False", message: "1 of 2 tests failed"}
  - {type: Ready, status: "False"}`, "Degraded", "Tests fail: 1 of 2")
	check(t, s, `metadata: {generation: 3}
status:
  observedGeneration: 3
  conditions:
  - {type: Compiled, status: "True"}
  - {type: TestsPassed, status: "True"}
  - {type: EvaluationFailed, status: "True", message: "4 evaluations failed"}
  - {type: Ready, status: "True"}`, "Healthy", "4 evaluations failed")
}

func TestCapacityExceptionHealth(t *testing.T) {
	const s = "health-capacityexception.lua"
	check(t, s, "metadata: {generation: 1}", "Progressing", "evaluated")
	check(t, s, `metadata: {generation: 2}
status: {observedGeneration: 1, conditions: [{type: Active, status: "True"}]}`, "Progressing", "evaluated")
	check(t, s, `metadata: {generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Active, status: "True", message: "applies to 2 namespaces until 2026-12-08T00:00:00Z"}
  - {type: Expired, status: "False"}`, "Healthy", "applies to 2 namespaces")
	check(t, s, `metadata: {generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Active, status: "False"}
  - {type: Expired, status: "True", message: "expired at 2026-12-08T00:00:00Z"}`, "Degraded", "Expired: expired at 2026-12-08")
}

func TestNodeClassHealth(t *testing.T) {
	const s = "health-nodeclass.lua"
	check(t, s, "metadata: {generation: 1}", "Progressing", "Waiting")
	check(t, s, `metadata: {generation: 1}
status: {conditions: [{type: Ready, status: "True", observedGeneration: 1}]}`, "Healthy", "")
	check(t, s, `metadata: {generation: 2}
status: {conditions: [{type: Ready, status: "True", observedGeneration: 1}]}`, "Progressing", "Waiting")
	check(t, s, `metadata: {generation: 1}
status: {conditions: [{type: Ready, status: "False", reason: CatalogUnreadable, observedGeneration: 1}]}`, "Degraded", "CatalogUnreadable")
}

func TestNodeOverlayHealth(t *testing.T) {
	const s = "health-nodeoverlay.lua"
	check(t, s, "metadata: {generation: 1}", "Healthy", "gate may be off")
	check(t, s, `metadata: {generation: 1}
status: {conditions: [{type: ValidationSucceeded, status: "True", observedGeneration: 1}]}`, "Healthy", "Applied")
	check(t, s, `metadata: {generation: 2}
status: {conditions: [{type: ValidationSucceeded, status: "True", observedGeneration: 1}]}`, "Progressing", "new spec")
	check(t, s, `metadata: {generation: 1}
status: {conditions: [{type: ValidationSucceeded, status: "False", reason: Conflict, message: "conflict with another overlay: sets the price of m5.large", observedGeneration: 1}]}`,
		"Degraded", "Not applied (Conflict): conflict with another overlay")
}

// The kustomization maps every script to ArgoCD's key for its kind.
func TestKustomizationNamesEveryScript(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(env.RepoRoot(), "config", "argocd", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"resource.customizations.health.policy.karpenter.sh_CapacityBudget=health-capacitybudget.lua",
		"resource.customizations.health.policy.karpenter.sh_ClusterCapacityBudget=health-capacitybudget.lua",
		"resource.customizations.health.policy.karpenter.sh_CapacityPolicy=health-capacitypolicy.lua",
		"resource.customizations.health.policy.karpenter.sh_CapacityException=health-capacityexception.lua",
		"resource.customizations.health.karpenter.sh_NodeOverlay=health-nodeoverlay.lua",
		"resource.customizations.health.karpenter.kwok.sh_KWOKNodeClass=health-nodeclass.lua",
		"resource.customizations.health.karpenter.k8s.aws_EC2NodeClass=health-nodeclass.lua",
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("kustomization.yaml lacks %s", want)
		}
	}
}
