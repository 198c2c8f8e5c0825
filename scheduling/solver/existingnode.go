package solver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/scheduling"
)

type existing struct {
	node      *scheduling.Node
	reqs      scheduling.Requirements
	available corev1.ResourceList
	ports     map[string]bool
	placed    []*corev1.Pod
	// volumes count what the node attaches against its VolumeLimits.
	volumes *scheduling.Attachments
}

func (e *existing) labelsWithHostname() map[string]string {
	if _, ok := e.node.Labels[corev1.LabelHostname]; ok {
		return e.node.Labels
	}
	l := map[string]string{corev1.LabelHostname: e.node.Name}
	for k, v := range e.node.Labels {
		l[k] = v
	}
	return l
}

func (e *existing) domain(key string) (string, bool) {
	v, ok := e.labelsWithHostname()[key]
	return v, ok
}

func (s *solver) tryExisting(e *existing, p *corev1.Pod, requests corev1.ResourceList, reqs scheduling.Requirements, strict bool) error {
	if t := scheduling.Untolerated(p, e.node.Taints, strict); t != nil {
		return fmt.Errorf("taint %s not tolerated", scheduling.TaintString(t))
	}
	if err := e.reqs.Compatible(reqs); err != nil {
		return err
	}
	if ok, r := scheduling.Fits(requests, e.available); !ok {
		return notEnough(r)
	}
	ports := hostPorts(p)
	if c := portsConflict(e.ports, ports); c != "" {
		return fmt.Errorf("host port %s in use", c)
	}
	vols := s.in.PodVolumes[PodKey(p)]
	if ok, driver := e.volumes.Fits(vols); !ok {
		return fmt.Errorf("volume limit of %s reached", driver)
	}
	if _, err := s.topo.choose(p, strict, reqs, func(key string) []string {
		if v, ok := e.domain(key); ok {
			return []string{v}
		}
		return nil
	}); err != nil {
		return err
	}
	e.available = scheduling.Subtract(e.available, requests)
	for _, hp := range ports {
		e.ports[hp] = true
	}
	e.placed = append(e.placed, p)
	e.volumes.Add(vols)
	s.topo.count(p, e.domain, nil)
	return nil
}
