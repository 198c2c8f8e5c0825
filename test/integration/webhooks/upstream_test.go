package webhooks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-policy/karpenter/test/env"
)

// The files under testdata/upstream restate, in our own structure, the validation cases of
// upstream Karpenter's API tests (kubernetes-sigs/karpenter and aws/karpenter-provider-aws,
// pkg/apis/v1/*_validation_cel_test.go): each case is an object, or an update of one, and
// the verdict upstream's CRDs give it. The test applies each with server-side dry-run to the
// API server running our CRDs and validating webhooks and expects the same verdict, except
// where a case records a deliberate difference (ours, why); every such why must be explained
// in docs/api.md, so the list there and the table cannot drift apart.

// upstreamFile is one file of cases: the object every case starts from and the cases.
type upstreamFile struct {
	// Source names the upstream test file the cases restate.
	Source string         `json:"source"`
	Base   map[string]any `json:"base"`
	Cases  []upstreamCase `json:"cases"`
}

// upstreamCase is one object (or, with each, one object per value).
type upstreamCase struct {
	Name string `json:"name"`
	// Each expands the case once per value: "$each" in set and update stands for it.
	Each []any `json:"each,omitempty"`
	// Set and Unset edit the base object: dotted paths through maps ("spec.kubelet.maxPods").
	Set   map[string]any `json:"set,omitempty"`
	Unset []string       `json:"unset,omitempty"`
	// Update and UpdateUnset, when present, are applied to the created object; the update's
	// verdict is the case's.
	Update      map[string]any `json:"update,omitempty"`
	UpdateUnset []string       `json:"updateUnset,omitempty"`
	// Upstream is upstream's verdict: accept or reject.
	Upstream string `json:"upstream"`
	// Ours, with Why, is a deliberate difference: our verdict and the key of its reason in
	// docs/api.md.
	Ours string `json:"ours,omitempty"`
	Why  string `json:"why,omitempty"`
	// Field, when set, is a field our rejection must name.
	Field string `json:"field,omitempty"`
}

// expanded is one object to apply.
type expanded struct {
	name                string
	create, update      map[string]any
	upstream, ours, why string
	field               string
}

func TestUpstreamValidationCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "upstream", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no case files under testdata/upstream: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(env.RepoRoot(), "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	total, updates, differences := 0, 0, map[string]int{}
	for _, file := range files {
		cases, err := loadUpstreamCases(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, c := range cases {
			total++
			if c.update != nil {
				updates++
			}
			if c.why != "" {
				differences[c.why]++
				if !strings.Contains(string(doc), "`"+c.why+"`") {
					t.Errorf("%s: difference %q is not explained in docs/api.md", c.name, c.why)
				}
			}
			t.Run(c.name, func(t *testing.T) { applyUpstreamCase(ctx, t, c) })
		}
	}
	var why []string
	for k, n := range differences {
		why = append(why, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(why)
	t.Logf("%d upstream cases (%d updates) applied; deliberate differences: %s", total, updates, strings.Join(why, ", "))
}

func applyUpstreamCase(ctx context.Context, t *testing.T, c expanded) {
	want := c.upstream
	if c.ours != "" {
		want = c.ours
	}
	obj := &unstructured.Unstructured{Object: c.create}
	var err error
	if c.update == nil {
		err = testEnv.Client.Create(ctx, obj, client.DryRunAll)
	} else {
		if err := testEnv.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating the object to update: %v", err)
		}
		t.Cleanup(func() { _ = testEnv.Client.Delete(ctx, obj) })
		updated := &unstructured.Unstructured{Object: c.update}
		updated.SetName(obj.GetName())
		updated.SetResourceVersion(obj.GetResourceVersion())
		err = testEnv.Client.Update(ctx, updated, client.DryRunAll)
	}
	switch {
	case want == "accept" && err != nil:
		t.Fatalf("want accepted (upstream %s), got: %v", c.upstream, err)
	case want == "reject" && err == nil:
		t.Fatalf("want rejected (upstream %s), it was accepted", c.upstream)
	case want == "reject" && !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err):
		t.Fatalf("want a rejection, got another error: %v", err)
	case want == "reject" && c.field != "" && !strings.Contains(err.Error(), c.field):
		t.Fatalf("the rejection does not name %s: %v", c.field, err)
	}
}

func loadUpstreamCases(file string) ([]expanded, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var f upstreamFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, err
	}
	if f.Source == "" || f.Base == nil {
		return nil, fmt.Errorf("source and base are required")
	}
	prefix := strings.TrimSuffix(filepath.Base(file), ".yaml")
	var out []expanded
	seen := map[string]bool{}
	for i, c := range f.Cases {
		if c.Upstream != "accept" && c.Upstream != "reject" {
			return nil, fmt.Errorf("cases[%d] %q: upstream must be accept or reject, not %q", i, c.Name, c.Upstream)
		}
		if (c.Ours == "") != (c.Why == "") || (c.Ours != "" && c.Ours == c.Upstream) {
			return nil, fmt.Errorf("cases[%d] %q: ours and why go together and ours must differ from upstream", i, c.Name)
		}
		values := c.Each
		if values == nil {
			values = []any{nil}
		}
		for _, v := range values {
			name := prefix + "/" + c.Name
			if c.Each != nil {
				name += fmt.Sprintf(" [%v]", v)
			}
			if seen[name] {
				return nil, fmt.Errorf("cases[%d]: duplicate case name %q", i, name)
			}
			seen[name] = true
			e := expanded{name: name, upstream: c.Upstream, ours: c.Ours, why: c.Why, field: c.Field}
			e.create = runtime.DeepCopyJSON(f.Base)
			if err := edit(e.create, substitute(c.Set, v), c.Unset); err != nil {
				return nil, fmt.Errorf("cases[%d] %q: %w", i, c.Name, err)
			}
			e.create["metadata"] = map[string]any{"generateName": "upstream-"}
			if c.Update != nil || c.UpdateUnset != nil {
				e.update = runtime.DeepCopyJSON(e.create)
				if err := edit(e.update, substitute(c.Update, v), c.UpdateUnset); err != nil {
					return nil, fmt.Errorf("cases[%d] %q: %w", i, c.Name, err)
				}
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// edit sets and removes dotted paths in obj.
func edit(obj map[string]any, set map[string]any, unset []string) error {
	paths := make([]string, 0, len(set))
	for p := range set {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := unstructured.SetNestedField(obj, runtime.DeepCopyJSONValue(set[p]), strings.Split(p, ".")...); err != nil {
			return fmt.Errorf("set %s: %w", p, err)
		}
	}
	for _, p := range unset {
		unstructured.RemoveNestedField(obj, strings.Split(p, ".")...)
	}
	return nil
}

// substitute replaces "$each" by v ("$each.f" by its field f when v is an object, and a
// "$each" key by the paths v holds), and the generators ($long, $values90,
// $requirements101) by what they stand for, in a copy of the values of set.
func substitute(set map[string]any, v any) map[string]any {
	if set == nil {
		return nil
	}
	out := make(map[string]any, len(set))
	for k, e := range set {
		if k == "$each" { // each value is itself a set of paths
			if m, ok := v.(map[string]any); ok {
				for p, val := range m {
					out[p] = runtime.DeepCopyJSONValue(val)
				}
			}
			continue
		}
		out[k] = substituteValue(e, v)
	}
	return out
}

// long is a DNS label of 250 characters, too long for a label key's name or prefix.
var long = strings.Repeat("abcdefghij", 25)

func substituteValue(e, v any) any {
	switch x := e.(type) {
	case string:
		switch x {
		case "$each":
			return runtime.DeepCopyJSONValue(v)
		case "$values90":
			values := make([]any, 90)
			for i := range values {
				values[i] = fmt.Sprintf("instance%d", i)
			}
			return values
		case "$requirements101":
			reqs := make([]any, 101)
			for i := range reqs {
				reqs[i] = map[string]any{"key": fmt.Sprintf("example.com/key-%d", i), "operator": "In", "values": []any{"v"}}
			}
			return reqs
		}
		if m, ok := v.(map[string]any); ok && strings.HasPrefix(x, "$each.") {
			if val, found := m[strings.TrimPrefix(x, "$each.")]; found {
				return runtime.DeepCopyJSONValue(val)
			}
		}
		if s, ok := v.(string); ok {
			x = strings.ReplaceAll(x, "$each", s)
		}
		return strings.ReplaceAll(x, "$long", long)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if m, ok := v.(map[string]any); ok && k == "$each" { // merge v's fields here
				for f, fv := range m {
					out[f] = runtime.DeepCopyJSONValue(fv)
				}
				continue
			}
			key, _ := substituteValue(k, v).(string)
			out[key] = substituteValue(val, v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = substituteValue(val, v)
		}
		return out
	}
	return e
}
