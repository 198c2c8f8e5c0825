package methods

import (
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-policy/karpenter/cloudprovider"
)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortByPrice(types []*cloudprovider.InstanceType, priceOf func(*cloudprovider.InstanceType) float64) {
	sort.SliceStable(types, func(i, j int) bool {
		if pi, pj := priceOf(types[i]), priceOf(types[j]); pi != pj {
			return pi < pj
		}
		return types[i].Name < types[j].Name
	})
}

func resourceQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }
