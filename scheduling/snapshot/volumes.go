package snapshot

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// volumes finds what a pod's PersistentVolumeClaims require of its node
// (docs/scheduling.md, "Volumes"): the node affinity of the PersistentVolume a claim is bound
// to (a zonal disk, a local volume), or for a claim not bound yet, its StorageClass's
// allowedTopologies. As kube-scheduler's volume binding does with ORed terms, the first term
// of each is taken; the requirements of all the pod's claims add up.
type volumes struct {
	claims  map[string]*corev1.PersistentVolumeClaim
	pvs     map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
	// defaultClass is the StorageClass marked default, for claims that name none.
	defaultClass *storagev1.StorageClass
}

// DefaultStorageClassAnnotation marks the StorageClass of claims that name none.
const DefaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"

func indexVolumes(objs *Objects) volumes {
	v := volumes{claims: make(map[string]*corev1.PersistentVolumeClaim, len(objs.PersistentVolumeClaims)),
		pvs: make(map[string]*corev1.PersistentVolume, len(objs.PersistentVolumes)), classes: map[string]*storagev1.StorageClass{}}
	for _, c := range objs.PersistentVolumeClaims {
		v.claims[namespaced(c.Namespace, c.Name)] = c
	}
	for _, pv := range objs.PersistentVolumes {
		v.pvs[pv.Name] = pv
	}
	for _, sc := range objs.StorageClasses {
		v.classes[sc.Name] = sc
		if sc.Annotations[DefaultStorageClassAnnotation] == "true" {
			v.defaultClass = sc
		}
	}
	return v
}

func namespaced(namespace, name string) string {
	if namespace == "" {
		namespace = corev1.NamespaceDefault
	}
	return namespace + "/" + name
}

// requirements are the node requirements of the pod's volumes; an error names the claim or
// class that is missing, for a pod that cannot be placed until it exists.
func (v volumes) requirements(p *corev1.Pod) ([]corev1.NodeSelectorRequirement, error) {
	var out []corev1.NodeSelectorRequirement
	for i := range p.Spec.Volumes {
		vol := &p.Spec.Volumes[i]
		name := scheduling.ClaimName(p, vol)
		if name == "" {
			continue
		}
		var className *string
		claim := v.claims[namespaced(p.Namespace, name)]
		switch {
		case claim != nil && claim.Spec.VolumeName != "":
			pv := v.pvs[claim.Spec.VolumeName]
			if pv == nil {
				return nil, fmt.Errorf("persistentvolume %s of claim %s not found", claim.Spec.VolumeName, namespaced(p.Namespace, name))
			}
			if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil && len(a.Required.NodeSelectorTerms) > 0 {
				out = append(out, a.Required.NodeSelectorTerms[0].MatchExpressions...)
			}
			continue
		case claim != nil:
			className = claim.Spec.StorageClassName
		case vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil:
			// The ephemeral volume controller creates the claim from the template.
			className = vol.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
		default:
			return nil, fmt.Errorf("persistentvolumeclaim %s not found", namespaced(p.Namespace, name))
		}
		sc, err := v.class(className, namespaced(p.Namespace, name))
		if err != nil {
			return nil, err
		}
		if sc != nil && len(sc.AllowedTopologies) > 0 {
			for _, e := range sc.AllowedTopologies[0].MatchLabelExpressions {
				out = append(out, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
			}
		}
	}
	return out, nil
}

// class is an unbound claim's StorageClass: the one it names, the default one when it names
// none, none when it names "" (a claim for a pre-provisioned volume).
func (v volumes) class(name *string, claim string) (*storagev1.StorageClass, error) {
	switch {
	case name == nil:
		return v.defaultClass, nil
	case *name == "":
		return nil, nil
	}
	sc := v.classes[*name]
	if sc == nil {
		return nil, fmt.Errorf("storageclass %s of claim %s not found", *name, claim)
	}
	return sc, nil
}

// Unresolved is a pending pod whose volumes cannot be placed yet, with why.
type Unresolved struct {
	Pod    *corev1.Pod
	Reason string
}

// hasClaims reports whether any of the pod's volumes is a claim.
func hasClaims(p *corev1.Pod) bool {
	for i := range p.Spec.Volumes {
		if scheduling.ClaimName(p, &p.Spec.Volumes[i]) != "" {
			return true
		}
	}
	return false
}

// resolveVolumes fills VolumeRequirements and PodVolumes for every pod with claims, and
// returns the pods whose claims cannot be resolved yet.
func (s *Snapshot) resolveVolumes(objs *Objects) map[*corev1.Pod]error {
	s.VolumeRequirements = map[string][]corev1.NodeSelectorRequirement{}
	s.PodVolumes = map[string]scheduling.Volumes{}
	vols := indexVolumes(objs)
	failed := map[*corev1.Pod]error{}
	for _, p := range objs.Pods {
		if !hasClaims(p) || scheduling.IsTerminal(p) {
			continue
		}
		key := namespaced(p.Namespace, p.Name)
		if v := vols.attached(p); len(v) > 0 {
			s.PodVolumes[key] = v
		}
		reqs, err := vols.requirements(p)
		if err != nil {
			failed[p] = err
			continue
		}
		if len(reqs) > 0 {
			s.VolumeRequirements[key] = reqs
		}
	}
	return failed
}

// leaveOutUnresolved takes out of Pods those whose claims cannot be resolved (Unresolved).
func (s *Snapshot) leaveOutUnresolved(failed map[*corev1.Pod]error) {
	if len(failed) == 0 {
		return
	}
	kept := make([]*corev1.Pod, 0, len(s.Pods))
	for _, p := range s.Pods {
		if err := failed[p]; err != nil {
			s.Unresolved = append(s.Unresolved, Unresolved{Pod: p, Reason: err.Error()})
			continue
		}
		kept = append(kept, p)
	}
	s.Pods = kept
}

// attached are the volumes the pod has attached to its node, by CSI driver: the driver of the
// PersistentVolume its claim is bound to, or of the StorageClass that will provision it.
// Claims stand for their volumes: pods that share a claim share the attachment.
func (v volumes) attached(p *corev1.Pod) scheduling.Volumes {
	var out scheduling.Volumes
	for i := range p.Spec.Volumes {
		vol := &p.Spec.Volumes[i]
		name := scheduling.ClaimName(p, vol)
		if name == "" {
			continue
		}
		key := namespaced(p.Namespace, name)
		driver := ""
		claim := v.claims[key]
		switch {
		case claim != nil && claim.Spec.VolumeName != "":
			if pv := v.pvs[claim.Spec.VolumeName]; pv != nil && pv.Spec.CSI != nil {
				driver = pv.Spec.CSI.Driver
			}
		case claim != nil:
			if sc, _ := v.class(claim.Spec.StorageClassName, key); sc != nil {
				driver = sc.Provisioner
			}
		case vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil:
			if sc, _ := v.class(vol.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName, key); sc != nil {
				driver = sc.Provisioner
			}
		}
		if driver == "" {
			continue
		}
		if out == nil {
			out = scheduling.Volumes{}
		}
		out[driver] = append(out[driver], key)
	}
	return out
}

// volumeLimits are the nodes' CSINode attach limits, by node and driver.
func volumeLimits(csiNodes []*storagev1.CSINode) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, cn := range csiNodes {
		for _, d := range cn.Spec.Drivers {
			if d.Allocatable == nil || d.Allocatable.Count == nil {
				continue
			}
			if out[cn.Name] == nil {
				out[cn.Name] = map[string]int{}
			}
			out[cn.Name][d.Name] = int(*d.Allocatable.Count)
		}
	}
	return out
}
