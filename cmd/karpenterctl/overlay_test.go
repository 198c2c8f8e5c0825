package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
)

// Two on-demand types of the embedded catalog: c6a.large at $0.0765/h, m5.large at $0.096/h.
const overlayPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.large, m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
`

const overlayWorkload = `apiVersion: v1
kind: Pod
metadata: {name: app, namespace: default}
spec:
  containers:
  - name: app
    image: app
    resources: {requests: {cpu: "1", memory: 1Gi}}
`

// thirtyOff takes 30% off m5.large, which then costs $0.0672/h, less than c6a.large.
const thirtyOff = `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: savings-plan}
spec:
  weight: 10
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
  priceAdjustment: "-30%"
`

func simulateOne(t *testing.T, nodePools ...string) simulate.NodeClaim {
	t.Helper()
	args := []string{"simulate", "--workload", "", "-o", "json"}
	files := map[string]string{"workload.yaml": overlayWorkload}
	for i, text := range nodePools {
		name := filepath.Join("in", string(rune('a'+i))+".yaml")
		files[name] = text
	}
	dir := writeFiles(t, files)
	args[2] = filepath.Join(dir, "workload.yaml")
	args = append(args, "--nodepools", filepath.Join(dir, "in"))
	code, out, errOut := karpenterctl(t, "", args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := &simulate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil || len(r.NodeClaims) != 1 {
		t.Fatalf("want one NodeClaim: %v\n%s", err, out)
	}
	return r.NodeClaims[0]
}

func TestSimulateAppliesNodeOverlays(t *testing.T) {
	if c := simulateOne(t, overlayPool); c.InstanceType != "c6a.large" || math.Abs(c.PricePerHour-0.0765) > 1e-6 {
		t.Fatalf("without an overlay: %s at %v, want c6a.large at 0.0765", c.InstanceType, c.PricePerHour)
	}
	if c := simulateOne(t, overlayPool, thirtyOff); c.InstanceType != "m5.large" || math.Abs(c.PricePerHour-0.0672) > 1e-6 {
		t.Errorf("with m5.large 30%% off: %s at %v, want m5.large at 0.0672", c.InstanceType, c.PricePerHour)
	}
	// A higher weight wins the offering: m5.large is priced at $0.50/h, c6a.large is chosen.
	expensive := strings.NewReplacer("savings-plan", "list-price", "weight: 10", "weight: 20", `priceAdjustment: "-30%"`, `price: "0.5"`).Replace(thirtyOff)
	if c := simulateOne(t, overlayPool, thirtyOff, expensive); c.InstanceType != "c6a.large" {
		t.Errorf("the weight-20 overlay should win m5.large's price: got %s at %v", c.InstanceType, c.PricePerHour)
	}
}

func TestPlanReadsNodeOverlays(t *testing.T) {
	base := writeFiles(t, map[string]string{"nodepools.yaml": overlayPool})
	head := writeFiles(t, map[string]string{"nodepools.yaml": overlayPool, "overlays.yaml": thirtyOff})
	workload := writeFiles(t, map[string]string{"w.yaml": overlayWorkload})
	code, out, errOut := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", filepath.Join(workload, "w.yaml"), "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var r planReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Head.NodeClaims) != 1 || r.Head.NodeClaims[0].InstanceType != "m5.large" || len(r.Base.NodeClaims) != 1 || r.Base.NodeClaims[0].InstanceType != "c6a.large" {
		t.Fatalf("base %+v, head %+v", r.Base.NodeClaims, r.Head.NodeClaims)
	}
	if math.Abs(r.Delta.PricePerHour-(0.0672-0.0765)) > 1e-6 {
		t.Errorf("the overlay saves $0.0093/h: delta %v", r.Delta.PricePerHour)
	}
}

func TestValidateRefusesAnInvalidNodeOverlay(t *testing.T) {
	dir := writeFiles(t, map[string]string{"o.yaml": strings.Replace(thirtyOff, `priceAdjustment: "-30%"`, "priceAdjustment: \"-30%\"\n  price: \"1\"\n  capacity: {cpu: \"4\"}", 1)})
	code, out, _ := karpenterctl(t, "", "validate", "-f", filepath.Join(dir, "o.yaml"))
	if code != exitInvalid || !strings.Contains(out, "o.yaml:4: NodeOverlay/savings-plan: spec: Invalid value: cannot set both 'price' and 'priceAdjustment'") ||
		!strings.Contains(out, "spec.capacity: Invalid value: capacity may add extended resources only") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
