package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/offline"
)

const repo = "../.."

func karpenterctl(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateSamplesPass(t *testing.T) {
	code, out, errOut := karpenterctl(t, "", "validate", "-f", filepath.Join(repo, "config/samples"))
	if code != exitOK {
		t.Fatalf("config/samples must be valid; exit %d\n%s%s", code, out, errOut)
	}
	// config/samples (4), its examples (5) and its aws stack (2).
	if !strings.Contains(out, "11 objects: 11 valid, 0 invalid") || !strings.Contains(out, "skipped") {
		t.Errorf("summary: %s", out)
	}
}

// Every problem of the broken manifests, by file, line and field. The lines are those of the
// fields in test/testdata/invalid.
func TestValidateBrokenManifests(t *testing.T) {
	code, out, errOut := karpenterctl(t, "", "validate", "-f", filepath.Join(repo, "test/testdata/invalid"))
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	want := []string{
		"legacy.yaml:14: NodePool/legacy-bad: spec.template.spec.kubelet:",
		"legacy.yaml:17: NodePool/legacy-bad: spec.disruption:",
		"nodeclasses.yaml:5: EC2NodeClass/both-identities: spec:",
		"nodeclasses.yaml:9: EC2NodeClass/both-identities: spec.amiSelectorTerms[0].alias:",
		"nodeclasses.yaml:20: KWOKNodeClass/relative: spec.catalog:",
		"nodepools.yaml:8: NodePool/weight-and-requirements: spec.weight:",
		"nodepools.yaml:15: NodePool/weight-and-requirements: spec.template.spec.requirements:",
		"nodepools.yaml:16: NodePool/weight-and-requirements: spec.template.spec.requirements[0].key:",
		"nodepools.yaml:46: NodePool/webhook-only: spec.template.spec.requirements[0].values: Unsupported value",
		"nodepools.yaml:51: NodePool/webhook-only: spec.disruption.budgets[0].schedule:",
		"nodepools.yaml:63: NodePool/typo: spec.template.spec.expireAfterr: Forbidden: unknown field",
		"policies.yaml:8: CapacityBudget/default: spec.limits.hourlyCost:",
		"policies.yaml:9: CapacityBudget/default: spec.spot:",
		"policies.yaml:25: CapacityPolicy/broken-rego: spec.modules[0].rego:",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, w := range want {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "test/testdata/invalid/"+w) }) {
			t.Errorf("missing problem %q in:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "8 objects: 0 valid, 8 invalid (14 problems); 1 documents of other kinds skipped") {
		t.Errorf("summary: %s", lines[len(lines)-1])
	}
}

func TestValidateOutputs(t *testing.T) {
	broken := filepath.Join(repo, "test/testdata/invalid/policies.yaml")
	code, out, _ := karpenterctl(t, "", "validate", "-f", broken, "-o", "json")
	var r offline.Report
	if code != exitInvalid || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("json: exit %d, output %s", code, out)
	}
	if r.Objects != 2 || r.Invalid != 2 || len(r.Problems) != 3 || r.Problems[0].Line != 8 || r.Problems[0].Field != "spec.limits.hourlyCost" {
		t.Errorf("json report: %+v", r)
	}
	code, out, _ = karpenterctl(t, "", "validate", "-f", broken, "-o", "github")
	if code != exitInvalid || !strings.HasPrefix(out, "::error file="+broken+",line=8::CapacityBudget/default: spec.limits.hourlyCost:") {
		t.Errorf("github: exit %d\n%s", code, out)
	}
}

func TestValidateStdinAndBadInput(t *testing.T) {
	doc := "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: a}\nspec: {launchDelay: soon}\n"
	code, out, _ := karpenterctl(t, doc, "validate", "-f", "-")
	if code != exitInvalid || !strings.Contains(out, "<stdin>:4: KWOKNodeClass/a: spec.launchDelay:") {
		t.Errorf("stdin: exit %d\n%s", code, out)
	}
	for name, tc := range map[string]struct {
		stdin string
		args  []string
		want  string
	}{
		"no files":        {args: []string{"validate"}, want: "give one or more -f PATH"},
		"unknown output":  {args: []string{"validate", "-f", "-", "-o", "xml"}, want: "-o must be text, json or github"},
		"missing file":    {args: []string{"validate", "-f", "does-not-exist.yaml"}, want: "does-not-exist.yaml"},
		"broken yaml":     {stdin: "a: b\n---\nkind: [unclosed\n", args: []string{"validate", "-f", "-"}, want: "<stdin>:3: not valid YAML"},
		"unknown command": {args: []string{"lint"}, want: `unknown command "lint"`},
		"convert to v2":   {args: []string{"convert", "-f", "-", "--to", "v2"}, want: "--to must be v1 or v1beta1"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := karpenterctl(t, tc.stdin, tc.args...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

func TestConvertKeepsOtherDocumentsAndRoundTrips(t *testing.T) {
	dir := t.TempDir()
	legacy, err := os.ReadFile(filepath.Join(repo, "config/samples/examples/nodepool-v1beta1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	other := "---\n# untouched\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: keep}  # flow style kept\n"
	file := filepath.Join(dir, "pools.yaml")
	if err := os.WriteFile(file, append(legacy, other...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := karpenterctl(t, "", "convert", "-f", file)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "apiVersion: karpenter.sh/v1\n") || !strings.Contains(out, "consolidationPolicy: WhenEmptyOrUnderutilized") ||
		!strings.HasSuffix(out, other) || !strings.Contains(errOut, "move these settings to its spec.kubelet") {
		t.Fatalf("converted:\n%s\nstderr: %s", out, errOut)
	}
	// In place, then back: the v1beta1 object is what it was.
	if code, _, errOut := karpenterctl(t, "", "convert", "-f", file, "--in-place"); code != exitOK {
		t.Fatal(errOut)
	}
	if code, out, _ := karpenterctl(t, "", "validate", "-f", file); code != exitOK {
		t.Fatalf("converted file must validate: %s", out)
	}
	code, back, _ := karpenterctl(t, "", "convert", "-f", file, "--to", "v1beta1")
	if code != exitOK {
		t.Fatal(back)
	}
	want, _ := offline.Parse("a", legacy)
	got, _ := offline.Parse("b", []byte(back))
	wj, _ := json.Marshal(want[0].Object)
	gj, _ := json.Marshal(got[0].Object)
	if string(wj) != string(gj) {
		t.Errorf("v1beta1 -> v1 -> v1beta1 changed the object:\nwant %s\ngot  %s", wj, gj)
	}
}

func TestConvertRefusesUnknownFields(t *testing.T) {
	doc := "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n      nodeClassRef: {name: a}\n      requirements: []\n      kubelett: {}\n"
	code, _, errOut := karpenterctl(t, doc, "convert", "-f", "-")
	if code != exitInvalid || !strings.Contains(errOut, "<stdin>:9: NodePool/a: spec.template.spec.kubelett: unknown field") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

// The spellings of the issue that reported it: `convert` there and back returns them as
// written, and the other version shows them too.
func TestConvertKeepsTheText(t *testing.T) {
	for name, tc := range map[string]struct{ doc, to, back string }{
		"v1 through v1beta1": {doc: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  disruption:
    budgets:
    - duration: 10m
      nodes: "0"
      schedule: 0 9 * * *
    consolidateAfter: 90s
  template:
    spec:
      nodeClassRef:
        group: karpenter.kwok.sh
        kind: KWOKNodeClass
        name: default
      requirements: []
      terminationGracePeriod: 48h
`, to: "v1beta1", back: "v1"},
		"v1beta1 through v1": {doc: `apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: general
spec:
  disruption:
    budgets:
    - duration: 8h
      nodes: "1"
      schedule: 0 0 * * *
    consolidationPolicy: WhenUnderutilized
  limits:
    cpu: "1000"
  template:
    spec:
      nodeClassRef:
        name: default
      requirements: []
`, to: "v1", back: "v1beta1"},
	} {
		t.Run(name, func(t *testing.T) {
			code, mid, errOut := karpenterctl(t, tc.doc, "convert", "-f", "-", "--to", tc.to)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, s := range []string{"duration: 10m\n", "duration: 8h\n", `cpu: "1000"`} {
				if strings.Contains(tc.doc, s) && !strings.Contains(mid, s) {
					t.Errorf("at %s %q was respelled:\n%s", tc.to, s, mid)
				}
			}
			code, back, errOut := karpenterctl(t, mid, "convert", "-f", "-", "--to", tc.back)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if back != tc.doc {
				t.Errorf("back at %s:\n%s\nwant:\n%s", tc.back, back, tc.doc)
			}
		})
	}
}

// An EC2NodeClass field the CRD accepts but launches do not use is a warning naming its file,
// line and field, as admission warns about it; the object stays valid and the exit code 0.
func TestValidateWarnsAboutFieldsNotActedOn(t *testing.T) {
	manifest := `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: pinned
spec:
  role: KarpenterNodeRole
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
  cpuOptions:
    nestedVirtualization: enabled
`
	code, out, errOut := karpenterctl(t, manifest, "validate", "-f", "-")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "warning: <stdin>:13: EC2NodeClass/pinned: spec.cpuOptions: accepted but not acted on yet: nested virtualization is not requested") ||
		!strings.Contains(out, "1 objects: 1 valid, 0 invalid (0 problems); 0 documents of other kinds skipped; 1 warnings") {
		t.Errorf("output:\n%s", out)
	}
	code, out, _ = karpenterctl(t, manifest, "validate", "-f", "-", "-o", "github")
	if code != exitOK || !strings.Contains(out, "::warning file=<stdin>,line=13::EC2NodeClass/pinned: spec.cpuOptions: accepted but not acted on yet") {
		t.Errorf("github: exit %d\n%s", code, out)
	}
}
