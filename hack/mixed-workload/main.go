// Command mixed-workload writes the pods of the solver's mixed benchmark (test/bench.MixedPods:
// plain, zone spread, hostname spread, zone affinity, hostname anti-affinity) as a multi-document
// YAML file, so that karpenterctl simulate can be measured on the same workload end to end:
//
//	go run ./hack/mixed-workload -pods 20000 > /tmp/mixed.yaml
//	bin/karpenterctl simulate --nodepools test/workloads/nodepools.yaml --workload /tmp/mixed.yaml -o json
//
// It is a benchmark helper: it writes to standard output and nothing else.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/karpenter-policy/karpenter/test/bench"
)

func main() {
	n := flag.Int("pods", 20000, "how many pods")
	flag.Parse()
	w := bufio.NewWriter(os.Stdout)
	defer func() { _ = w.Flush() }()
	for _, p := range bench.MixedPods(*n) {
		p.APIVersion, p.Kind = "v1", "Pod"
		b, err := yaml.Marshal(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mixed-workload:", err)
			os.Exit(1)
		}
		fmt.Fprintf(w, "---\n%s", b)
	}
}
