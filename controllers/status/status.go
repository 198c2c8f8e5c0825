// Package status is what the policy.karpenter.sh status controllers (controllers/policy,
// controllers/budget) share: conditions set for one generation, and a status write that
// retries on a conflict. It must not decide any status itself.
package status

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-policy/karpenter/controllers/ratelimit"
)

// Conditions sets a status's conditions for one generation.
type Conditions struct {
	List       *[]metav1.Condition
	Generation int64
}

// Set makes condition t True with reasonTrue, or False with reasonFalse.
func (c Conditions) Set(t string, ok bool, reasonTrue, reasonFalse, msg string) {
	s, reason := metav1.ConditionFalse, reasonFalse
	if ok {
		s, reason = metav1.ConditionTrue, reasonTrue
	}
	meta.SetStatusCondition(c.List, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.Generation})
}

// Write writes obj's status when changed, asks for a retry on a conflict, and otherwise
// comes back after refresh.
func Write(ctx context.Context, c client.Client, obj client.Object, changed bool, refresh time.Duration) (reconcile.Result, error) {
	if changed {
		if err := c.Status().Update(ctx, obj); err != nil {
			return ratelimit.Retry(err)
		}
	}
	return reconcile.Result{RequeueAfter: refresh}, nil
}
