package validation

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
)

// evictionSignals are the signals the kubelet acts on; it ignores any other key, which
// would silently drop the threshold a user set.
var evictionSignals = sets.New("memory.available", "nodefs.available", "nodefs.inodesFree",
	"imagefs.available", "imagefs.inodesFree", "pid.available")

// reservable are the resources the kubelet can reserve for the system and for itself.
var reservable = sets.New("cpu", "memory", "ephemeral-storage", "pid")

// ownedByKarpenter are kubelet fields Karpenter writes itself at bootstrap, so a value set
// here would be overwritten on the way to the node.
var ownedByKarpenter = map[string]string{
	"registerWithTaints": "Karpenter registers the node with the NodeClaim's taints and startup taints; set them on the NodePool",
}

// validateKubelet checks an EC2NodeClass's kubelet configuration: the kubelet's own type
// decodes it strictly (an unknown field or a wrong type is refused, which upstream reports
// only on the node class's status), and the rules that type cannot say hold.
func validateKubelet(p *field.Path, kc awsv1.KubeletConfiguration) field.ErrorList {
	if len(kc) == 0 {
		return nil
	}
	var errs field.ErrorList
	for name, why := range ownedByKarpenter {
		if _, set := kc[name]; set {
			errs = append(errs, field.Forbidden(p.Child(name), why))
		}
	}
	cfg, err := kc.Decode()
	if err != nil {
		errs = append(errs, field.Invalid(p, "", fmt.Sprintf("not a kubelet configuration (kubelet.config.k8s.io/v1beta1): %v", err)))
		if cfg == nil {
			return errs
		}
	}
	for name, m := range map[string]map[string]string{"kubeReserved": cfg.KubeReserved, "systemReserved": cfg.SystemReserved} {
		for k, v := range m {
			kp := p.Child(name).Key(k)
			if !reservable.Has(k) {
				errs = append(errs, field.NotSupported(kp, k, sets.List(reservable)))
			} else if q, err := resource.ParseQuantity(v); err != nil || q.Sign() < 0 {
				errs = append(errs, field.Invalid(kp, v, "must be a non-negative quantity"))
			}
		}
	}
	for name, m := range map[string]map[string]string{"evictionHard": cfg.EvictionHard, "evictionSoft": cfg.EvictionSoft} {
		for k, v := range m {
			kp := p.Child(name).Key(k)
			if !evictionSignals.Has(k) {
				errs = append(errs, field.NotSupported(kp, k, sets.List(evictionSignals)))
			} else if msg := evictionThreshold(v); msg != "" {
				errs = append(errs, field.Invalid(kp, v, msg))
			}
		}
	}
	for k, v := range cfg.EvictionSoftGracePeriod {
		kp := p.Child("evictionSoftGracePeriod").Key(k)
		if _, soft := cfg.EvictionSoft[k]; !soft {
			errs = append(errs, field.Invalid(kp, v, "has no matching evictionSoft threshold"))
		}
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			errs = append(errs, field.Invalid(kp, v, "must be a non-negative duration"))
		}
	}
	for k := range cfg.EvictionSoft {
		if _, ok := cfg.EvictionSoftGracePeriod[k]; !ok {
			errs = append(errs, field.Invalid(p.Child("evictionSoft").Key(k), cfg.EvictionSoft[k], "has no matching evictionSoftGracePeriod"))
		}
	}
	if cfg.MaxPods < 0 {
		errs = append(errs, field.Invalid(p.Child("maxPods"), cfg.MaxPods, "must not be negative"))
	}
	if cfg.PodsPerCore < 0 {
		errs = append(errs, field.Invalid(p.Child("podsPerCore"), cfg.PodsPerCore, "must not be negative"))
	}
	for name, v := range map[string]*int32{"imageGCHighThresholdPercent": cfg.ImageGCHighThresholdPercent, "imageGCLowThresholdPercent": cfg.ImageGCLowThresholdPercent} {
		if v != nil && (*v < 0 || *v > 100) {
			errs = append(errs, field.Invalid(p.Child(name), *v, "must be between 0 and 100"))
		}
	}
	if hi, lo := cfg.ImageGCHighThresholdPercent, cfg.ImageGCLowThresholdPercent; hi != nil && lo != nil && *hi <= *lo {
		errs = append(errs, field.Invalid(p.Child("imageGCHighThresholdPercent"), *hi,
			fmt.Sprintf("must be greater than imageGCLowThresholdPercent (%d)", *lo)))
	}
	return errs
}

// evictionThreshold checks a threshold is a percentage in [0,100] or a non-negative quantity,
// the two forms the kubelet accepts; it returns what is wrong, or "".
func evictionThreshold(v string) string {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		if f, err := strconv.ParseFloat(pct, 64); err != nil || f < 0 || f > 100 {
			return "must be a percentage between 0% and 100% or a quantity"
		}
		return ""
	}
	if q, err := resource.ParseQuantity(v); err != nil || q.Sign() < 0 {
		return "must be a percentage or a non-negative quantity"
	}
	return ""
}
