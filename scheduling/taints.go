package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Tolerates reports whether the pod tolerates every taint, as kube-scheduler decides;
// PreferNoSchedule taints count only with strict.
func Tolerates(p *corev1.Pod, taints []corev1.Taint, strict bool) bool {
	return Untolerated(p, taints, strict) == nil
}

// Untolerated is the first taint the pod does not tolerate (PreferNoSchedule ones only with
// strict), nil when it tolerates them all.
func Untolerated(p *corev1.Pod, taints []corev1.Taint, strict bool) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !strict {
			continue
		}
		if !ToleratesTaint(p, t) {
			return t
		}
	}
	return nil
}

// ToleratesTaint reports whether one of the pod's tolerations tolerates the taint.
func ToleratesTaint(p *corev1.Pod, t *corev1.Taint) bool {
	for i := range p.Spec.Tolerations {
		if toleration(&p.Spec.Tolerations[i], t) {
			return true
		}
	}
	return false
}

// toleration reports whether a toleration tolerates a taint, as the scheduler decides: an
// empty key with Exists tolerates every taint (of the toleration's effect, when it names one).
func toleration(tol *corev1.Toleration, t *corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key == "" {
		return tol.Operator == corev1.TolerationOpExists
	}
	if tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return tol.Value == t.Value
	}
	return false
}

// TaintString is key[=value]:effect.
func TaintString(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}
