package static

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	fakecloud "github.com/karpenter-policy/karpenter/cloudprovider/fake"
)

// With overlays, a static pool's NodeClaims are chosen from the overlaid instance types and say
// so.
func TestCreateUsesOverlays(t *testing.T) {
	cloud := fakecloud.New()
	cloud.InstanceTypes = []*cloudprovider.InstanceType{instanceType("c5.large", "c5", 2, 0.085), instanceType("m5.large", "m5", 2, 0.096)}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "static"}, Spec: karpv1.NodePoolSpec{Replicas: ptr.To[int64](1),
		Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}}}}}
	kube := fake.NewClientBuilder().WithScheme(install.NewScheme()).Build()
	c := NewController(kube, cloud, nil, nil).WithOverlays(func(pool string, its []*cloudprovider.InstanceType) []*cloudprovider.InstanceType {
		out := make([]*cloudprovider.InstanceType, len(its))
		for i, it := range its {
			cp := *it
			if it.Name == "m5.large" {
				cp.Offerings = append(cloudprovider.Offerings(nil), it.Offerings...)
				cp.Offerings[0].Price, cp.PriceOverlaid = 0.01, true
			}
			out[i] = &cp
		}
		return out
	})
	if err := c.create(context.Background(), np, 1); err != nil {
		t.Fatal(err)
	}
	var claims karpv1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil || len(claims.Items) != 1 {
		t.Fatalf("%d NodeClaims, %v", len(claims.Items), err)
	}
	nc := claims.Items[0]
	if nc.Annotations[karpv1alpha1.PriceOverlayAppliedAnnotationKey] != "true" {
		t.Errorf("annotations %v", nc.Annotations)
	}
	// The shape is the solver's choice at the overlaid prices.
	shape, err := Shape(np, c.overlays(np.Name, cloud.InstanceTypes))
	if err != nil || shape.InstanceType.Name != "m5.large" {
		t.Errorf("shape %v, %v: m5.large at $0.01/h is the cheapest", shape, err)
	}
}
