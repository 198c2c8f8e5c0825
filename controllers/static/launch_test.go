package static

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	fakecloud "github.com/karpenter-policy/karpenter/cloudprovider/fake"
)

// A static pool that cannot launch a node (here its only reservation is full) warns on the
// NodePool and looks again after CapacityRecheck, not after the error backoff; once the slot
// is free, the next reconcile launches the pool.
func TestPoolThatCannotLaunchRechecksCapacity(t *testing.T) {
	it := instanceType("m5.large", "m5", 2, 0.096)
	it.Offerings = []cloudprovider.Offering{{Zone: "z-a", CapacityType: karpv1.CapacityTypeReserved, Price: 1e-8,
		ReservationID: "cr-1", ReservationCapacity: 0, Available: true}}
	cloud := fakecloud.New()
	cloud.InstanceTypes = []*cloudprovider.InstanceType{it}
	np, kube := driftedPool(2, 0, nil, nil)
	recorder := events.NewFakeRecorder(10)
	c := NewController(kube, cloud, recorder, clocktesting.NewFakeClock(reconcileNow))

	res, err := c.Reconcile(context.Background(), np)
	if err != nil || res.RequeueAfter != CapacityRecheck {
		t.Fatalf("reconcile: %+v, %v; want no error and a recheck after %v", res, err, CapacityRecheck)
	}
	if got := claimNames(t, kube); len(got) != 0 {
		t.Fatalf("NodeClaims %v created with no room to launch them", got)
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning NoCompatibleInstanceTypes NodePool requirements filtered out all compatible available instance types: ") {
			t.Errorf("event %q, want upstream's NoCompatibleInstanceTypes warning with the reason", e)
		}
	default:
		t.Error("no event on the NodePool")
	}

	it.Offerings[0].ReservationCapacity = 2
	res, err = c.Reconcile(context.Background(), np)
	if err != nil || res.RequeueAfter == CapacityRecheck {
		t.Fatalf("reconcile with the slots free: %+v, %v", res, err)
	}
	if got := claimNames(t, kube); len(got) != 2 {
		t.Errorf("NodeClaims %v, want the pool's 2 launched once the reservation has room", got)
	}
}

// claimNames are the names of the NodeClaims the client holds.
func claimNames(t *testing.T, kube client.Reader) []string {
	t.Helper()
	var list karpv1.NodeClaimList
	if err := kube.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nc := range list.Items {
		names = append(names, nc.Name)
	}
	return names
}
