package conversion

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	awsv1beta1 "github.com/karpenter-policy/karpenter/api/aws/v1beta1"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1beta1 "github.com/karpenter-policy/karpenter/api/karpenter/v1beta1"
)

// kinds are the convertible kinds at each version, as new objects.
var kinds = map[schema.GroupVersionKind]func() runtime.Object{
	karpv1.SchemeGroupVersion.WithKind("NodePool"):         func() runtime.Object { return &karpv1.NodePool{} },
	karpv1beta1.SchemeGroupVersion.WithKind("NodePool"):    func() runtime.Object { return &karpv1beta1.NodePool{} },
	karpv1.SchemeGroupVersion.WithKind("NodeClaim"):        func() runtime.Object { return &karpv1.NodeClaim{} },
	karpv1beta1.SchemeGroupVersion.WithKind("NodeClaim"):   func() runtime.Object { return &karpv1beta1.NodeClaim{} },
	awsv1.SchemeGroupVersion.WithKind("EC2NodeClass"):      func() runtime.Object { return &awsv1.EC2NodeClass{} },
	awsv1beta1.SchemeGroupVersion.WithKind("EC2NodeClass"): func() runtime.Object { return &awsv1beta1.EC2NodeClass{} },
}

// Convertible reports whether objects of the group and kind convert between v1beta1 and v1.
func Convertible(gk schema.GroupKind) bool {
	_, ok := kinds[gk.WithVersion("v1")]
	return ok
}

// Object converts a typed object to the other version: v1beta1 to v1, v1 to v1beta1.
func (c *Converter) Object(ctx context.Context, src runtime.Object) (runtime.Object, error) {
	switch o := src.(type) {
	case *karpv1beta1.NodePool:
		dst := &karpv1.NodePool{}
		return dst, c.NodePoolToV1(ctx, o, dst)
	case *karpv1.NodePool:
		dst := &karpv1beta1.NodePool{}
		return dst, c.NodePoolToV1beta1(ctx, o, dst)
	case *karpv1beta1.NodeClaim:
		dst := &karpv1.NodeClaim{}
		return dst, c.NodeClaimToV1(ctx, o, dst)
	case *karpv1.NodeClaim:
		dst := &karpv1beta1.NodeClaim{}
		return dst, c.NodeClaimToV1beta1(ctx, o, dst)
	case *awsv1beta1.EC2NodeClass:
		dst := &awsv1.EC2NodeClass{}
		return dst, c.EC2NodeClassToV1(ctx, o, dst)
	case *awsv1.EC2NodeClass:
		dst := &awsv1beta1.EC2NodeClass{}
		return dst, c.EC2NodeClassToV1beta1(ctx, o, dst)
	}
	return nil, fmt.Errorf("%T cannot be converted", src)
}

// Unstructured converts an object as the API server or a manifest holds it (JSON-shaped) to
// version (v1 or v1beta1), keeping the text of every duration and quantity conversion does
// not change (RestoreText). The source is not modified; at its own version it is returned as
// a copy.
func (c *Converter) Unstructured(ctx context.Context, src map[string]any, version string) (map[string]any, error) {
	apiVersion, _ := src["apiVersion"].(string)
	kind, _ := src["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	gvk := gv.WithKind(kind)
	newObj, ok := kinds[gvk]
	if !ok {
		return nil, fmt.Errorf("%s is not a convertible kind", gvk)
	}
	if _, ok := kinds[gvk.GroupKind().WithVersion(version)]; !ok {
		return nil, fmt.Errorf("%s has no version %q", gvk.GroupKind(), version)
	}
	if gv.Version == version {
		return runtime.DeepCopyJSON(src), nil
	}
	typed := newObj()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(src, typed); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", gvk, err)
	}
	dst, err := c.Object(ctx, typed)
	if err != nil {
		return nil, err
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dst)
	if err != nil {
		return nil, err
	}
	out["apiVersion"], out["kind"] = gvk.GroupKind().WithVersion(version).GroupVersion().String(), kind
	RestoreText(src, out)
	return out, nil
}
