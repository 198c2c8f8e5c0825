package metrics

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/cloudprovider/fake"
	"github.com/karpenter-policy/karpenter/controllers/metrics/metricstest"
)

// onlyCloud is a provider with nothing beyond CloudProvider: no Reboot, no MarkUnavailable.
type onlyCloud struct{ cloudprovider.CloudProvider }

// reporting is a provider that can be told an offering has no capacity, and cannot reboot.
type reporting struct {
	cloudprovider.CloudProvider
	marked []string
}

func (r *reporting) MarkUnavailable(instanceType, _, _ string) {
	r.marked = append(r.marked, instanceType)
}

// The wrapper has exactly the optional methods of what it wraps: reboot and capacity
// reports reach the provider, and a provider without them does not gain them.
func TestDecorateCloudKeepsWhatTheProviderCanDo(t *testing.T) {
	f := fake.New()
	if _, ok := DecorateCloud(f, "test").(cloudprovider.Rebooter); !ok {
		t.Error("the fake provider reboots; its wrapper must too")
	}
	if _, ok := DecorateCloud(f, "test").(cloudprovider.CapacityReporter); ok {
		t.Error("the fake provider takes no capacity reports; its wrapper must not either")
	}
	plain := DecorateCloud(onlyCloud{f}, "test")
	if _, ok := plain.(cloudprovider.Rebooter); ok {
		t.Error("a provider without Reboot gained one")
	}
	r := &reporting{CloudProvider: f}
	wrapped, ok := DecorateCloud(r, "test").(cloudprovider.CapacityReporter)
	if !ok {
		t.Fatal("a reporting provider lost MarkUnavailable")
	}
	wrapped.MarkUnavailable("m5.large", "z", "spot")
	if len(r.marked) != 1 {
		t.Errorf("MarkUnavailable did not reach the provider: %v", r.marked)
	}
}

// Each call is timed under the controller's name, and each error counted by its kind and the
// NodeClaim's NodePool.
func TestDecorateCloudCountsCallsAndErrors(t *testing.T) {
	f := fake.New()
	cp := DecorateCloud(f, "nodeclaim.lifecycle")
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{karpv1.NodePoolLabelKey: "pool"}}}
	calls := func(method string) uint64 {
		n, _ := metricstest.Observations(t, CloudProviderDuration, map[string]string{"controller": "nodeclaim.lifecycle", "method": method, "provider": "fake"})
		return n
	}
	errs := func(method, kind, pool string) float64 {
		return testutil.ToFloat64(CloudProviderErrors.WithLabelValues("nodeclaim.lifecycle", method, "fake", kind, pool))
	}
	creates, capacity := calls("Create"), errs("Create", "InsufficientCapacityError", "pool")
	if _, err := cp.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	f.CreateErr = cloudprovider.NewInsufficientCapacityError(errors.New("none left"))
	if _, err := cp.Create(context.Background(), nc); err == nil {
		t.Fatal("the provider's error was lost")
	}
	if got := calls("Create") - creates; got != 2 {
		t.Errorf("%d Create calls timed, want 2", got)
	}
	if got := errs("Create", "InsufficientCapacityError", "pool") - capacity; got != 1 {
		t.Errorf("%v InsufficientCapacityError counted, want 1", got)
	}
	unknown := errs("Get", "unknown", "")
	f.GetErr = errors.New("throttled")
	if _, err := cp.Get(context.Background(), "fake://a"); err == nil {
		t.Fatal("the provider's error was lost")
	}
	if got := errs("Get", "unknown", "") - unknown; got != 1 {
		t.Errorf("%v unknown Get errors counted, want 1", got)
	}
	reboots := calls("Reboot")
	if err := cp.(cloudprovider.Rebooter).Reboot(context.Background(), nc, "op"); err != nil {
		t.Fatal(err)
	}
	if got := calls("Reboot") - reboots; got != 1 || len(f.Reboots) != 1 {
		t.Errorf("Reboot: %d timed, %d reached the provider; want 1 and 1", got, len(f.Reboots))
	}
}
