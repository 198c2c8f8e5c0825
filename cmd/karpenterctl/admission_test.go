package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
)

// maxCPUPolicy denies NodePools with a cpu limit over 500 at admission, naming its rule.
const maxCPUPolicy = `apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata:
  name: max-cpu
spec:
  enforcement: Deny
  modules:
  - name: max-cpu.rego
    rego: |
      package karpenter.admission

      deny contains {"msg": msg, "rule": "max-cpu"} if {
        input.kind == "NodePool"
        units.parse(input.object.spec.limits.cpu) > 500
        msg := sprintf("NodePool %s: cpu limit %s is over 500", [input.object.metadata.name, input.object.spec.limits.cpu])
      }
`

func nodePoolWithCPU(name, cpu string) string {
	return `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: ` + name + `
spec:
  limits:
    cpu: "` + cpu + `"
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`
}

// writeInto writes files under dir (writeFiles makes a new directory).
func writeInto(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A CapacityPolicy's admission rule refuses a NodePool offline as the webhook does: FILE:LINE:
// KIND/NAME: policy NAME: MESSAGE, exit 1; a NodePool within the rule passes.
func TestValidateRunsAdmissionRules(t *testing.T) {
	dir := t.TempDir()
	writeInto(t, dir, map[string]string{"policy.yaml": maxCPUPolicy, "big.yaml": "# a comment\n" + nodePoolWithCPU("big", "600"),
		"small.yaml": nodePoolWithCPU("small", "400")})
	p, big, small := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "big.yaml"), filepath.Join(dir, "small.yaml")
	code, out, errOut := karpenterctl(t, "", "validate", "-f", p, "-f", big)
	if code != exitInvalid || !strings.Contains(out, big+":1: NodePool/big: policy max-cpu: NodePool big: cpu limit 600 is over 500\n") ||
		!strings.Contains(out, "2 objects: 1 valid, 1 invalid (1 problems)") {
		t.Errorf("a NodePool over the limit: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := karpenterctl(t, "", "validate", "-f", p, "-f", small); code != exitOK || strings.Contains(out, "policy max-cpu:") {
		t.Errorf("a NodePool within the limit: exit %d\n%s", code, out)
	}
	// JSON names the policy and the rule.
	_, js, _ := karpenterctl(t, "", "validate", "-f", p, "-f", big, "-o", "json")
	var r offline.Report
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 1 || r.Problems[0].Policy != "max-cpu" || r.Problems[0].Rule != "max-cpu" || r.Problems[0].Field != "policy max-cpu" {
		t.Errorf("json problems %+v", r.Problems)
	}
}

// --policies brings the cluster's policies: a file, a directory, standard input, or git:REF.
func TestValidatePoliciesFromEverySource(t *testing.T) {
	dir := t.TempDir()
	writeInto(t, dir, map[string]string{"cluster/policy.yaml": maxCPUPolicy, "big.yaml": nodePoolWithCPU("big", "600")})
	big := filepath.Join(dir, "big.yaml")
	for name, args := range map[string][]string{
		"file":      {"--policies", filepath.Join(dir, "cluster", "policy.yaml")},
		"directory": {"--policies", filepath.Join(dir, "cluster")},
		"stdin":     {"--policies", "-"},
	} {
		stdin := ""
		if name == "stdin" {
			stdin = maxCPUPolicy
		}
		code, out, errOut := karpenterctl(t, stdin, append([]string{"validate", "-f", big}, args...)...)
		if code != exitInvalid || !strings.Contains(out, "policy max-cpu: NodePool big: cpu limit 600 is over 500") ||
			!strings.Contains(out, "1 objects: 0 valid, 1 invalid") {
			t.Errorf("--policies from a %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	git := gitIn(t, dir)
	git("init", "-q", "-b", "main")
	git("add", "cluster")
	git("commit", "-q", "-m", "policies")
	t.Chdir(dir)
	code, out, errOut := karpenterctl(t, "", "validate", "-f", "big.yaml", "--policies", "git:main:cluster")
	if code != exitInvalid || !strings.Contains(out, "big.yaml:1: NodePool/big: policy max-cpu:") {
		t.Errorf("--policies git:main:cluster: exit %d\n%s%s", code, out, errOut)
	}
	// A policy of the cluster's that does not compile is bad input, named at its line.
	writeInto(t, dir, map[string]string{"broken.yaml": strings.Replace(maxCPUPolicy, "deny contains", "deny contains contains", 1)})
	if code, _, errOut := karpenterctl(t, "", "validate", "-f", "big.yaml", "--policies", "broken.yaml"); code != exitUsage ||
		!strings.Contains(errOut, "broken.yaml:1: CapacityPolicy max-cpu: max-cpu.rego:") {
		t.Errorf("a broken --policies: exit %d: %s", code, errOut)
	}
}

// scopedEnforcement: a policy that warns at ci and denies at admission makes validate warn
// and exit 0.
func TestValidateTakesTheCIAction(t *testing.T) {
	dir := t.TempDir()
	scoped := strings.Replace(maxCPUPolicy, "  enforcement: Deny\n", "  enforcement: Deny\n  scopedEnforcement:\n  - {points: [ci], action: Warn}\n  - {points: [admission], action: Deny}\n", 1)
	writeInto(t, dir, map[string]string{"policy.yaml": scoped, "big.yaml": nodePoolWithCPU("big", "600")})
	code, out, _ := karpenterctl(t, "", "validate", "-f", filepath.Join(dir, "policy.yaml"), "-f", filepath.Join(dir, "big.yaml"))
	if code != exitOK || !strings.Contains(out, "warning: "+filepath.Join(dir, "big.yaml")+":1: NodePool/big: policy max-cpu: NodePool big: cpu limit 600 is over 500") {
		t.Errorf("ci: Warn: exit %d\n%s", code, out)
	}
	// In DryRun at ci, the result is a warning that says so.
	dry := strings.Replace(scoped, "action: Warn", "action: DryRun", 1)
	writeInto(t, dir, map[string]string{"policy.yaml": dry})
	if code, out, _ := karpenterctl(t, "", "validate", "-f", filepath.Join(dir, "policy.yaml"), "-f", filepath.Join(dir, "big.yaml")); code != exitOK ||
		!strings.Contains(out, "policy max-cpu: dry run, would deny: NodePool big") {
		t.Errorf("ci: DryRun: exit %d\n%s", code, out)
	}
}

// What only a cluster knows is said to be unknown, and a rule that reads it is undecided, not
// passed; given the input, it is decided.
func TestValidateSaysWhatItCannotDecide(t *testing.T) {
	dir := t.TempDir()
	prodOnly := `apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata: {name: prod-budgets}
spec:
  modules:
  - name: prod.rego
    rego: |
      package karpenter.admission

      deny contains "a prod namespace's budget needs an hourlyCost" if {
        input.kind == "CapacityBudget"
        input.namespace.labels.tier == "prod"
        not input.object.spec.limits.hourlyCost
      }
`
	budget := `apiVersion: policy.karpenter.sh/v1
kind: CapacityBudget
metadata: {name: default, namespace: shop}
spec:
  limits: {monthlyCost: "500"}
`
	writeInto(t, dir, map[string]string{"policy.yaml": prodOnly, "budget.yaml": budget,
		"namespaces.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {tier: prod}}\n"})
	args := []string{"validate", "-f", filepath.Join(dir, "policy.yaml"), "-f", filepath.Join(dir, "budget.yaml")}
	code, out, _ := karpenterctl(t, "", args...)
	if code != exitOK || !regexp.MustCompile(`(?m)^undecided: .*budget.yaml:1: CapacityBudget/default: policy prod-budgets: its deny rules cannot be decided without input.namespace.labels: namespace labels \(give --namespaces\)$`).MatchString(out) ||
		!strings.Contains(out, "not known offline: namespace labels (give --namespaces)") || !strings.Contains(out, "policy rules undecided offline") {
		t.Errorf("labels unknown: exit %d\n%s", code, out)
	}
	code, out, _ = karpenterctl(t, "", append(args, "--namespaces", filepath.Join(dir, "namespaces.yaml"))...)
	if code != exitInvalid || !strings.Contains(out, "policy prod-budgets: a prod namespace's budget needs an hourlyCost") || strings.Contains(out, "policy prod-budgets: its deny") {
		t.Errorf("labels known: exit %d\n%s", code, out)
	}
}

// The namespace's usage comes from --nodes: the built-in rule that warns of a budget below
// what the namespace runs at is decided with it.
func TestValidateReadsUsageFromNodes(t *testing.T) {
	dir := t.TempDir()
	budget := "apiVersion: policy.karpenter.sh/v1\nkind: CapacityBudget\nmetadata: {name: default, namespace: shop}\nspec:\n  limits: {hourlyCost: \"0.01\"}\n"
	nodes := `apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: us-east-1a}
status:
  allocatable: {cpu: "2", memory: 8Gi, pods: "29"}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop}
spec:
  nodeName: n1
  containers:
  - name: c
    image: x
    resources: {requests: {cpu: "1", memory: 4Gi}}
`
	writeInto(t, dir, map[string]string{"budget.yaml": budget, "nodes.yaml": nodes})
	args := []string{"validate", "-f", filepath.Join(dir, "budget.yaml"), "--now", planNow}
	_, out, _ := karpenterctl(t, "", args...)
	if !strings.Contains(out, "policy CapacityBudget shop/default: its warn rules cannot be decided without input.usage: what the namespace runs at (give --nodes)") ||
		!strings.Contains(out, "what the namespace runs at is not known here") {
		t.Errorf("usage unknown:\n%s", out)
	}
	code, out, _ := karpenterctl(t, "", append(args, "--nodes", filepath.Join(dir, "nodes.yaml"))...)
	if code != exitOK || !strings.Contains(out, "hourly limit 0.01 (hourlyCost 0.01) is below the current run-rate 0.10") ||
		!strings.Contains(out, "the namespace runs at $0.05/hour with $0.00/hour in flight") || strings.Contains(out, "undecided: ") {
		t.Errorf("usage from --nodes: exit %d\n%s", code, out)
	}
}

// A CapacityException is refused when it has expired or expires further out than
// --max-exception-duration, at --now.
func TestValidateChecksExceptionsAgainstNow(t *testing.T) {
	dir := t.TempDir()
	ex := func(expires string) string {
		return `apiVersion: policy.karpenter.sh/v1
kind: CapacityException
metadata: {name: launch-week}
spec:
  namespaces: [shop]
  exempt: [{kind: CapacityBudget, name: default, rules: [hourlyCost]}]
  extraHourlyCost: "0.50"
  expiresAt: "` + expires + `"
  reason: launch week traffic
`
	}
	writeInto(t, dir, map[string]string{"past.yaml": ex("2026-11-15T00:00:00Z"), "year.yaml": ex("2027-11-16T12:00:00Z"), "week.yaml": ex("2026-11-23T12:00:00Z")})
	for file, want := range map[string]string{
		"past.yaml": "spec.expiresAt: Invalid value: \"2026-11-15T00:00:00Z\": has already passed",
		"year.yaml": "spec.expiresAt: Invalid value: \"2027-11-16T12:00:00Z\": is 8760h0m0s from now, further out than the 720h0m0s",
	} {
		code, out, _ := karpenterctl(t, "", "validate", "-f", filepath.Join(dir, file), "--now", planNow)
		if code != exitInvalid || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d\n%s", file, code, out)
		}
	}
	code, out, _ := karpenterctl(t, "", "validate", "-f", filepath.Join(dir, "week.yaml"), "--now", planNow)
	if code != exitOK || !strings.Contains(out, "CapacityException launch-week exempts the namespaces") && !strings.Contains(out, "CapacityException launch-week exempts 1 namespaces") {
		t.Errorf("a week: exit %d\n%s", code, out)
	}
	if code, out, _ := karpenterctl(t, "", "validate", "-f", filepath.Join(dir, "week.yaml"), "--now", planNow, "--max-exception-duration", "72h"); code != exitInvalid ||
		!strings.Contains(out, "further out than the 72h0m0s") {
		t.Errorf("a week under --max-exception-duration 72h: exit %d\n%s", code, out)
	}
}

// The CI gates: --max-increase as an amount or a share of the base, --fail-on-blocked,
// --fail-on-warn, each failing with exit 3 and named in every format; -o junit is JUnit XML
// with a failure per failed gate.
func TestPlanGates(t *testing.T) {
	dir := t.TempDir()
	workload := planWorkload(t)
	// The base cuts team-a's budget; the head restores it: more of its pods run, the
	// run-rate rises.
	head, base := planSides(t, dir, quarterTeamA)
	plan := func(args ...string) (int, *planReport, string) {
		t.Helper()
		code, out, errOut := karpenterctl(t, "", append([]string{"plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "-o", "json"}, args...)...)
		r := &planReport{}
		if err := json.Unmarshal([]byte(out), r); err != nil {
			t.Fatalf("%v: %s%s", err, out, errOut)
		}
		return code, r, out
	}
	code, r, _ := plan()
	inc := r.Delta.PricePerHour
	if code != exitOK || inc <= 0 || len(r.Gates) != 0 {
		t.Fatalf("no gates: exit %d, increase %.4f, gates %+v", code, inc, r.Gates)
	}
	pct := inc / r.Base.Totals.PricePerHour * 100
	for _, tc := range []struct {
		limit string
		want  int
	}{
		{strconvF(pct*1.1) + "%", exitOK}, {strconvF(pct*0.9) + "%", exitGate},
		{strconvF(inc * 1.1), exitOK}, {strconvF(inc * 0.9), exitGate},
	} {
		code, r, out := plan("--max-increase", tc.limit)
		if code != tc.want || len(r.Gates) != 1 || r.Gates[0].Name != "max-increase" || r.Gates[0].Passed != (tc.want == exitOK) {
			t.Errorf("--max-increase %s (increase %.4f, %.1f%%): exit %d, want %d\n%s", tc.limit, inc, pct, code, tc.want, out)
		}
	}
	// The reverse change blocks team-a's pods: --fail-on-blocked fails, and a fall in $/hour
	// is no saving in the headline.
	code, out, _ := karpenterctl(t, "", "plan", "--base", head, "--head", base, "--workload", workload, "--now", planNow, "--fail-on-blocked", "--max-increase", "0")
	if code != exitGate || !strings.Contains(out, "gate fail-on-blocked failed: ") || !strings.Contains(out, "gate max-increase passed") ||
		!regexp.MustCompile(`^\d+ pods would stay pending that the base places; .* not a saving`).MatchString(out) {
		t.Errorf("--fail-on-blocked: exit %d\n%s", code, out)
	}
	code, gh, _ := karpenterctl(t, "", "plan", "--base", head, "--head", base, "--workload", workload, "--now", planNow, "--fail-on-blocked", "-o", "github")
	if code != exitGate || !strings.Contains(gh, "::error title=gate fail-on-blocked::gate fail-on-blocked failed: ") {
		t.Errorf("github: exit %d\n%s", code, gh)
	}
	code, md, _ := karpenterctl(t, "", "plan", "--base", head, "--head", base, "--workload", workload, "--now", planNow, "--fail-on-blocked", "-o", "markdown")
	if code != exitGate || !strings.Contains(md, "| `fail-on-blocked` | **failed** |") {
		t.Errorf("markdown: exit %d\n%s", code, md)
	}
	code, x, _ := karpenterctl(t, "", "plan", "--base", head, "--head", base, "--workload", workload, "--now", planNow, "--fail-on-blocked", "--max-increase", "10%", "-o", "junit")
	var suites struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(x), &suites); err != nil || code != exitGate || len(suites.Suites) != 1 {
		t.Fatalf("junit: exit %d, %v\n%s", code, err, x)
	}
	s := suites.Suites[0]
	failedCases := map[string]bool{}
	for _, c := range s.Cases {
		failedCases[c.Name] = c.Failure != nil
	}
	if s.Tests != 3 || s.Failures != 1 || !failedCases["gate fail-on-blocked"] || failedCases["gate max-increase"] || failedCases["the head is valid"] {
		t.Errorf("junit: %+v\n%s", s, x)
	}
	// --fail-on-warn: a policy that warns about the head's NodePool.
	warn := `apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata: {name: limits}
spec:
  modules:
  - name: limits.rego
    rego: |
      package karpenter.admission

      warn contains "NodePools should have a cpu limit" if {
        input.kind == "NodePool"
        not input.object.spec.limits.cpu
      }
`
	writeInto(t, head, map[string]string{"warn.yaml": warn})
	code, out, _ = karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "--fail-on-warn")
	if code != exitGate || !strings.Contains(out, "gate fail-on-warn failed: ") || !strings.Contains(out, "policy limits: NodePools should have a cpu limit") {
		t.Errorf("--fail-on-warn: exit %d\n%s", code, out)
	}
	// An invalid head exits 1 whatever the gates, and its JUnit names the object.
	writeInto(t, head, map[string]string{"bad.yaml": nodePoolWithCPU("bad", "x")})
	code, x, _ = karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", workload, "--now", planNow, "--fail-on-warn", "-o", "junit")
	if code != exitInvalid || !strings.Contains(x, `<testcase name="NodePool/bad (`) || !strings.Contains(x, `<skipped message="the head is invalid`) {
		t.Errorf("invalid head: exit %d\n%s", code, x)
	}
}

func strconvF(f float64) string { return strings.TrimRight(strings.TrimRight(formatF(f), "0"), ".") }

func formatF(f float64) string { b, _ := json.Marshal(f); return string(b) }
