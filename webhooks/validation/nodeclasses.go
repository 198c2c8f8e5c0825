package validation

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/sets"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	awsv1 "github.com/karpenter-policy/karpenter/api/aws/v1"
	kwokv1alpha1 "github.com/karpenter-policy/karpenter/api/kwok/v1alpha1"
)

// EC2 limits on tags and user data.
const (
	maxTagKeyLength   = 128
	maxTagValueLength = 256
	maxTags           = 50
	maxUserDataBytes  = 16 * 1024
)

// EC2NodeClass validates a v1 EC2NodeClass against EC2's own limits.
func (v *Validator) EC2NodeClass(nc *awsv1.EC2NodeClass) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if len(nc.Spec.Tags) > maxTags {
		errs = append(errs, field.TooMany(spec.Child("tags"), len(nc.Spec.Tags), maxTags))
	}
	for k, val := range nc.Spec.Tags {
		if len(k) > maxTagKeyLength {
			errs = append(errs, field.TooLong(spec.Child("tags").Key(k), k, maxTagKeyLength))
		}
		if len(val) > maxTagValueLength {
			errs = append(errs, field.TooLong(spec.Child("tags").Key(k), val, maxTagValueLength))
		}
	}
	if nc.Spec.UserData != nil && len(*nc.Spec.UserData) > maxUserDataBytes {
		errs = append(errs, field.TooLong(spec.Child("userData"), "", maxUserDataBytes))
	}
	devices := sets.New[string]()
	for i, m := range nc.Spec.BlockDeviceMappings {
		p := spec.Child("blockDeviceMappings").Index(i)
		if m == nil {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		if m.DeviceName == nil || *m.DeviceName == "" {
			errs = append(errs, field.Required(p.Child("deviceName"), "every block device mapping names its device"))
		} else if devices.Has(*m.DeviceName) {
			errs = append(errs, field.Duplicate(p.Child("deviceName"), *m.DeviceName))
		} else {
			devices.Insert(*m.DeviceName)
		}
	}
	errs = append(errs, validateKubelet(spec.Child("kubelet"), nc.Spec.Kubelet)...)
	return errs
}

// KWOKNodeClass validates a KWOKNodeClass.
func (v *Validator) KWOKNodeClass(nc *kwokv1alpha1.KWOKNodeClass) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if c := nc.Spec.Catalog; c != "" && c != "embedded" && c != "upstream" && !filepath.IsAbs(c) {
		errs = append(errs, field.Invalid(spec.Child("catalog"), c, `must be "embedded", "upstream" or the absolute path of a catalog file`))
	}
	for i, z := range nc.Spec.Zones {
		for _, msg := range k8svalidation.IsValidLabelValue(z) {
			errs = append(errs, field.Invalid(spec.Child("zones").Index(i), z, msg))
		}
	}
	if ic := nc.Spec.InsufficientCapacity; ic != nil {
		for i, o := range ic.Offerings {
			if o.Zone != "" {
				for _, msg := range k8svalidation.IsValidLabelValue(o.Zone) {
					errs = append(errs, field.Invalid(spec.Child("insufficientCapacity", "offerings").Index(i).Child("zone"), o.Zone, msg))
				}
			}
		}
	}
	return errs
}
