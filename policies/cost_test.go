package policies

import (
	"math"
	"testing"
)

const gib = float64(1 << 30)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// On a node without accelerators a pod pays the mean of its cpu and memory shares.
func TestAttributedCostWithoutAcceleratorsIsTheMeanOfCPUAndMemory(t *testing.T) {
	node := Amounts{CPU: 4, Memory: 16 * gib}
	if got := AttributedCost(0.192, Amounts{CPU: 1, Memory: 8 * gib}, node); !near(got, 0.192*(0.25+0.5)/2) {
		t.Errorf("1 vCPU, 8 GiB of 4 vCPU, 16 GiB at $0.192: %v", got)
	}
	if got := AttributedCost(0.192, Amounts{CPU: 1, GPU: 1}, node); !near(got, 0.192*0.25/2) {
		t.Errorf("a GPU request on a node without GPUs is charged nothing for it: %v", got)
	}
}

// A pod requesting a GPU pays for the GPUs' part of the node's price; one that requests none
// pays only for its share of the rest; pods requesting the whole node pay its price.
func TestAttributedCostChargesAcceleratorsToThePodsRequestingThem(t *testing.T) {
	// g4dn.12xlarge: 48 vCPU, 192 GiB, 4 T4, $3.912/h.
	node := Amounts{CPU: 48, Memory: 192 * gib, GPU: 4}
	const price = 3.912
	g := AcceleratorShare(node)
	want := 4 * 0.95 / (4*0.95 + 48*0.031611 + 192*0.004237)
	if !near(g, want) {
		t.Fatalf("AcceleratorShare = %v, want %v", g, want)
	}
	gpuPod := AttributedCost(price, Amounts{CPU: 4, Memory: 16 * gib, GPU: 1}, node)
	cpuPod := AttributedCost(price, Amounts{CPU: 4, Memory: 16 * gib}, node)
	if !near(gpuPod-cpuPod, price*g/4) {
		t.Errorf("one GPU of four adds %v, want a quarter of the GPUs' part %v", gpuPod-cpuPod, price*g/4)
	}
	if plain := AttributedCost(price, Amounts{CPU: 4, Memory: 16 * gib}, Amounts{CPU: 48, Memory: 192 * gib}); cpuPod >= plain {
		t.Errorf("a pod without GPUs pays %v on the GPU node, not less than %v on a node without", cpuPod, plain)
	}
	// Four pods that together request the whole node pay its price, to the cent and below.
	sum := 0.0
	for range 4 {
		sum += AttributedCost(price, Amounts{CPU: 12, Memory: 48 * gib, GPU: 1}, node)
	}
	if !near(sum, price) {
		t.Errorf("the whole node is charged %v, want %v", sum, price)
	}
	if AcceleratorShare(Amounts{CPU: 4, Memory: 16 * gib}) != 0 {
		t.Error("a node without accelerators has an accelerator share")
	}
}
