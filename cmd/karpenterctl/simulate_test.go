package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
)

var workloads = filepath.Join(repo, "test", "workloads")

func simulateJSON(t *testing.T, extra ...string) *simulate.Report {
	t.Helper()
	args := append([]string{"simulate", "--nodepools", filepath.Join(workloads, "nodepools.yaml"), "--workload", filepath.Join(workloads, "apps.yaml"),
		"--nodes", filepath.Join(workloads, "nodes.yaml"), "-o", "json"}, extra...)
	code, out, errOut := karpenterctl(t, "", args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := &simulate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatalf("output is not the documented JSON: %v\n%s", err, out)
	}
	return r
}

func TestSimulateWorkloads(t *testing.T) {
	r := simulateJSON(t)
	where := map[string]simulate.NodeClaim{}
	var placed []string
	sum := 0.0
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			where[p] = c
			placed = append(placed, p)
		}
		sum += c.PricePerHour
		if len(c.InstanceTypes) == 0 || c.InstanceTypes[0] != c.InstanceType {
			t.Errorf("the chosen type must be the first (cheapest) of the list: %+v", c)
		}
	}
	// Controllers expand to <namespace>/<name>-<index>; a Job to its parallelism.
	for _, p := range []string{"analytics/report-0", "analytics/report-3", "shop/db-0", "shop/db-2", "ml/train"} {
		if _, ok := where[p]; !ok {
			t.Errorf("%s is not on a new NodeClaim; placed: %v", p, placed)
		}
	}
	if _, ok := where["analytics/report-4"]; ok {
		t.Error("a Job with parallelism 4 runs 4 pods at once")
	}
	for _, p := range []string{"analytics/report-0", "analytics/report-1"} {
		if c := where[p]; c.NodePool != "batch-spot" || c.CapacityType != "spot" {
			t.Errorf("%s: batch pods go to the heavier Spot NodePool, got %s/%s", p, c.NodePool, c.CapacityType)
		}
	}
	if c := where["ml/train"]; c.NodePool != "gpu" || !strings.HasPrefix(c.InstanceType, "g") && !strings.HasPrefix(c.InstanceType, "p") {
		t.Errorf("the GPU pod needs the (v1beta1) gpu NodePool and a GPU type, got %+v", c)
	}
	db := map[string]bool{}
	for _, p := range []string{"shop/db-0", "shop/db-1", "shop/db-2"} {
		db[where[p].Zone+where[p].InstanceType+strings.Join(where[p].Pods, ",")] = true
	}
	if len(db) != 3 {
		t.Error("db pods have hostname anti-affinity: three different NodeClaims")
	}
	if len(r.ExistingNodes) != 1 || r.ExistingNodes[0].Name != "ip-10-0-1-17" || len(r.ExistingNodes[0].Pods) != 2 {
		t.Errorf("the existing node has room for two web pods (api-0 uses 800m of 1930m), got %+v", r.ExistingNodes)
	}
	zones := map[string]int{}
	for i := range 6 {
		p := "shop/web-" + string(rune('0'+i))
		if c, ok := where[p]; ok {
			zones[c.Zone]++
		} else {
			zones["us-east-1a"]++ // on the existing node
		}
	}
	for z, n := range zones {
		if n != 2 {
			t.Errorf("web spreads 2 per zone, zone %s has %d (%v)", z, n, zones)
		}
	}
	if len(r.Unschedulable) != 1 || r.Unschedulable[0].Pod != "ml/giant" || !strings.Contains(r.Unschedulable[0].Reason, "nodepool general: no instance type fits cpu=500") ||
		!strings.Contains(r.Unschedulable[0].Reason, "nodepool gpu: taint nvidia.com/gpu:NoSchedule not tolerated") {
		t.Errorf("unschedulable: %+v", r.Unschedulable)
	}
	if math.Abs(sum-r.Totals.PricePerHour) > 1e-3 || r.Totals.Nodes != len(r.NodeClaims) || r.Totals.LowerBoundPerHour <= 0 || r.Totals.LowerBoundPerHour > r.Totals.PricePerHour {
		t.Errorf("totals do not add up: %+v (sum %.4f)", r.Totals, sum)
	}
	// The log-agent DaemonSet is overhead on every node it tolerates (all of them here).
	for _, c := range r.NodeClaims {
		if c.NodePool == "gpu" && c.CPU != "2100m" {
			t.Errorf("gpu node requests %s, want the pod's 2 cpu plus the DaemonSet's 100m", c.CPU)
		}
	}
}

func TestSimulateIsDeterministicAndReadsCatalogs(t *testing.T) {
	a, _ := json.Marshal(simulateJSON(t))
	b, _ := json.Marshal(simulateJSON(t))
	if string(a) != string(b) {
		t.Fatal("two runs on the same input differ")
	}
	ec2 := filepath.Join(repo, "testdata", "aws-instance-types.json")
	r := simulateJSON(t, "--instance-types", ec2)
	if len(r.NodeClaims) == 0 || slices.ContainsFunc(r.NodeClaims, func(c simulate.NodeClaim) bool { return c.PricePerHour <= 0 }) {
		t.Fatalf("with the EC2 catalog: %+v", r.NodeClaims)
	}
}

func TestSimulateOutputsAndErrors(t *testing.T) {
	base := []string{"simulate", "--nodepools", filepath.Join(workloads, "nodepools.yaml"), "--workload", filepath.Join(workloads, "apps.yaml")}
	_, table, _ := karpenterctl(t, "", base...)
	if !strings.Contains(table, "NODEPOOL") || !strings.Contains(table, "unschedulable ml/giant:") || !strings.Contains(table, "total: ") {
		t.Errorf("table:\n%s", table)
	}
	_, md, _ := karpenterctl(t, "", append(base, "-o", "markdown")...)
	if !strings.Contains(md, "| NodePool | instance type |") || !strings.Contains(md, "- `ml/giant`:") {
		t.Errorf("markdown:\n%s", md)
	}
	for name, tc := range map[string]struct {
		args  []string
		stdin string
		want  string
	}{
		"no workload":      {args: []string{"simulate", "--nodepools", filepath.Join(workloads, "nodepools.yaml")}, want: "give --nodepools PATH and --workload PATH"},
		"node as workload": {args: []string{"simulate", "--nodepools", filepath.Join(workloads, "nodepools.yaml"), "--workload", filepath.Join(workloads, "nodes.yaml")}, want: "Node is not a workload"},
		"bad catalog":      {args: append(append([]string{}, base...), "--instance-types", filepath.Join(workloads, "apps.yaml")), want: "not an instance-type catalog"},
		"bad format":       {args: append(append([]string{}, base...), "-o", "yaml"), want: "-o must be json, table or markdown"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := karpenterctl(t, tc.stdin, tc.args...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

func TestSimulatePolicies(t *testing.T) {
	dir := filepath.Join(repo, "test", "policies")
	code, out, errOut := karpenterctl(t, "", "simulate", "--nodepools", filepath.Join(dir, "nodepools.yaml"), "--workload", filepath.Join(dir, "workload.yaml"),
		"--policies", filepath.Join(dir, "policies.yaml"), "--now", "2026-11-16T12:00:00Z", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var raw map[string]map[string]map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	r := &simulate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"team-a", "team-b"} {
		ns := r.Namespaces[name]
		if ns == nil || raw["namespaces"][name]["pricePerHour"] == nil || raw["namespaces"][name]["spotPercent"] == nil || raw["namespaces"][name]["blockedPods"] == nil {
			t.Fatalf("namespaces.%s must have pricePerHour, spotPercent and blockedPods:\n%s", name, out)
		}
		if ns.HourlyLimit == nil || ns.PricePerHour > *ns.HourlyLimit+0.005 {
			t.Errorf("%s: $%.4f/hour over its limit %v", name, ns.PricePerHour, ns.HourlyLimit)
		}
	}
	if a := r.Namespaces["team-a"]; a.SpotPercent < 50 || a.SpotPercent > 80 {
		t.Errorf("team-a's Spot share %.1f is outside [50, 80]", a.SpotPercent)
	}
	if b := r.Namespaces["team-b"]; b.SpotPercent != 100 {
		t.Errorf("team-b runs all Spot, got %.1f", b.SpotPercent)
	}
	// team-b's workers cost more than its $1.50/hour: some are held back, named in both lists.
	blocked := r.Namespaces["team-b"].BlockedPods
	if len(blocked) == 0 || !strings.HasPrefix(blocked[0].Reason, "CapacityBudget team-b/default: hourly cost ") {
		t.Fatalf("team-b's blocked pods: %+v", blocked)
	}
	listed := false
	for _, u := range r.Unschedulable {
		listed = listed || (u.Pod == blocked[0].Pod && u.Reason == blocked[0].Reason)
	}
	if !listed {
		t.Error("blocked pods are also listed under unschedulable")
	}
	// The dev namespace's GPU job is refused by the CapacityPolicy.
	for _, u := range r.Unschedulable {
		if u.Pod == "team-b/train-0" && !strings.Contains(u.Reason, "CapacityPolicy no-gpu-in-dev") {
			t.Errorf("train-0: %s", u.Reason)
		}
	}
}

func TestSimulatePoliciesThatDoNotCompile(t *testing.T) {
	bad := filepath.Join(writeFiles(t, map[string]string{"bad.yaml": "apiVersion: policy.karpenter.sh/v1\nkind: CapacityPolicy\nmetadata: {name: broken}\nspec:\n  modules:\n  - name: x.rego\n    rego: |\n      package karpenter.provisioning\n      deny contains x if {\n"}), "bad.yaml")
	code, _, errOut := karpenterctl(t, "", "simulate", "--nodepools", filepath.Join(repo, "test", "policies", "nodepools.yaml"),
		"--workload", filepath.Join(repo, "test", "policies", "workload.yaml"), "--policies", bad)
	if code != exitUsage || !strings.Contains(errOut, bad+":1: CapacityPolicy broken: x.rego:") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// DaemonSets whose pods get their requests at admission (limits only; a LimitRange's
// defaults) are counted as kube-scheduler will see them: the node chosen holds them and the
// pod.
func TestSimulateDaemonSetsAsAdmitted(t *testing.T) {
	code, out, errOut := karpenterctl(t, "", "simulate", "--nodepools", filepath.Join(workloads, "nodepools.yaml"),
		"--workload", filepath.Join(workloads, "daemonsets-admitted.yaml"), "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := &simulate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatal(err)
	}
	if len(r.NodeClaims) != 1 || r.NodeClaims[0].CPU != "2500m" || r.NodeClaims[0].Memory != "2304Mi" {
		t.Fatalf("want one node for 1 cpu/1Gi of app, 1 cpu/1Gi of log-shipper (LimitRange) and 500m/256Mi of node-agent (limits): %+v", r.NodeClaims)
	}
}

// Every pod whose claim is bound to a zonal volume is placed in the volume's zone, the
// WaitForFirstConsumer claim in its class's one allowed zone, and a pod whose claim does not
// exist is unschedulable with the claim named.
func TestSimulateZonalVolumes(t *testing.T) {
	code, out, errOut := karpenterctl(t, "", "simulate", "--nodepools", filepath.Join(workloads, "nodepools.yaml"),
		"--workload", filepath.Join(workloads, "zonal-volumes.yaml"), "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := &simulate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"shop/db-0": "us-east-1b", "shop/db-1": "us-east-1c", "shop/db-2": "us-east-1b", "shop/cache-0": "us-east-1c"}
	placed := 0
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			if zone, ok := want[p]; ok {
				placed++
				if c.Zone != zone {
					t.Errorf("%s's volume is in %s; simulate put it in %s", p, zone, c.Zone)
				}
			}
		}
	}
	if placed != len(want) {
		t.Errorf("%d of %d pods with volumes placed: %+v", placed, len(want), r.NodeClaims)
	}
	if len(r.Unschedulable) != 1 || r.Unschedulable[0].Pod != "shop/orphan" || !strings.Contains(r.Unschedulable[0].Reason, "persistentvolumeclaim shop/not-created-yet not found") {
		t.Errorf("unschedulable %+v", r.Unschedulable)
	}
}

// A node without karpenter.sh/capacity-type is priced on-demand unless another provisioner's
// label says Spot, and the output says which (the measured case: an m6i.xlarge in us-east-1c,
// $0.072/hour Spot, $0.192/hour on-demand).
func TestSimulatePricesUnlabelledNodes(t *testing.T) {
	nodes := `apiVersion: v1
kind: Node
metadata:
  name: unmanaged
  labels: {node.kubernetes.io/instance-type: m6i.xlarge, topology.kubernetes.io/zone: us-east-1c}
status:
  allocatable: {cpu: "4", memory: 15Gi, pods: "58"}
---
apiVersion: v1
kind: Node
metadata:
  name: eks-spot
  labels: {node.kubernetes.io/instance-type: m6i.xlarge, topology.kubernetes.io/zone: us-east-1c, eks.amazonaws.com/capacityType: SPOT}
status:
  allocatable: {cpu: "4", memory: 15Gi, pods: "58"}
`
	dir := writeFiles(t, map[string]string{"nodes.yaml": nodes})
	args := []string{"simulate", "--nodepools", filepath.Join(workloads, "nodepools.yaml"), "--workload", filepath.Join(workloads, "apps.yaml"),
		"--nodes", filepath.Join(dir, "nodes.yaml")}
	code, out, errOut := karpenterctl(t, "", append(args, "-o", "json")...)
	r := &simulate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v: %s", code, err, errOut)
	}
	want := []simulate.PricedNode{
		{Name: "eks-spot", InstanceType: "m6i.xlarge", CapacityType: "spot", CapacityTypeFrom: "eks.amazonaws.com/capacityType", PricePerHour: 0.072},
		{Name: "unmanaged", InstanceType: "m6i.xlarge", CapacityType: "on-demand", CapacityTypeFrom: "", PricePerHour: 0.192},
	}
	if len(r.Nodes) != 2 || r.Nodes[0] != want[0] || r.Nodes[1] != want[1] {
		t.Errorf("nodes %+v, want %+v", r.Nodes, want)
	}
	_, table, _ := karpenterctl(t, "", args...)
	if !strings.Contains(table, "node unmanaged (m6i.xlarge) priced on-demand (assumed: no capacity-type label): $0.1920/hour") ||
		!strings.Contains(table, "node eks-spot (m6i.xlarge) priced spot (label eks.amazonaws.com/capacityType): $0.0720/hour") {
		t.Errorf("table:\n%s", table)
	}
}
