package scheduling

import (
	"fmt"
	"math/rand"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// domain is the values the property tests try: small integers (for Gt/Lt), names, and a
// value no requirement lists.
var domain = []string{"-1", "0", "1", "2", "3", "5", "8", "a", "b", "c", "zz"}

func randomRequirement(r *rand.Rand, key string) *Requirement {
	ops := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
		corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte}
	op := ops[r.Intn(len(ops))]
	switch op {
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		return NewRequirement(key, op, strconv.Itoa(r.Intn(8)-1))
	}
	var values []string
	for _, v := range domain[:len(domain)-1] {
		if r.Intn(3) == 0 {
			values = append(values, v)
		}
	}
	return NewRequirement(key, op, values...)
}

func TestRequirementOperators(t *testing.T) {
	for _, tc := range []struct {
		op     corev1.NodeSelectorOperator
		values []string
		has    []string
		hasNot []string
		absent bool
	}{
		{corev1.NodeSelectorOpIn, []string{"a", "b"}, []string{"a", "b"}, []string{"c", ""}, false},
		{corev1.NodeSelectorOpNotIn, []string{"a"}, []string{"b", "zz"}, []string{"a"}, true},
		{corev1.NodeSelectorOpExists, nil, []string{"a", "1"}, nil, false},
		{corev1.NodeSelectorOpDoesNotExist, nil, nil, []string{"a", "1"}, true},
		{corev1.NodeSelectorOpGt, []string{"2"}, []string{"3", "8"}, []string{"2", "1", "a"}, false},
		{karpv1.NodeSelectorOpGte, []string{"2"}, []string{"2", "3"}, []string{"1", "a"}, false},
		{corev1.NodeSelectorOpLt, []string{"2"}, []string{"1", "-1"}, []string{"2", "3", "a"}, false},
		{karpv1.NodeSelectorOpLte, []string{"2"}, []string{"2", "1"}, []string{"3", "a"}, false},
		// A bound that is not an integer bounds nothing but still needs the label.
		{corev1.NodeSelectorOpGt, []string{"x"}, []string{"a"}, nil, false},
	} {
		r := NewRequirement("k", tc.op, tc.values...)
		for _, v := range tc.has {
			if !r.Has(v) {
				t.Errorf("%s %v must allow %q", tc.op, tc.values, v)
			}
		}
		for _, v := range tc.hasNot {
			if r.Has(v) {
				t.Errorf("%s %v must not allow %q", tc.op, tc.values, v)
			}
		}
		if r.AllowsAbsent() != tc.absent {
			t.Errorf("%s %v: AllowsAbsent = %v, want %v", tc.op, tc.values, r.AllowsAbsent(), tc.absent)
		}
	}
}

// Intersecting is the conjunction of what both allow, for every pair of operators.
func TestIntersectIsConjunction(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := range 5000 {
		a, b := randomRequirement(r, "k"), randomRequirement(r, "k")
		x := a.Intersect(b)
		for _, v := range domain {
			if got, want := x.Has(v), a.Has(v) && b.Has(v); got != want {
				t.Fatalf("case %d: (%s) ∩ (%s) = %s: Has(%q) = %v, want %v", i, a, b, x, v, got, want)
			}
		}
		if !x.Complement() && x.Len() != len(x.Values()) {
			t.Fatalf("case %d: a finite intersection lists its values: %s", i, x)
		}
		if !x.Complement() {
			for _, v := range x.Values() {
				if !x.Has(v) {
					t.Fatalf("case %d: %s lists %q, which it does not allow", i, x, v)
				}
			}
		}
		// MayOverlap never says no when they share a value.
		shares := false
		for _, v := range domain {
			shares = shares || x.Has(v)
		}
		if shares && !a.MayOverlap(b) {
			t.Fatalf("case %d: %s and %s share a value, MayOverlap says no", i, a, b)
		}
	}
}

// Requirements written back to the API's form and read again allow the same values.
func TestNodeSelectorRequirementsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := range 3000 {
		rs := Requirements{}
		for _, key := range []string{"a", "b"} {
			for range r.Intn(3) {
				rs.Add(randomRequirement(r, key))
			}
		}
		if r.Intn(2) == 0 && len(rs) > 0 {
			rs[rs.Keys()[0]].MinValues = ptr.To(2)
		}
		back := NewRequirements(rs.NodeSelectorRequirements()...)
		if len(back) != len(rs) {
			t.Fatalf("case %d: %v came back as %v", i, rs, back)
		}
		for key, req := range rs {
			for _, v := range domain {
				if req.Has(v) != back[key].Has(v) || req.AllowsAbsent() != back[key].AllowsAbsent() {
					t.Fatalf("case %d: %s came back as %s (value %q)", i, req, back[key], v)
				}
			}
			if fmt.Sprint(req.MinValues) != fmt.Sprint(back[key].MinValues) && (req.MinValues == nil) != (back[key].MinValues == nil) {
				t.Fatalf("case %d: minValues of %s lost", i, key)
			}
		}
	}
}

func TestCompatible(t *testing.T) {
	node := LabelRequirements(map[string]string{"arch": "amd64", "zone": "z-a", "cpu": "4"})
	node["zone"] = NewRequirement("zone", corev1.NodeSelectorOpIn, "z-a", "z-b")
	for _, tc := range []struct {
		pod Requirements
		ok  bool
	}{
		{Requirements{"arch": NewRequirement("arch", corev1.NodeSelectorOpIn, "amd64")}, true},
		{Requirements{"arch": NewRequirement("arch", corev1.NodeSelectorOpIn, "arm64")}, false},
		{Requirements{"zone": NewRequirement("zone", corev1.NodeSelectorOpIn, "z-b", "z-c")}, true},
		{Requirements{"zone": NewRequirement("zone", corev1.NodeSelectorOpNotIn, "z-a", "z-b")}, false},
		{Requirements{"cpu": NewRequirement("cpu", corev1.NodeSelectorOpGt, "2")}, true},
		{Requirements{"cpu": NewRequirement("cpu", corev1.NodeSelectorOpGt, "4")}, false},
		// A key the node does not define: only requirements that allow absence hold.
		{Requirements{"gpu": NewRequirement("gpu", corev1.NodeSelectorOpDoesNotExist)}, true},
		{Requirements{"gpu": NewRequirement("gpu", corev1.NodeSelectorOpNotIn, "a100")}, true},
		{Requirements{"gpu": NewRequirement("gpu", corev1.NodeSelectorOpExists)}, false},
		{Requirements{"gpu": NewRequirement("gpu", corev1.NodeSelectorOpIn, "a100")}, false},
		// A key the node defines cannot be required absent.
		{Requirements{"arch": NewRequirement("arch", corev1.NodeSelectorOpDoesNotExist)}, false},
	} {
		if err := node.Compatible(tc.pod); (err == nil) != tc.ok {
			t.Errorf("node %v, pod %v: compatible = %v (%v), want %v", node, tc.pod, err == nil, err, tc.ok)
		}
	}
}

func TestRequirementsAddIntersectsAndCopyIsIndependent(t *testing.T) {
	rs := NewRequirements(
		karpv1.NodeSelectorRequirementWithMinValues{Key: "z", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b", "c"}},
		karpv1.NodeSelectorRequirementWithMinValues{Key: "z", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"b"}, MinValues: ptr.To(2)},
	)
	if got := rs["z"].Values(); fmt.Sprint(got) != "[a c]" || *rs["z"].MinValues != 2 {
		t.Fatalf("In a,b,c and NotIn b: %v (minValues %v)", got, rs["z"].MinValues)
	}
	cp := rs.Copy()
	cp.Add(NewRequirement("z", corev1.NodeSelectorOpIn, "a"))
	if len(rs["z"].Values()) != 2 || len(cp["z"].Values()) != 1 {
		t.Fatalf("adding to a copy must leave the original: %v / %v", rs["z"], cp["z"])
	}
	if v, ok := cp["z"].Single(); !ok || v != "a" {
		t.Fatalf("Single of In a = %q %v", v, ok)
	}
	merged := rs.Merged(Requirements{"k": NewRequirement("k", corev1.NodeSelectorOpExists)})
	if len(merged) != 2 || len(rs) != 1 {
		t.Fatalf("Merged leaves the receiver: %v / %v", merged, rs)
	}
}

// RulesOut never rules out a node that rs allows and that satisfies the pod: for every
// assignment of labels (each key absent or one value of the domain) that rs allows, when the
// pod allows it too, RulesOut must say no.
func TestRulesOutIsNecessary(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	keys := []string{"a", "b"}
	ruledOut := 0
	for i := range 3000 {
		rs, pod := Requirements{}, Requirements{}
		for _, key := range keys {
			if r.Intn(3) > 0 {
				rs.Add(randomRequirement(r, key))
			}
			if r.Intn(3) > 0 {
				pod.Add(randomRequirement(r, key))
			}
		}
		allows := func(reqs Requirements, labels map[string]string) bool {
			for key, req := range reqs {
				v, ok := labels[key]
				if !ok && !req.AllowsAbsent() || ok && !req.Has(v) {
					return false
				}
			}
			return true
		}
		// Each key: absent ("") or a value of the domain.
		choices := append([]string{""}, domain...)
		for _, va := range choices {
			for _, vb := range choices {
				labels := map[string]string{}
				for key, v := range map[string]string{"a": va, "b": vb} {
					if v != "" {
						labels[key] = v
					}
				}
				if allows(rs, labels) && allows(pod, labels) && rs.RulesOut(pod) {
					t.Fatalf("case %d: node %v satisfies %v and %v, yet RulesOut says it cannot", i, labels, rs, pod)
				}
			}
		}
		if rs.RulesOut(pod) {
			ruledOut++
		}
	}
	// And it is not vacuous: a pool of In lists rules out pods that select other values.
	if ruledOut == 0 {
		t.Fatal("RulesOut ruled out nothing in 3000 cases")
	}
	pool := NewRequirements(karpv1.NodeSelectorRequirementWithMinValues{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}})
	if !pool.RulesOut(NewRequirements(karpv1.NodeSelectorRequirementWithMinValues{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"y"}})) {
		t.Error("a pool of pool=x must rule out a pod that selects pool=y")
	}
}

// Equal requirements have one fingerprint whatever the order their values came in; requirements
// that allow different values of the domain have different ones.
func TestFingerprint(t *testing.T) {
	a := NewRequirement("k", corev1.NodeSelectorOpIn, "x", "y", "z")
	b := NewRequirement("k", corev1.NodeSelectorOpIn, "z", "x", "y")
	a1, a2 := a.Fingerprint()
	if b1, b2 := b.Fingerprint(); a1 != b1 || a2 != b2 {
		t.Fatalf("%s and %s: different fingerprints", a, b)
	}
	r := rand.New(rand.NewSource(4))
	seen := map[[2]uint64]string{}
	for range 3000 {
		x := randomRequirement(r, "k")
		var allowed []byte
		for _, v := range domain {
			if x.Has(v) {
				allowed = append(allowed, '1')
			} else {
				allowed = append(allowed, '0')
			}
		}
		h1, h2 := x.Fingerprint()
		if prev, ok := seen[[2]uint64{h1, h2}]; ok && prev != string(allowed) {
			t.Fatalf("%s shares its fingerprint with a requirement allowing %s, it allows %s", x, prev, allowed)
		}
		seen[[2]uint64{h1, h2}] = string(allowed)
	}
	i1, _ := NewRequirement("k", corev1.NodeSelectorOpIn, "x").Fingerprint()
	if n1, _ := NewRequirement("k", corev1.NodeSelectorOpNotIn, "x").Fingerprint(); n1 == i1 {
		t.Error("In [x] and NotIn [x] share a fingerprint")
	}
}
