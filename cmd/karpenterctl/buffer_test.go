package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
)

const bufferChunk = `apiVersion: v1
kind: PodTemplate
metadata: {name: chunk, namespace: default}
template:
  metadata: {labels: {app: chunk}}
  spec:
    containers:
    - name: c
      image: c
      resources: {requests: {cpu: "1", memory: 1Gi}}
`

const bufferOfTwo = `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: room, namespace: default}
spec:
  podTemplateRef: {name: chunk}
  replicas: 2
`

// A scalableRef buffer of 50% of a 4-replica Deployment keeps room for 2 of its pods.
const bufferOfHalfWeb = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: web
        resources: {requests: {cpu: "1", memory: 1Gi}}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: web-room, namespace: default}
spec:
  scalableRef: {apiGroup: apps, kind: Deployment, name: web}
  percentage: 50
`

func simulateReport(t *testing.T, workload ...string) (*simulate.Report, int, string) {
	t.Helper()
	dir := writeFiles(t, map[string]string{"pools.yaml": overlayPool, "workload.yaml": strings.Join(workload, "\n---\n")})
	code, out, errOut := karpenterctl(t, "", "simulate", "--nodepools", filepath.Join(dir, "pools.yaml"), "--workload", filepath.Join(dir, "workload.yaml"), "-o", "json")
	if code != exitOK {
		return nil, code, errOut
	}
	r := &simulate.Report{}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r, code, errOut
}

func placedPods(r *simulate.Report) []string {
	var out []string
	for _, c := range r.NodeClaims {
		out = append(out, c.Pods...)
	}
	slices.Sort(out)
	return out
}

func TestSimulateKeepsCapacityBuffersRoom(t *testing.T) {
	without, _, errOut := simulateReport(t, overlayWorkload)
	if without == nil {
		t.Fatal(errOut)
	}
	with, _, errOut := simulateReport(t, overlayWorkload, bufferChunk, bufferOfTwo)
	if with == nil {
		t.Fatal(errOut)
	}
	want := []string{"default/app", "default/capacity-buffer-room-1", "default/capacity-buffer-room-2"}
	if got := placedPods(with); !slices.Equal(got, want) {
		t.Fatalf("placed %v, want %v", got, want)
	}
	if with.Totals.PricePerHour <= without.Totals.PricePerHour || with.Totals.Nodes <= without.Totals.Nodes {
		t.Errorf("the buffer's room costs nothing: %+v without, %+v with", without.Totals, with.Totals)
	}

	web, _, errOut := simulateReport(t, bufferOfHalfWeb)
	if web == nil {
		t.Fatal(errOut)
	}
	if got := placedPods(web); len(got) != 6 || !slices.Contains(got, "default/capacity-buffer-web-room-2") || slices.Contains(got, "default/capacity-buffer-web-room-3") {
		t.Errorf("4 web pods and 2 chunks of room: placed %v", got)
	}
}

func TestSimulateRefusesABufferWhoseTemplateIsMissing(t *testing.T) {
	_, code, errOut := simulateReport(t, overlayWorkload, bufferOfTwo)
	if code == exitOK || !strings.Contains(errOut, "CapacityBuffer default/room: spec.podTemplateRef: PodTemplate default/chunk is not among the workload files") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func TestPlanCountsABufferAddedInTheHead(t *testing.T) {
	base := writeFiles(t, map[string]string{"nodepools.yaml": overlayPool})
	head := writeFiles(t, map[string]string{"nodepools.yaml": overlayPool, "buffer.yaml": bufferChunk + "---\n" + bufferOfTwo})
	workload := writeFiles(t, map[string]string{"w.yaml": overlayWorkload})
	code, out, errOut := karpenterctl(t, "", "plan", "--base", base, "--head", head, "--workload", filepath.Join(workload, "w.yaml"), "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var r planReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Delta.PricePerHour <= 0 || r.Delta.Nodes <= 0 || len(placedPods(r.Head)) != 3 || len(placedPods(r.Base)) != 1 {
		t.Errorf("a buffer of two in the head: delta %+v, head pods %v, base pods %v", r.Delta, placedPods(r.Head), placedPods(r.Base))
	}
}
