package static

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

func claims(n int) []*karpv1.NodeClaim {
	out := make([]*karpv1.NodeClaim, n)
	for i := range out {
		out[i] = &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nc-%d", i),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 1, 0, i, 0, 0, time.UTC))},
			Status: karpv1.NodeClaimStatus{NodeName: fmt.Sprintf("node-%d", i), ProviderID: fmt.Sprintf("fake://nc-%d", i)}}
	}
	return out
}

func names(ncs []*karpv1.NodeClaim) string {
	var out []string
	for _, nc := range ncs {
		out = append(out, nc.Name)
	}
	return strings.Join(out, ",")
}

func TestPlan(t *testing.T) {
	five := claims(5)
	unlaunched := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-new", CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC))}}
	for name, tc := range map[string]struct {
		s    Survey
		want string // "create N (why)", "delete a,b (why)", or "wait"/"idle"
	}{
		"too few: launch the rest":              {Survey{Desired: 3, Active: five[:1]}, "create 2 (scaling up to replicas)"},
		"at size: nothing":                      {Survey{Desired: 3, Active: five[:3]}, "idle"},
		"at size, one initializing: look again": {Survey{Desired: 3, Active: five[:3], Uninitialized: 1}, "wait"},
		"too many: the emptiest nodes go, newest first": {Survey{Desired: 1, Active: five[:4], Pods: map[string]int{"node-0": 3, "node-1": 0, "node-2": 5, "node-3": 0}},
			"delete nc-3,nc-1,nc-0 (scaling down to replicas)"},
		"drifted at size: surge a replacement":               {Survey{Desired: 3, Active: five[:3], Drifted: five[:1], DriftAllowed: 1}, "create 1 (replacing a drifted node)"},
		"drifted, the replacement initializing: wait":        {Survey{Desired: 3, Active: five[:4], Drifted: five[:1], DriftAllowed: 1, Uninitialized: 1}, "wait"},
		"drifted, the replacement up: the drifted node goes": {Survey{Desired: 3, Active: five[:4], Drifted: five[:1], DriftAllowed: 1}, "delete nc-0 (replacing a drifted node)"},
		"drifted but the budget allows none: wait":           {Survey{Desired: 3, Active: five[:3], Drifted: five[:1]}, "wait"},
		"scaling down removes empty nodes first": {Survey{Desired: 2, Active: five, Drifted: five[4:5], DriftAllowed: 1, Pods: map[string]int{"node-0": 0, "node-1": 0, "node-2": 0, "node-3": 9, "node-4": 9}},
			"delete nc-2,nc-1,nc-0 (scaling down to replicas)"},
		"then stale ones, then the fewest pods": {Survey{Desired: 3, Active: five, Drifted: five[3:4], DriftAllowed: 1, Pods: map[string]int{"node-0": 9, "node-1": 9, "node-2": 9, "node-3": 9, "node-4": 5}},
			"delete nc-3,nc-4 (scaling down to replicas)"},
		"never a protected node: 3 -> 1 takes the other two": {Survey{Desired: 1, Active: five[:3], Protected: map[*karpv1.NodeClaim]bool{five[2]: true}, Pods: map[string]int{"node-0": 1, "node-1": 1, "node-2": 0}},
			"delete nc-1,nc-0 (scaling down to replicas)"},
		"a NodeClaim not launched yet goes before an empty node": {Survey{Desired: 2, Active: []*karpv1.NodeClaim{five[0], five[1], unlaunched}, Pods: map[string]int{"node-0": 0, "node-1": 2}},
			"delete nc-new (scaling down to replicas)"},
		"only protected nodes over the size: wait": {Survey{Desired: 1, Active: five[:2], Protected: map[*karpv1.NodeClaim]bool{five[0]: true, five[1]: true}}, "wait"},
		"zero replicas: everything goes":           {Survey{Desired: 0, Active: five[:2]}, "delete nc-1,nc-0 (scaling down to replicas)"},
		// limits.nodes 5 with 4 replicas: upstream's "should not go over limit during
		// concurrent changes", where the second replacement came while the first replaced
		// node was still being deleted, and 6 NodeClaims existed.
		"drifted under the limit: surge a replacement": {Survey{Desired: 4, Limit: ptr.To(5), Active: five[:4], Drifted: five[:1], DriftAllowed: 4}, "create 1 (replacing a drifted node)"},
		"drifted at the limit, a replaced node still going: wait": {Survey{Desired: 4, Limit: ptr.To(5), Active: five[:4], Deleting: 1, Drifted: five[1:2], DriftAllowed: 4},
			"wait"},
		"too few, the limit counting the deleting: what it leaves": {Survey{Desired: 4, Limit: ptr.To(5), Active: five[:2], Deleting: 2}, "create 1 (scaling up to replicas)"},
		"too few, no room left under the limit: wait":              {Survey{Desired: 4, Limit: ptr.To(5), Active: five[:2], Deleting: 3}, "wait"},
		// replicas 3 under limits.nodes 3: a replacement would be a fourth node. Upstream
		// reports the drifted nodes its budget would let go as blocked.
		"drifted at the limit: blocked, as many as the budget allows": {Survey{Desired: 3, Limit: ptr.To(3), Active: five[:3], Drifted: five[:3], DriftAllowed: 2},
			"wait, blocked nc-0,nc-1 (" + WhyAtLimit + ")"},
		"drifted at the limit, the budget allowing none: wait": {Survey{Desired: 3, Limit: ptr.To(3), Active: five[:3], Drifted: five[:3]}, "wait"},
		"drifted at the limit, one initializing: wait":         {Survey{Desired: 3, Limit: ptr.To(3), Active: five[:3], Drifted: five[:1], DriftAllowed: 1, Uninitialized: 1}, "wait"},
		// TerminateFirstDrift (upstream's static-at-limit): the nodes the budget allows go
		// first; the pool refills once they are gone (the limit counts them until then).
		"terminate first at the limit: as many as the budget allows": {Survey{Desired: 3, Limit: ptr.To(3), Active: five[:3], Drifted: five[:3], DriftAllowed: 2, TerminateFirst: true},
			"delete nc-0,nc-1 (" + WhyTerminateFirst + ") [static-at-limit]"},
		"terminate first, the nodes going: wait for them":  {Survey{Desired: 3, Limit: ptr.To(3), Active: five[2:3], Deleting: 2, Drifted: five[2:3], DriftAllowed: 0, TerminateFirst: true}, "wait"},
		"terminate first, the nodes gone: refill":          {Survey{Desired: 3, Limit: ptr.To(3), Active: five[2:3], Drifted: five[2:3], DriftAllowed: 1, TerminateFirst: true}, "create 2 (scaling up to replicas)"},
		"terminate first under the limit: replaced first":  {Survey{Desired: 3, Limit: ptr.To(4), Active: five[:3], Drifted: five[:1], DriftAllowed: 1, TerminateFirst: true}, "create 1 (replacing a drifted node)"},
		"terminate first, the budget allowing none: wait":  {Survey{Desired: 3, Limit: ptr.To(3), Active: five[:3], Drifted: five[:3], TerminateFirst: true}, "wait"},
		"terminate first, a protected node is not drifted": {Survey{Desired: 2, Limit: ptr.To(2), Active: five[:2], Drifted: five[1:2], DriftAllowed: 2, TerminateFirst: true}, "delete nc-1 (" + WhyTerminateFirst + ") [static-at-limit]"},
		// Upstream's full reservations: the pool cannot launch; a node whose reservation slot
		// lets it goes first, the others are blocked.
		"cannot launch: the node freeing room goes first, the others blocked": {Survey{Desired: 3, Active: five[:3], Drifted: five[:3], DriftAllowed: 2, TerminateFirst: true,
			CannotLaunch: "no room", FreesRoom: map[*karpv1.NodeClaim]bool{five[2]: true}},
			"delete nc-2 (" + WhyTerminateFirst + ") [no-reserved-capacity], blocked nc-0 (static NodePool cannot stage a replacement: no room)"},
		"cannot launch, no node freeing room: all blocked": {Survey{Desired: 3, Active: five[:3], Drifted: five[:2], DriftAllowed: 3, TerminateFirst: true, CannotLaunch: "no room"},
			"wait, blocked nc-0,nc-1 (static NodePool cannot stage a replacement: no room)"},
	} {
		t.Run(name, func(t *testing.T) {
			a := Plan(tc.s)
			var got string
			switch {
			case a.Create > 0:
				got = fmt.Sprintf("create %d (%s)", a.Create, a.Why)
			case len(a.Delete) > 0:
				got = fmt.Sprintf("delete %s (%s)", names(a.Delete), a.Why)
				if a.TerminateFirst != "" {
					got += " [" + a.TerminateFirst + "]"
				}
			case a.Wait:
				got = "wait"
			default:
				got = "idle"
			}
			if len(a.Blocked) > 0 {
				got += fmt.Sprintf(", blocked %s (%s)", names(a.Blocked), a.BlockedWhy)
			}
			if got != tc.want {
				t.Errorf("plan %q, want %q", got, tc.want)
			}
		})
	}
}
