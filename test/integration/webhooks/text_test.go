package webhooks_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Through the API server, an object written by hand at one version and read at the other,
// then written back and read at its own, shows every duration and quantity as written: what
// an ArgoCD Application holding v1beta1 manifests compares against.
func TestTheAPIServerKeepsTheText(t *testing.T) {
	for name, tc := range map[string]struct {
		manifest, readAt string
		// fields are paths whose value must read exactly so at both versions.
		fields map[string]any
	}{
		"v1 NodePool read at v1beta1": {manifest: `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: text-v1}
spec:
  limits: {cpu: "1000", memory: 1G}
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
      expireAfter: 90m
      terminationGracePeriod: 48h
  disruption:
    consolidateAfter: 90s
    budgets: [{nodes: "10%", schedule: "0 9 * * *", duration: 10m}]
`, readAt: "v1beta1", fields: map[string]any{"spec.limits.cpu": "1000", "spec.limits.memory": "1G", "spec.disruption.budgets.0.duration": "10m"}},
		"v1beta1 NodePool read at v1": {manifest: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: text-v1beta1}
spec:
  limits: {cpu: "1000", memory: 512Mi}
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 90s
    expireAfter: 90m
    budgets: [{nodes: "1", schedule: "0 0 * * *", duration: 8h}]
`, readAt: "v1", fields: map[string]any{"spec.limits.cpu": "1000", "spec.limits.memory": "512Mi", "spec.disruption.budgets.0.duration": "8h", "spec.disruption.consolidateAfter": "90s"}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tc.manifest), &obj.Object); err != nil {
				t.Fatal(err)
			}
			written := obj.GetAPIVersion()
			if err := testEnv.Client.Create(ctx, obj.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, obj) })
			other := read(t, ctx, obj, "karpenter.sh/"+tc.readAt)
			check(t, "read at "+tc.readAt, other, tc.fields)
			// Write the other version's object back unchanged, and read at the written one.
			if err := testEnv.Client.Update(ctx, other); err != nil {
				t.Fatal(err)
			}
			back := read(t, ctx, obj, written)
			check(t, "written back and read at "+written, back, tc.fields)
			for _, f := range []string{"spec.template.spec.expireAfter", "spec.template.spec.terminationGracePeriod", "spec.disruption.expireAfter"} {
				if want, ok := lookup(obj.Object, f); ok {
					if got, _ := lookup(back.Object, f); got != want {
						t.Errorf("%s: %s = %v, want %v as written", written, f, got, want)
					}
				}
			}
		})
	}
}

func read(t *testing.T, ctx context.Context, obj *unstructured.Unstructured, apiVersion string) *unstructured.Unstructured {
	t.Helper()
	out := &unstructured.Unstructured{}
	out.SetAPIVersion(apiVersion)
	out.SetKind(obj.GetKind())
	if err := testEnv.Client.Get(ctx, client.ObjectKeyFromObject(obj), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func check(t *testing.T, when string, obj *unstructured.Unstructured, fields map[string]any) {
	t.Helper()
	for f, want := range fields {
		if got, _ := lookup(obj.Object, f); got != want {
			b, _ := yaml.Marshal(obj.Object["spec"])
			t.Errorf("%s: %s = %v, want %v as written\n%s", when, f, got, want, b)
		}
	}
}

// lookup follows a dotted path of keys and list indices.
func lookup(v any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[part]
		case []any:
			i := 0
			for _, c := range part {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, v != nil
}
