package expiration

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-policy/karpenter/api/install"
	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// The NodeClaim's own expireAfter decides: it is deleted once that has passed since its
// creation, and a NodeClaim without one, or not from a NodePool, is left alone.
func TestExpirationFollowsTheNodeClaimsOwnExpireAfter(t *testing.T) {
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	claim := func(name string, expireAfter string, fromPool bool) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{}}}
		if fromPool {
			nc.Labels[karpv1.NodePoolLabelKey] = "general"
		}
		nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration(expireAfter)
		return nc
	}
	for _, tc := range []struct {
		name       string
		nc         *karpv1.NodeClaim
		after      time.Duration
		deleted    bool
		requeueFor time.Duration
	}{
		{name: "due", nc: claim("due", "1h", true), after: time.Hour, deleted: true},
		{name: "not yet due", nc: claim("early", "1h", true), after: 40 * time.Minute, requeueFor: 20 * time.Minute},
		{name: "never", nc: claim("never", "Never", true), after: 1000 * time.Hour},
		{name: "not from a NodePool", nc: claim("foreign", "1h", false), after: 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(install.NewScheme()).WithObjects(tc.nc).Build()
			ctl := NewController(c, clocktesting.NewFakeClock(created.Add(tc.after)))
			res, err := ctl.Reconcile(context.Background(), tc.nc)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Get(context.Background(), client.ObjectKeyFromObject(tc.nc), &karpv1.NodeClaim{})
			if deleted := apierrors.IsNotFound(err); deleted != tc.deleted {
				t.Fatalf("deleted %t, want %t (%v)", deleted, tc.deleted, err)
			}
			if res.RequeueAfter != tc.requeueFor {
				t.Fatalf("requeue after %s, want %s", res.RequeueAfter, tc.requeueFor)
			}
		})
	}
}
