package solver

import (
	corev1 "k8s.io/api/core/v1"
)

// res is a resource list as integers (cpu in millicores, the rest in units), so that the hot
// loop compares numbers instead of walking maps of Quantities.
type res struct {
	cpu, mem, pods int64
	ext            map[corev1.ResourceName]int64
}

func toRes(l corev1.ResourceList) res {
	var r res
	for k, q := range l {
		switch k {
		case corev1.ResourceCPU:
			r.cpu = q.MilliValue()
		case corev1.ResourceMemory:
			r.mem = q.Value()
		case corev1.ResourcePods:
			r.pods = q.Value()
		default:
			if r.ext == nil {
				r.ext = map[corev1.ResourceName]int64{}
			}
			r.ext[k] = q.MilliValue()
		}
	}
	return r
}

func (r res) plus(o res) res {
	out := res{cpu: r.cpu + o.cpu, mem: r.mem + o.mem, pods: r.pods + o.pods}
	if len(r.ext) > 0 || len(o.ext) > 0 {
		out.ext = make(map[corev1.ResourceName]int64, len(r.ext)+len(o.ext))
		for k, v := range r.ext {
			out.ext[k] += v
		}
		for k, v := range o.ext {
			out.ext[k] += v
		}
	}
	return out
}

// fitsIn reports whether r fits in capacity, naming the first resource that does not.
func (r res) fitsIn(capacity res) (bool, corev1.ResourceName) {
	switch {
	case r.cpu > capacity.cpu:
		return false, corev1.ResourceCPU
	case r.mem > capacity.mem:
		return false, corev1.ResourceMemory
	case r.pods > capacity.pods:
		return false, corev1.ResourcePods
	}
	for k, v := range r.ext {
		if v > 0 && v > capacity.ext[k] {
			return false, k
		}
	}
	return true, ""
}

// largest is the largest cpu, memory and pods of r and o (extended resources aside).
func (r res) largest(o res) res {
	return res{cpu: max(r.cpu, o.cpu), mem: max(r.mem, o.mem), pods: max(r.pods, o.pods)}
}
