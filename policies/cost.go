package policies

// Amounts are a pod's requests or a node's allocatable, as cost attribution reads them: vCPU,
// bytes of memory and accelerators (GPUs and Neuron devices; scheduling.Accelerators).
type Amounts struct {
	CPU, Memory, GPU float64
}

// Reference hourly prices by which a node's price is split between its accelerators and the
// rest (docs/architecture.md, "Cost attribution"): OpenCost's defaults for on-demand, per
// vCPU, GiB of memory and GPU. Only their ratios matter, and only on nodes with accelerators.
const (
	referenceCPUPrice    = 0.031611
	referenceMemoryPrice = 0.004237
	referenceGPUPrice    = 0.95
)

// AcceleratorShare is the part of a node's price its accelerators account for: their
// reference price over the node's at reference prices; 0 for a node without any.
func AcceleratorShare(alloc Amounts) float64 {
	if alloc.GPU <= 0 {
		return 0
	}
	gpu := alloc.GPU * referenceGPUPrice
	rest := alloc.CPU*referenceCPUPrice + alloc.Memory/(1<<30)*referenceMemoryPrice
	return gpu / (gpu + rest)
}

// AttributedCost is what a pod on a node is charged, by the one definition used everywhere
// (docs/architecture.md, "Cost attribution"): the node's price, less its accelerators' part,
// times the mean of the pod's shares of the node's allocatable cpu and memory, plus the
// accelerators' part times the pod's share of them. The unrequested remainder is idle cost,
// charged to no one, so the pods' charges and the idle cost of a node add up to its price.
func AttributedCost(price float64, req, alloc Amounts) float64 {
	share := 0.0
	if alloc.CPU > 0 {
		share += req.CPU / alloc.CPU
	}
	if alloc.Memory > 0 {
		share += req.Memory / alloc.Memory
	}
	share /= 2
	if g := AcceleratorShare(alloc); g > 0 {
		share = (1-g)*share + g*req.GPU/alloc.GPU
	}
	return price * share
}
