package offline

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-policy/karpenter/webhooks/conversion"
)

// Note is something a person should know about a converted document.
type Note struct {
	File, Kind, Name, Message string
	Line                      int
}

func (n Note) String() string {
	return fmt.Sprintf("%s:%d: %s/%s: %s", n.File, n.Line, n.Kind, n.Name, n.Message)
}

// compatibilityAdvice says what to do about each compatibility annotation left on a converted
// manifest.
var compatibilityAdvice = map[string]string{
	conversion.AnnotationV1beta1Kubelet: "v1 configures the kubelet on the node class: move these settings to its spec.kubelet, then drop the annotation",
}

// Convert rewrites every NodePool, NodeClaim and EC2NodeClass document that is not at version
// to (v1 or v1beta1) with the webhook's converters, and leaves every other document as it
// was. It returns how many documents it converted. A document with fields its version does
// not have is refused, since converting would drop them.
func (v *Validator) Convert(ctx context.Context, docs []Document, to string) (int, []Note, error) {
	if to != "v1" && to != "v1beta1" {
		return 0, nil, fmt.Errorf("--to must be v1 or v1beta1, got %q", to)
	}
	var notes []Note
	converted := 0
	for i := range docs {
		d := &docs[i]
		if d.Object == nil {
			continue
		}
		gvk := d.GVK()
		if !conversion.Convertible(gvk.GroupKind()) || gvk.Version == to {
			continue
		}
		obj := runtime.DeepCopyJSON(d.Object)
		for _, e := range v.Schemas.Validate(ctx, gvk, obj) {
			if strings.HasPrefix(e.Detail, unknownField) {
				return converted, notes, fmt.Errorf("%s:%d: %s/%s: %s: unknown field; fix it before converting, it would be lost", d.File, d.LineOf(e.Field), gvk.Kind, d.Name(), e.Field)
			}
		}
		// Convert what was written, not the defaulted form: defaults stay implicit; and keep
		// how it was written (conversion.RestoreText).
		out, err := v.Converter.Unstructured(ctx, d.Object, to)
		if err != nil {
			return converted, notes, fmt.Errorf("%s:%d: %s/%s: %w", d.File, d.Line, gvk.Kind, d.Name(), err)
		}
		clean(out)
		b, err := yaml.Marshal(out)
		if err != nil {
			return converted, notes, err
		}
		d.Raw = append(leadingComments(d.Raw), b...)
		d.Object = out
		converted++
		annotations, _, _ := unstructuredStringMap(out, "metadata", "annotations")
		for key := range annotations {
			if conversion.IsCompatibilityAnnotation(key) {
				msg := "keeps what " + to + " cannot express in annotation " + key
				if advice, ok := compatibilityAdvice[key]; ok {
					msg += "; " + advice
				}
				notes = append(notes, Note{File: d.File, Line: d.Line, Kind: gvk.Kind, Name: d.Name(), Message: msg})
			}
		}
	}
	return converted, notes, nil
}

func unstructuredStringMap(obj map[string]any, fields ...string) (map[string]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if cur, ok = m[f]; !ok {
			return nil, false, nil
		}
	}
	m, ok := cur.(map[string]any)
	return m, ok, nil
}

// clean drops what a manifest does not carry: an empty status and a null creationTimestamp.
func clean(obj map[string]any) {
	if st, ok := obj["status"].(map[string]any); ok && len(st) == 0 {
		delete(obj, "status")
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		if ts, ok := md["creationTimestamp"]; ok && ts == nil {
			delete(md, "creationTimestamp")
		}
	}
}

// leadingComments keeps the comment lines that open a document.
func leadingComments(raw []byte) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(raw, []byte("\n")) {
		t := strings.TrimSpace(string(l))
		if t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		out = append(out, l...)
	}
	return out
}
