package conversion

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// RestoreText gives the converted object dst back the spelling its source src used for every
// duration and quantity whose value conversion kept. The typed conversion reads "10m" into a
// metav1.Duration and writes "10m0s", and "1000" into a Quantity and writes "1k"; the API
// server runs conversion whenever a client reads at the other version, so without this a
// manifest in Git would never match what the cluster returns (docs/conversion.md, "Conversion keeps
// what you wrote").
//
// A leaf of dst (a string or number under an object key) takes the text of the leaf of src
// under the same key that means the same duration or quantity: the one at the same path if
// there is one, else the first not yet taken in path order (a field conversion moved, such as
// expireAfter between spec.disruption and spec.template.spec). The JSON the conversion keeps
// in its compatibility annotations is restored inside as well, so the text survives a round
// trip through the version that cannot hold the field. Values conversion changed are left as
// converted; src is not modified.
func RestoreText(src, dst map[string]any) {
	var spellings leaves
	collect(src, "", &spellings)
	byKey := map[string][]*leaf{}
	for _, l := range spellings {
		byKey[l.key] = append(byKey[l.key], l)
	}
	restore(dst, "", byKey)
}

// leaf is a duration or quantity of the source, with what it means.
type leaf struct {
	path, key string
	value     any
	meanings  []string
	taken     bool
}

type leaves []*leaf

// meanings are the values a scalar can mean, tagged by kind: a duration, a quantity, or both
// ("10m" is ten minutes or ten millicores, whichever its field says).
func meanings(v any) []string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64:
		s = strconv.FormatInt(x, 10)
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		s = x.String()
	case int:
		s = strconv.Itoa(x)
	default:
		return nil
	}
	var out []string
	if d, err := time.ParseDuration(s); err == nil {
		out = append(out, "d:"+d.String())
	}
	if q, err := resource.ParseQuantity(s); err == nil {
		out = append(out, "q:"+q.String())
	}
	return out
}

func collect(v any, path string, out *leaves) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			p := path + "/" + k
			if inner, ok := stashed(k, x[k]); ok {
				if field, scalar := scalarStashes[k]; scalar {
					if m := meanings(inner); m != nil {
						*out = append(*out, &leaf{path: p, key: field, value: inner, meanings: m})
					}
					continue
				}
				collect(inner, p, out)
				continue
			}
			if m := meanings(x[k]); m != nil {
				*out = append(*out, &leaf{path: p, key: k, value: x[k], meanings: m})
				continue
			}
			collect(x[k], p, out)
		}
	case []any:
		for i, e := range x {
			collect(e, path+"/"+strconv.Itoa(i), out)
		}
	}
}

// restore rewrites the leaves of v that a source leaf spells differently, and reports
// whether it changed anything.
func restore(v any, path string, byKey map[string][]*leaf) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			p := path + "/" + k
			if inner, ok := stashed(k, x[k]); ok {
				innerChanged := false
				if field, scalar := scalarStashes[k]; scalar {
					if l := match(byKey[field], p, meanings(inner)); l != nil {
						l.taken = true
						innerChanged = !sameScalar(inner, l.value)
						inner = l.value
					}
				} else {
					innerChanged = restore(inner, p, byKey)
				}
				// Re-encoded only when changed: the converter's own encoding stays as it was.
				if b, err := json.Marshal(inner); err == nil && innerChanged {
					x[k], changed = string(b), true
				}
				continue
			}
			if m := meanings(x[k]); m != nil {
				if l := match(byKey[k], p, m); l != nil {
					l.taken = true
					if !sameScalar(x[k], l.value) {
						x[k], changed = l.value, true
					}
				}
				continue
			}
			changed = restore(x[k], p, byKey) || changed
		}
	case []any:
		for i, e := range x {
			changed = restore(e, path+"/"+strconv.Itoa(i), byKey) || changed
		}
	}
	return changed
}

// sameScalar reports whether two scalars are spelled alike.
func sameScalar(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// match is the source leaf a converted leaf at path meaning m takes its text from: the one at
// the same path, else the first not yet taken that shares a meaning, else the first taken one
// (a value the converter wrote twice, such as into its own annotation as well, is spelled as
// written both times).
func match(candidates []*leaf, path string, m []string) *leaf {
	var untaken, taken *leaf
	for _, l := range candidates {
		if !shares(l.meanings, m) {
			continue
		}
		switch {
		case l.path == path:
			return l
		case !l.taken && untaken == nil:
			untaken = l
		case l.taken && taken == nil:
			taken = l
		}
	}
	if untaken != nil {
		return untaken
	}
	return taken
}

func shares(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// scalarStashes are the compatibility annotations that hold one field's value, not an
// object: the field they hold.
var scalarStashes = map[string]string{
	AnnotationV1TerminationGracePeriod: "terminationGracePeriod",
	AnnotationV1ExpireAfter:            "expireAfter",
}

// stashed is the JSON a compatibility annotation holds, decoded.
func stashed(key string, v any) (any, bool) {
	s, ok := v.(string)
	if !ok || !IsCompatibilityAnnotation(key) {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var inner any
	if err := dec.Decode(&inner); err != nil {
		return nil, false
	}
	return inner, true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
