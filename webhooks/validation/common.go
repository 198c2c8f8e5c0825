// Package validation holds the typed validators that check what CEL in the CRDs cannot say:
// cron schedules, label domains and values, money
// amounts, glob patterns, Rego that compiles and whose tests pass. Each returns a
// field.ErrorList naming the fields; the validating webhooks and `karpenterctl validate` call
// the same functions. Nothing here does I/O.
package validation

import (
	"fmt"
	"math/big"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/policies"
)

// Validator validates this project's objects. It holds settings only, no state; it is a type
// so that the webhooks and the CLI share one value and its methods.
type Validator struct {
	// MaxExceptionDuration is how far out a CapacityException may expire when it is written
	// (0: DefaultMaxExceptionDuration; the manager's --max-exception-duration).
	MaxExceptionDuration time.Duration
	// Now is the clock a CapacityException's expiresAt is checked against (nil: the system
	// clock; karpenterctl's --now).
	Now func() time.Time
}

func (v *Validator) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Validator) maxExceptionDuration() time.Duration {
	if v.MaxExceptionDuration > 0 {
		return v.MaxExceptionDuration
	}
	return DefaultMaxExceptionDuration
}

// New returns a Validator.
func New() *Validator { return &Validator{} }

// cronParser accepts the five-field form and descriptors such as @daily, as upstream
// Karpenter's budgets do; times are UTC.
var cronParser = policies.CronParser

func validateSchedule(p *field.Path, schedule string) field.ErrorList {
	if _, err := cronParser.Parse(schedule); err != nil {
		return field.ErrorList{field.Invalid(p, schedule, fmt.Sprintf("not a cron schedule: %v", err))}
	}
	if strings.HasPrefix(schedule, "TZ=") || strings.HasPrefix(schedule, "CRON_TZ=") {
		return field.ErrorList{field.Invalid(p, schedule, "time zones are not supported; schedules are UTC")}
	}
	return nil
}

func validatePositiveDuration(p *field.Path, d *metav1.Duration) field.ErrorList {
	if d != nil && d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be greater than zero")}
	}
	return nil
}

// validateNodeClassRef checks that a node class is referenced. Its group, kind and name are
// checked by the CRD; a kind this build cannot launch with is accepted, as upstream does, and
// the NodePool's NodeClassReady condition says so (NodeClassNotSupported).
func (v *Validator) validateNodeClassRef(p *field.Path, ref *karpv1.NodeClassReference) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	return nil
}

// validateLabelKey checks a label key's syntax and that its domain is not restricted.
func validateLabelKey(p *field.Path, key string, allowWellKnown bool) field.ErrorList {
	for _, msg := range k8svalidation.IsQualifiedName(key) {
		return field.ErrorList{field.Invalid(p, key, msg)}
	}
	if karpv1.RestrictedLabels.Has(key) {
		return field.ErrorList{field.Invalid(p, key, fmt.Sprintf("label %q is restricted: Karpenter or the kubelet sets it", key))}
	}
	if allowWellKnown && karpv1.WellKnownLabels.Has(key) {
		return nil
	}
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return nil
	}
	for restricted := range karpv1.RestrictedLabelDomains {
		if domain == restricted || strings.HasSuffix(domain, "."+restricted) {
			return field.ErrorList{field.Invalid(p, key, fmt.Sprintf("label domain %q is restricted", restricted))}
		}
	}
	return nil
}

var integer = regexp.MustCompile(`^[0-9]+$`)

// validateRequirements checks node selector requirements with minValues.
func validateRequirements(p *field.Path, reqs []karpv1.NodeSelectorRequirementWithMinValues) field.ErrorList {
	var errs field.ErrorList
	for i, r := range reqs {
		rp := p.Index(i)
		errs = append(errs, validateLabelKey(rp.Child("key"), r.Key, true)...)
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), "operator In needs at least one value"))
			}
			for j, value := range r.Values {
				for _, msg := range k8svalidation.IsValidLabelValue(value) {
					errs = append(errs, field.Invalid(rp.Child("values").Index(j), value, msg))
				}
			}

		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs = append(errs, field.Forbidden(rp.Child("values"), fmt.Sprintf("operator %s takes no values", r.Operator)))
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
			if len(r.Values) != 1 || !integer.MatchString(r.Values[0]) {
				errs = append(errs, field.Invalid(rp.Child("values"), r.Values, fmt.Sprintf("operator %s needs exactly one non-negative integer", r.Operator)))
			} else if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
				errs = append(errs, field.Invalid(rp.Child("values").Index(0), r.Values[0], "integer out of range"))
			}
		default:
			errs = append(errs, field.NotSupported(rp.Child("operator"), string(r.Operator),
				[]string{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"}))
		}
		if r.MinValues != nil {
			switch {
			case *r.MinValues < 1:
				errs = append(errs, field.Invalid(rp.Child("minValues"), *r.MinValues, "must be at least 1"))
			case r.Operator == corev1.NodeSelectorOpIn && *r.MinValues > len(sets.New(r.Values...)):
				errs = append(errs, field.Invalid(rp.Child("minValues"), *r.MinValues,
					fmt.Sprintf("is above the %d distinct values listed", len(sets.New(r.Values...)))))
			case r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpExists:
				errs = append(errs, field.Forbidden(rp.Child("minValues"), "only valid with operators In and Exists"))
			}
		}
	}
	return errs
}

// validateTaints checks taint keys, values and effects, and duplicates.
func validateTaints(p *field.Path, taints []corev1.Taint) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, t := range taints {
		tp := p.Index(i)
		for _, msg := range k8svalidation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		if t.Value != "" {
			for _, msg := range k8svalidation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(tp.Child("value"), t.Value, msg))
			}
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), string(t.Effect), []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
		}
		id := t.Key + ":" + string(t.Effect)
		if seen.Has(id) {
			errs = append(errs, field.Duplicate(tp, id))
		}
		seen.Insert(id)
	}
	return errs
}

// validateMoney checks a decimal USD amount is positive.
func validateMoney(p *field.Path, amount string) field.ErrorList {
	r, ok := new(big.Rat).SetString(amount)
	if !ok || strings.ContainsAny(amount, "eE/+-") {
		return field.ErrorList{field.Invalid(p, amount, "must be a decimal amount of US dollars, e.g. 13.00")}
	}
	if r.Sign() <= 0 {
		return field.ErrorList{field.Invalid(p, amount, "must be greater than zero")}
	}
	return nil
}

// validateGlob checks an instance family or type pattern such as m*, g5 or *metal*.
func validateGlob(p *field.Path, pattern string) field.ErrorList {
	if _, err := path.Match(pattern, ""); err != nil {
		return field.ErrorList{field.Invalid(p, pattern, "not a valid glob pattern")}
	}
	if strings.Trim(pattern, "*?") == "" && pattern != "*" {
		return field.ErrorList{field.Invalid(p, pattern, "matches every family; use \"*\" if that is meant")}
	}
	return nil
}
