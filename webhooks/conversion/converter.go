package conversion

import (
	"bytes"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
)

// Converter converts between v1beta1 and v1. Its one setting is the node class a v1beta1
// nodeClassRef means when it omits apiVersion or kind: the cloud provider's node class.
type Converter struct {
	DefaultNodeClass schema.GroupKind
}

// KWOKNodeClass and EC2NodeClass are the node classes this build supports.
var (
	KWOKNodeClass = schema.GroupKind{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass"}
	EC2NodeClass  = schema.GroupKind{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass"}
)

// nodeClassVersions is the version a v1beta1 nodeClassRef's apiVersion names for each group.
var nodeClassVersions = map[string]string{
	EC2NodeClass.Group:  "v1beta1",
	KWOKNodeClass.Group: "v1alpha1",
}

// piece converts one part of an object that the other version holds differently. If the
// source carries a stash of the target's form (under targetKey) that maps back to the
// source's value, that stash is the result: the object made the round trip unchanged.
// Otherwise fwd maps the value, and when back would not return the source's value from the
// result, the source's value is stashed on the target under sourceKey.
func piece[S, T any](src S, annotations stash, targetKey, sourceKey string, fwd func(S) T, back func(T) S) T {
	var stashed T
	if targetKey != "" && annotations.take(targetKey, &stashed) && equalJSON(back(stashed), src) {
		return stashed
	}
	out := fwd(src)
	if !equalJSON(back(out), src) {
		annotations.put(sourceKey, src)
	}
	return out
}

// equalJSON reports whether two values are the same JSON, an empty object or list counting
// as absent (the API server stores them alike, and a client may send either).
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	if bytes.Equal(ja, jb) {
		return true
	}
	// Only an empty object or list, or a null, can make different JSON the same object.
	if !mayHoldEmpty(ja) && !mayHoldEmpty(jb) {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	ja, errA = json.Marshal(withoutEmpty(va))
	jb, errB = json.Marshal(withoutEmpty(vb))
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// mayHoldEmpty reports whether JSON may hold an empty object or list or a null (a string value
// may hold the text too: then the slow comparison runs and still answers right).
func mayHoldEmpty(j []byte) bool {
	return bytes.Contains(j, []byte("{}")) || bytes.Contains(j, []byte("[]")) || bytes.Contains(j, []byte("null"))
}

// withoutEmpty drops nulls and empty objects and lists, recursively.
func withoutEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if p := withoutEmpty(e); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutEmpty(e)
		}
		return out
	}
	return v
}

// nothing is the target of a field the other version does not have.
type nothing struct{}

func toNothing[S any](S) nothing { return nothing{} }
func zero[S any](nothing) S {
	var s S
	return s
}

// Node class references: v1beta1 {apiVersion, kind, name} <-> v1 {group, kind, name}.

func (c *Converter) nodeClassRefToV1(r *karpv1beta1.NodeClassReference) *karpv1.NodeClassReference {
	if r == nil {
		return nil
	}
	out := &karpv1.NodeClassReference{Group: c.DefaultNodeClass.Group, Kind: r.Kind, Name: r.Name}
	if r.APIVersion != "" {
		out.Group = r.APIVersion
		if gv, err := schema.ParseGroupVersion(r.APIVersion); err == nil {
			out.Group = gv.Group
		}
	}
	if out.Kind == "" {
		out.Kind = c.DefaultNodeClass.Kind
	}
	return out
}

func nodeClassRefToV1beta1(r *karpv1.NodeClassReference) *karpv1beta1.NodeClassReference {
	if r == nil {
		return nil
	}
	out := &karpv1beta1.NodeClassReference{Kind: r.Kind, Name: r.Name}
	if r.Group != "" {
		version, ok := nodeClassVersions[r.Group]
		if !ok {
			version = "v1"
		}
		out.APIVersion = r.Group + "/" + version
	}
	return out
}

// kubeletToV1: v1beta1 keeps the kubelet on the NodePool and NodeClaim, v1 on the node class;
// the NodePool or NodeClaim has nothing to hold it.
var kubeletToV1 = toNothing[*karpv1beta1.KubeletConfiguration]

func isNever(d karpv1.NillableDuration) bool {
	return d.Duration == nil && (d.Raw == nil || strings.Contains(string(d.Raw), karpv1.Never))
}

// omitted reports whether a duration was not written at all (the zero value): a v1 NodePool's
// consolidateAfter then defaults to 0s, not Never.
func omitted(d karpv1.NillableDuration) bool { return d.Duration == nil && d.Raw == nil }
