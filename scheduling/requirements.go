package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Requirement is the set of values a label key may take: either the listed values, or every
// value but the listed ones (complement), further bounded by integer limits for Gt/Lt.
type Requirement struct {
	Key        string
	complement bool
	values     sets.Set[string]
	// greaterThan and lessThan are exclusive integer bounds.
	greaterThan, lessThan *int64
	// MinValues is how many distinct values must stay possible (flexibility for the launch).
	MinValues *int
}

// NewRequirement builds a requirement from a node selector operator and values.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	r := &Requirement{Key: key, values: sets.New[string]()}
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values.Insert(values...)
	case corev1.NodeSelectorOpNotIn:
		r.complement = true
		r.values.Insert(values...)
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
		// the empty, non-complement set: no value allowed
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		r.complement = true
		if len(values) == 1 {
			if n, err := strconv.ParseInt(values[0], 10, 64); err == nil {
				switch op {
				case corev1.NodeSelectorOpGt:
					r.greaterThan = &n
				case karpv1.NodeSelectorOpGte:
					n--
					r.greaterThan = &n
				case corev1.NodeSelectorOpLt:
					r.lessThan = &n
				case karpv1.NodeSelectorOpLte:
					n++
					r.lessThan = &n
				}
			}
		}
	}
	return r
}

// Exists reports whether the requirement allows the label to be present.
func (r *Requirement) Exists() bool { return r.complement || r.values.Len() > 0 }

// Has reports whether value is allowed.
func (r *Requirement) Has(value string) bool {
	if r.greaterThan != nil || r.lessThan != nil {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || (r.greaterThan != nil && n <= *r.greaterThan) || (r.lessThan != nil && n >= *r.lessThan) {
			return false
		}
	}
	if r.complement {
		return !r.values.Has(value)
	}
	return r.values.Has(value)
}

// Intersect returns the values both allow.
func (r *Requirement) Intersect(o *Requirement) *Requirement {
	out := &Requirement{Key: r.Key, greaterThan: maxBound(r.greaterThan, o.greaterThan), lessThan: minBound(r.lessThan, o.lessThan), MinValues: maxMin(r.MinValues, o.MinValues)}
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = r.values.Union(o.values)
	case r.complement:
		out.values = o.values.Difference(r.values)
	case o.complement:
		out.values = r.values.Difference(o.values)
	default:
		out.values = r.values.Intersection(o.values)
	}
	// Apply the bounds to a finite set now, so that Len and Values are exact.
	if !out.complement && (out.greaterThan != nil || out.lessThan != nil) {
		for v := range out.values {
			if !out.Has(v) {
				out.values.Delete(v)
			}
		}
	}
	return out
}

// Len is the number of allowed values, or MaxInt for a complement.
func (r *Requirement) Len() int {
	if r.complement {
		return math.MaxInt
	}
	return r.values.Len()
}

// Complement reports whether r allows every value but those it lists (NotIn, Exists, Gt, Lt).
func (r *Requirement) Complement() bool { return r.complement }

// Single is the one value r allows, when it allows exactly one.
func (r *Requirement) Single() (string, bool) {
	if r.complement || r.values.Len() != 1 {
		return "", false
	}
	for v := range r.values {
		return v, true
	}
	return "", false
}

// MayOverlap reports whether two requirements may share a value; only plain In lists are
// compared, anything else may.
func (r *Requirement) MayOverlap(o *Requirement) bool {
	plain := func(x *Requirement) bool {
		return !x.complement && x.values.Len() > 0 && x.greaterThan == nil && x.lessThan == nil
	}
	if !plain(r) || !plain(o) {
		return true
	}
	for v := range r.values {
		if o.values.Has(v) {
			return true
		}
	}
	return false
}

// Values are the allowed values of a finite requirement, sorted.
func (r *Requirement) Values() []string { return sets.List(r.values) }

func (r *Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Key)
	switch {
	case !r.complement && r.values.Len() == 0:
		b.WriteString(" DoesNotExist")
	case !r.complement:
		b.WriteString(" In [")
		r.writeValues(&b)
		b.WriteString("]")
	case r.values.Len() > 0:
		b.WriteString(" NotIn [")
		r.writeValues(&b)
		b.WriteString("]")
	default:
		b.WriteString(" Exists")
	}
	if r.greaterThan != nil {
		b.WriteString(" >")
		b.WriteString(strconv.FormatInt(*r.greaterThan, 10))
	}
	if r.lessThan != nil {
		b.WriteString(" <")
		b.WriteString(strconv.FormatInt(*r.lessThan, 10))
	}
	return b.String()
}

// writeValues writes the values sorted, comma-separated; the solver builds keys of
// requirements in its inner loops, so one value is written without a sort.
func (r *Requirement) writeValues(b *strings.Builder) {
	if r.values.Len() == 1 {
		for v := range r.values {
			b.WriteString(v)
		}
		return
	}
	b.WriteString(strings.Join(r.Values(), ","))
}

// Fingerprint is a 128-bit hash of what the requirement allows (its key, whether it is a
// complement, its values and bounds; not MinValues), the same whatever order its values were
// added in. It is for memo keys whose collision can only cost a missed answer, never a wrong
// one: use String where equality must be exact.
func (r *Requirement) Fingerprint() (uint64, uint64) {
	h1, h2 := fnv64(r.Key, 1), fnv64(r.Key, 2)
	var sum, mix uint64
	for v := range r.values {
		f := fnv64(v, 3)
		sum += f
		mix ^= f * 0x9E3779B97F4A7C15
	}
	h1 = (h1^sum)*0x100000001B3 + uint64(r.values.Len())
	h2 = (h2^mix)*0x100000001B3 + boundHash(r.greaterThan, r.lessThan)
	if r.complement {
		h1, h2 = ^h1, h2*31+7
	}
	return h1, h2
}

// fnv64 is FNV-1a of s, seeded.
func fnv64(s string, seed uint64) uint64 {
	h := uint64(0xcbf29ce484222325) ^ seed
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001B3
	}
	return h
}

func boundHash(gt, lt *int64) uint64 {
	var h uint64 = 17
	if gt != nil {
		h = h*31 + uint64(*gt) + 1
	}
	if lt != nil {
		h = h*131 + uint64(*lt) + 3
	}
	return h
}

func maxBound(a, b *int64) *int64 {
	if a == nil {
		return b
	}
	if b == nil || *a > *b {
		return a
	}
	return b
}

func minBound(a, b *int64) *int64 {
	if a == nil {
		return b
	}
	if b == nil || *a < *b {
		return a
	}
	return b
}

func maxMin(a, b *int) *int {
	if a == nil {
		return b
	}
	if b == nil || *a > *b {
		return a
	}
	return b
}

// Requirements are requirements by key; adding a requirement on a key intersects.
type Requirements map[string]*Requirement

// NewRequirements builds requirements from node selector requirements with minValues.
func NewRequirements(reqs ...karpv1.NodeSelectorRequirementWithMinValues) Requirements {
	out := Requirements{}
	for _, r := range reqs {
		req := NewRequirement(r.Key, r.Operator, r.Values...)
		req.MinValues = r.MinValues
		out.Add(req)
	}
	return out
}

// LabelRequirements are the single-valued requirements of a set of labels.
func LabelRequirements(labels map[string]string) Requirements {
	out := make(Requirements, len(labels))
	for k, v := range labels {
		out[k] = NewRequirement(k, corev1.NodeSelectorOpIn, v)
	}
	return out
}

// Add intersects each requirement into rs.
func (rs Requirements) Add(reqs ...*Requirement) {
	for _, r := range reqs {
		if cur, ok := rs[r.Key]; ok {
			rs[r.Key] = cur.Intersect(r)
		} else {
			rs[r.Key] = r
		}
	}
}

// Copy returns a copy that can be added to independently.
func (rs Requirements) Copy() Requirements {
	out := make(Requirements, len(rs))
	for k, v := range rs {
		out[k] = v
	}
	return out
}

// Merged returns rs with others intersected in.
func (rs Requirements) Merged(others ...Requirements) Requirements {
	out := rs.Copy()
	for _, o := range others {
		for _, r := range o {
			out.Add(r)
		}
	}
	return out
}

// Keys are the keys, sorted.
func (rs Requirements) Keys() []string {
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Compatible checks that a node described by rs can satisfy pod requirements. A key the
// node does not define (or requires absent) satisfies only NotIn and DoesNotExist; otherwise
// the two must share a value. It returns the first conflict, for the unschedulable reason.
func (rs Requirements) Compatible(pod Requirements) error {
	for _, key := range pod.Keys() {
		p := pod[key]
		n, defined := rs[key]
		if !defined || !n.Exists() {
			if !p.AllowsAbsent() {
				return fmt.Errorf("requires %s, which the node would not have", p)
			}
			continue
		}
		if !p.Exists() {
			return fmt.Errorf("requires %s absent, but the node would have %s", key, n)
		}
		if n.Intersect(p).empty() {
			return fmt.Errorf("requires %s, but the node allows %s", p, n)
		}
	}
	return nil
}

// RulesOut reports that no node whose labels rs bounds can satisfy pod: on some key where rs
// allows only listed values (the node will carry one of them), pod allows none of them. Keys
// rs leaves open, or does not define (an instance type may supply them), rule nothing out; so
// RulesOut is a necessary condition for Compatible failing, never a sufficient one.
func (rs Requirements) RulesOut(pod Requirements) bool {
	for key, p := range pod {
		n, ok := rs[key]
		if !ok || n.complement || n.values.Len() == 0 {
			continue
		}
		if n.Intersect(p).empty() {
			return true
		}
	}
	return false
}

// AllowsAbsent reports whether a node without the label satisfies r (NotIn, DoesNotExist).
func (r *Requirement) AllowsAbsent() bool {
	if r.greaterThan != nil || r.lessThan != nil {
		return false
	}
	return (r.complement && r.values.Len() > 0) || (!r.complement && r.values.Len() == 0)
}

// empty reports whether no value is allowed.
func (r *Requirement) empty() bool {
	if !r.complement {
		return r.values.Len() == 0
	}
	// A complement is infinite unless its integer bounds leave no integer.
	return r.greaterThan != nil && r.lessThan != nil && *r.lessThan-*r.greaterThan <= 1
}

// NodeSelectorRequirements turns requirements back into the API's form, sorted by key, with
// MinValues kept.
func (rs Requirements) NodeSelectorRequirements() []karpv1.NodeSelectorRequirementWithMinValues {
	var out []karpv1.NodeSelectorRequirementWithMinValues
	for _, k := range rs.Keys() {
		r := rs[k]
		add := func(op corev1.NodeSelectorOperator, values ...string) {
			out = append(out, karpv1.NodeSelectorRequirementWithMinValues{Key: k, Operator: op, Values: values, MinValues: r.MinValues})
		}
		switch {
		case !r.complement && r.values.Len() == 0:
			add(corev1.NodeSelectorOpDoesNotExist)
			// With a bound it allows nothing at all, not even absence: keep the bound.
			if r.greaterThan != nil {
				add(corev1.NodeSelectorOpGt, strconv.FormatInt(*r.greaterThan, 10))
			}
			if r.lessThan != nil {
				add(corev1.NodeSelectorOpLt, strconv.FormatInt(*r.lessThan, 10))
			}
		case !r.complement:
			add(corev1.NodeSelectorOpIn, r.Values()...)
		default:
			if r.values.Len() > 0 {
				add(corev1.NodeSelectorOpNotIn, r.Values()...)
			}
			if r.greaterThan != nil {
				add(corev1.NodeSelectorOpGt, strconv.FormatInt(*r.greaterThan, 10))
			}
			if r.lessThan != nil {
				add(corev1.NodeSelectorOpLt, strconv.FormatInt(*r.lessThan, 10))
			}
			if r.values.Len() == 0 && r.greaterThan == nil && r.lessThan == nil {
				add(corev1.NodeSelectorOpExists)
			}
		}
	}
	return out
}
