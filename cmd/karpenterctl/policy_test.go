package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const familyRule = `package karpenter.provisioning

deny contains msg if {
	some family in input.instanceFamilies
	some pattern in data.parameters.denied
	glob.match(pattern, [], family)
	msg := sprintf("family %s denied", [family])
}
`

const familyTests = `package karpenter.provisioning_test

import data.karpenter.provisioning

test_denies if {
	provisioning.deny["family p4d denied"] with input as {"instanceFamilies": ["p4d"]}
}

test_allows if {
	count(provisioning.deny) == 0 with input as {"instanceFamilies": ["m5"]}
}

test_wrong_on_purpose if {
	count(provisioning.deny) == 0 with input as {"instanceFamilies": ["g5"]}
}
`

func TestPolicyTestSamplesPass(t *testing.T) {
	code, out, errOut := karpenterctl(t, "", "policy", "test", filepath.Join(repo, "config/samples"), "-v")
	if code != exitOK {
		t.Fatalf("the sample CapacityPolicy's tests must pass; exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "PASS: no-gpu-in-dev/data.karpenter.provisioning_test.test_denies_gpu_families") || !strings.Contains(out, "PASS: 8/8") || !strings.Contains(out, "PASS: no-prod-disruption-in-office-hours/data.karpenter.disruption_test.test_denies_across_midnight") || !strings.Contains(out, "PASS: no-prod-disruption-in-office-hours/data.karpenter.disruption_test.test_denies_during_office_hours") {
		t.Errorf("output:\n%s", out)
	}
}

// .rego files are compiled together and get --parameters as data.parameters; a failing test
// is reported with its file and line, and fails the command.
func TestPolicyTestRegoFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"rules/family.rego":      familyRule,
		"rules/family_test.rego": familyTests,
		"params.yaml":            "denied: [\"p*\", \"g*\"]\n",
	})
	code, out, errOut := karpenterctl(t, "", "policy", "test", filepath.Join(dir, "rules"), "--parameters", filepath.Join(dir, "params.yaml"), "-o", "json")
	if code != exitInvalid {
		t.Fatalf("a failing test must exit %d, got %d\n%s%s", exitInvalid, code, out, errOut)
	}
	var report policyReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("json output: %v\n%s", err, out)
	}
	if report.Passed != 2 || report.Failed != 1 || len(report.Errors) != 0 {
		t.Fatalf("want 2 passed, 1 failed, no errors; got %+v", report)
	}
	for _, tc := range report.Tests {
		if tc.Name == "data.karpenter.provisioning_test.test_wrong_on_purpose" {
			if tc.Passed || tc.File != filepath.Join(dir, "rules/family_test.rego") || tc.Line != 13 {
				t.Errorf("failing test reported as %+v; want file family_test.rego, line 13", tc)
			}
		}
	}

	// Without the parameters nothing is denied: test_denies fails instead.
	code, out, _ = karpenterctl(t, "", "policy", "test", filepath.Join(dir, "rules"))
	if code != exitInvalid || !strings.Contains(out, "FAIL: data.karpenter.provisioning_test.test_denies") || !strings.Contains(out, "PASS: 2/3") {
		t.Errorf("without parameters: exit %d\n%s", code, out)
	}
}

// A CapacityPolicy's failing test and compile errors point at the manifest line inside the
// block scalar.
func TestPolicyTestManifestLines(t *testing.T) {
	indent := func(s string) string {
		return "      " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n      ") + "\n"
	}
	manifest := `apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata:
  name: families
spec:
  parameters:
    denied: ["p*", "g*"]
  modules:
  - name: family.rego
    rego: |
` + indent(familyRule) + `  - name: family_test.rego
    rego: |
` + indent(familyTests)
	dir := writeFiles(t, map[string]string{"policy.yaml": manifest})
	code, out, _ := karpenterctl(t, "", "policy", "test", filepath.Join(dir, "policy.yaml"))
	if code != exitInvalid {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// familyRule is lines 11-18; the test module's Rego starts at line 21, so its line 13 is
	// file line 33.
	want := "FAIL: families/data.karpenter.provisioning_test.test_wrong_on_purpose (" + filepath.Join(dir, "policy.yaml") + ":33)"
	if !strings.Contains(out, want) {
		t.Errorf("want %q in\n%s", want, out)
	}
	if strings.Contains(out, "test_denies (") {
		t.Errorf("test_denies must pass with spec.parameters:\n%s", out)
	}

	code, out, _ = karpenterctl(t, "", "policy", "test", filepath.Join(repo, "test/testdata/invalid/policies.yaml"))
	if code != exitInvalid || !strings.Contains(out, "policies.yaml:25:1: CapacityPolicy broken-rego: rules.rego: unexpected } token") {
		t.Errorf("compile error: exit %d\n%s", code, out)
	}
}

func TestPolicyTestBadUsage(t *testing.T) {
	dir := writeFiles(t, map[string]string{"only.rego": familyRule, "params.json": "[1, 2]"})
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"policy"}, exitUsage, "the only subcommand is test"},
		{[]string{"policy", "test"}, exitUsage, "give one or more PATH"},
		{[]string{"policy", "test", filepath.Join(dir, "missing")}, exitUsage, "no such file"},
		{[]string{"policy", "test", dir, "-o", "yaml"}, exitUsage, "-o must be text, json or junit"},
		{[]string{"policy", "test", dir, "--parameters", filepath.Join(dir, "params.json")}, exitUsage, "params.json"},
		{[]string{"policy", "test", filepath.Join(dir, "only.rego")}, exitInvalid, "no test_ rules found"},
	}
	for _, c := range cases {
		code, out, errOut := karpenterctl(t, "", c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s%s", c.args, code, c.code, c.want, out, errOut)
		}
	}
}

// A directory of a GitOps repository holds YAML that is no manifest (Helm templates,
// kustomize patches): it is skipped, unless it mentions CapacityPolicy.
func TestPolicyTestDirectorySkipsNonManifests(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join(repo, "config/samples/examples/capacitypolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := writeFiles(t, map[string]string{
		"policies/no-gpu.yaml":            string(sample),
		"chart/templates/deployment.yaml": "name: {{ .Values.name }}\n",
		"kustomize/patch.yaml":            "- op: add\n  path: /spec/x\n  value: 1\n",
	})
	code, out, errOut := karpenterctl(t, "", "policy", "test", dir)
	if code != exitOK || !strings.Contains(out, "PASS: 2/2") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	broken := filepath.Join(dir, "policies/broken.yaml")
	if err := os.WriteFile(broken, []byte("kind: CapacityPolicy\nspec: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = karpenterctl(t, "", "policy", "test", dir)
	if code != exitUsage || !strings.Contains(errOut, "broken.yaml") {
		t.Errorf("a CapacityPolicy file that does not parse must be an error naming it; exit %d\n%s%s", code, out, errOut)
	}
}

// Rego that reaches the network is refused by `policy test` and `validate` alike, with the
// file's line and the builtin named: the same verdict as admission.
func TestPolicySandboxSameVerdict(t *testing.T) {
	manifest := `apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata:
  name: fetcher
spec:
  modules:
  - name: fetch.rego
    rego: |
      package karpenter.provisioning

      deny contains msg if {
        r := http.send({"method": "get", "url": "http://127.0.0.1:9/"})
        msg := r.body
      }
`
	dir := writeFiles(t, map[string]string{"policy.yaml": manifest})
	file := filepath.Join(dir, "policy.yaml")
	for _, args := range [][]string{{"policy", "test", file}, {"validate", "-f", file}} {
		code, out, errOut := karpenterctl(t, "", args...)
		if code != exitInvalid || !strings.Contains(out+errOut, "policy.yaml:12:") || !strings.Contains(out+errOut, "builtin http.send is not allowed") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

// --coverage says how much of each policy's rules its tests evaluate and which manifest lines
// they leave out; -o junit is JUnit XML with a case per test.
func TestPolicyTestCoverageAndJUnit(t *testing.T) {
	manifest := `apiVersion: policy.karpenter.sh/v1
kind: CapacityPolicy
metadata:
  name: max-cpu
spec:
  modules:
  - name: max-cpu.rego
    rego: |
      package karpenter.admission

      deny contains "over" if {
        input.kind == "NodePool"
        units.parse(input.object.spec.limits.cpu) > 500
      }

      warn contains "no limit" if {
        input.kind == "NodePool"
        not input.object.spec.limits.cpu
      }
  - name: max-cpu_test.rego
    rego: |
      package karpenter.admission_test

      import data.karpenter.admission

      test_over if admission.deny["over"] with input as {"kind": "NodePool", "object": {"spec": {"limits": {"cpu": "600"}}}}

      test_wrong if admission.deny["under"] with input as {"kind": "NodePool", "object": {"spec": {"limits": {"cpu": "600"}}}}
`
	dir := writeFiles(t, map[string]string{"p.yaml": manifest})
	p := filepath.Join(dir, "p.yaml")
	code, out, _ := karpenterctl(t, "", "policy", "test", p, "--coverage", "-o", "json")
	var r policyReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != exitInvalid {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	// The deny rule (lines 11-14 of the manifest) is evaluated; the warn rule (16-19) is not.
	if len(r.Coverage) != 1 || r.Coverage[0].Policy != "max-cpu" || r.Coverage[0].NotCoveredLines != 3 ||
		strings.Join(r.Coverage[0].NotCovered, " ") != p+":16 "+p+":17 "+p+":18" {
		t.Errorf("coverage %+v", r.Coverage)
	}
	_, text, _ := karpenterctl(t, "", "policy", "test", p, "--coverage")
	if !strings.Contains(text, "COVERAGE: max-cpu 50.0% (3 of 6 lines); not covered: "+p+":16, ") {
		t.Errorf("text:\n%s", text)
	}
	code, x, _ := karpenterctl(t, "", "policy", "test", p, "-o", "junit")
	var suites struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(x), &suites); err != nil || code != exitInvalid || len(suites.Suites) != 1 ||
		suites.Suites[0].Tests != 2 || suites.Suites[0].Failures != 1 {
		t.Errorf("junit: exit %d, %v, %+v\n%s", code, err, suites, x)
	}
}
