package conversion

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The manifests, converted one way and back, come back as written, and the other
// version shows the same spellings where it holds the field.
func TestRoundTripKeepsTheText(t *testing.T) {
	for name, tc := range map[string]struct {
		manifest, via string
		// seen are lines the manifest at the other version must hold.
		seen []string
	}{
		"v1 NodePool through v1beta1": {manifest: `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  limits: {cpu: "1000", memory: 1G}
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
      expireAfter: 1.5h
      terminationGracePeriod: 48h
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 90s
    budgets:
    - {nodes: "10%", schedule: "0 9 * * *", duration: 10m}
    - {nodes: "0", schedule: "@daily", duration: 600s}
`, via: "v1beta1", seen: []string{`cpu: "1000"`, "duration: 10m", "duration: 600s", "expireAfter: 1.5h", "memory: 1G"}},
		"v1beta1 NodePool through v1": {manifest: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: general}
spec:
  limits: {cpu: 1000, memory: 512Mi}
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
      kubelet: {kubeReserved: {cpu: "0.5"}, evictionSoftGracePeriod: {memory.available: 90s}}
      resources: {requests: {cpu: "0.5"}}
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 720h
    budgets:
    - {nodes: "1", schedule: "0 0 * * *", duration: 8h}
`, via: "v1", seen: []string{"cpu: 1000", "duration: 8h", "expireAfter: 720h", "memory: 512Mi"}},
		"v1 NodeClaim through v1beta1": {manifest: `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: a}
spec:
  nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
  resources: {requests: {cpu: "1.5", memory: 1000Mi}}
  expireAfter: 90m
  terminationGracePeriod: 3600s
`, via: "v1beta1", seen: []string{`cpu: "1.5"`, "memory: 1000Mi"}},
	} {
		t.Run(name, func(t *testing.T) {
			var src map[string]any
			if err := yaml.Unmarshal([]byte(tc.manifest), &src); err != nil {
				t.Fatal(err)
			}
			c := &Converter{DefaultNodeClass: KWOKNodeClass}
			mid, err := c.Unstructured(context.Background(), src, tc.via)
			if err != nil {
				t.Fatal(err)
			}
			midYAML, _ := yaml.Marshal(mid)
			for _, line := range tc.seen {
				if !strings.Contains(string(midYAML), line) {
					t.Errorf("at %s the manifest lacks %q:\n%s", tc.via, line, midYAML)
				}
			}
			from := map[string]string{"v1": "v1beta1", "v1beta1": "v1"}[tc.via]
			back, err := c.Unstructured(context.Background(), mid, from)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := yaml.Marshal(src)
			got, _ := yaml.Marshal(back)
			if string(got) != string(want) {
				t.Errorf("back at %s:\n%s\nwant:\n%s\n(via %s:\n%s)", from, got, want, tc.via, midYAML)
			}
		})
	}
}
