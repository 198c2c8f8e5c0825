package methods

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// A NodeClaim expires by its own expireAfter, not its NodePool's current one: removing the
// NodePool's does not save it, and a node without a NodeClaim takes the template's.
func TestExpiresAtIsTheNodeClaimsOwn(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	pool := func(d string) *karpv1.NodePool {
		np := &karpv1.NodePool{}
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration(d)
		return np
	}
	claim := func(d string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration(d)
		return nc
	}
	for name, tc := range map[string]struct {
		cand *Candidate
		want time.Time
	}{
		"the NodePool's removed later":   {&Candidate{NodePool: pool("Never"), NodeClaim: claim("720h"), CreatedAt: created}, created.Add(720 * time.Hour)},
		"the NodePool's shortened later": {&Candidate{NodePool: pool("1h"), NodeClaim: claim("Never"), CreatedAt: created}, time.Time{}},
		"no NodeClaim":                   {&Candidate{NodePool: pool("24h"), CreatedAt: created}, created.Add(24 * time.Hour)},
	} {
		if got := tc.cand.ExpiresAt(); !got.Equal(tc.want) {
			t.Errorf("%s: expires at %s, want %s", name, got, tc.want)
		}
	}
}
