package state

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	karpv1alpha1 "github.com/karpenter-policy/karpenter/api/karpenter/v1alpha1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/overlay"
)

// LaunchOverlays applies the last snapshot's overlays once per provider list: a launch after
// another gets the same answer, and a new list from the provider (availability changed) or a
// new set is applied again.
func TestLaunchOverlaysApplyOncePerList(t *testing.T) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "np"}}
	its := func() []*cloudprovider.InstanceType {
		return []*cloudprovider.InstanceType{{Name: "m5.large", Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large"},
			Offerings: []cloudprovider.Offering{{Zone: "z-a", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.1, Available: true}}}}
	}
	half := &karpv1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "half", UID: "o", Generation: 1},
		Spec: karpv1alpha1.NodeOverlaySpec{PriceAdjustment: ptr.To("-50%"), Weight: ptr.To[int32](1)}}
	list := its()
	c := NewCluster(nil, clocktesting.NewFakeClock(metav1.Now().Time))
	c.model.pools[np.Name] = np
	c.overlaySet = overlay.Resolve([]*karpv1alpha1.NodeOverlay{half}, []overlay.Pool{{NodePool: np, InstanceTypes: list}})
	first := c.LaunchOverlays(np.Name, list)
	if got := first[0].Offerings[0].Price; got != 0.05 {
		t.Fatalf("overlaid price %v, want 0.05", got)
	}
	if again := c.LaunchOverlays(np.Name, list); &again[0] != &first[0] {
		t.Error("the same list under the same set was applied again")
	}
	fresh := its()
	fresh[0].Offerings[0].Price = 0.2
	if got := c.LaunchOverlays(np.Name, fresh)[0].Offerings[0].Price; got != 0.1 {
		t.Errorf("a new list from the provider: price %v, want 0.1", got)
	}
	c.overlaySet = nil
	if got := c.LaunchOverlays(np.Name, fresh); &got[0] != &fresh[0] {
		t.Error("without overlays the provider's list is returned as it is")
	}
}
