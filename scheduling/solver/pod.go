package solver

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/scheduling"
)

// PodKey is namespace/name.
func PodKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// podRequirements are the node requirements of one attempt for a pod: its node selector, one
// required node affinity term (they are ORed), and, unless relaxed, its preferred terms.
func podRequirements(p *corev1.Pod, term int, preferred []corev1.PreferredSchedulingTerm) scheduling.Requirements {
	rs := scheduling.Requirements{}
	for k, v := range p.Spec.NodeSelector {
		rs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		if req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; req != nil && term < len(req.NodeSelectorTerms) {
			for _, e := range req.NodeSelectorTerms[term].MatchExpressions {
				rs.Add(scheduling.NewRequirement(e.Key, e.Operator, e.Values...))
			}
		}
	}
	for _, t := range preferred {
		for _, e := range t.Preference.MatchExpressions {
			rs.Add(scheduling.NewRequirement(e.Key, e.Operator, e.Values...))
		}
	}
	return rs
}

// requiredTerms is how many ORed required node affinity terms a pod has (at least one).
func requiredTerms(p *corev1.Pod) int {
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if n := len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms); n > 0 {
			return n
		}
	}
	return 1
}

// preferredTerms are a pod's preferred node affinity terms, heaviest first.
func preferredTerms(p *corev1.Pod) []corev1.PreferredSchedulingTerm {
	if a := p.Spec.Affinity; a == nil || a.NodeAffinity == nil {
		return nil
	}
	out := append([]corev1.PreferredSchedulingTerm(nil), p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out
}

// hostPorts are the host ports a pod binds, as protocol/ip/port.
func hostPorts(p *corev1.Pod) []string {
	var out []string
	for _, cs := range [2][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			out = appendHostPorts(out, cs[i].Ports)
		}
	}
	return out
}

func appendHostPorts(out []string, ports []corev1.ContainerPort) []string {
	for _, port := range ports {
		if port.HostPort == 0 {
			continue
		}
		proto := port.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		ip := port.HostIP
		if ip == "" {
			ip = "0.0.0.0"
		}
		out = append(out, fmt.Sprintf("%s/%s/%d", proto, ip, port.HostPort))
	}
	return out
}

// portsConflict returns a wanted host port already in use (0.0.0.0 conflicts with any IP).
func portsConflict(used map[string]bool, want []string) string {
	for _, w := range want {
		if used[w] {
			return w
		}
		proto, rest, _ := strings.Cut(w, "/")
		ip, port, _ := strings.Cut(rest, "/")
		for u := range used {
			uproto, urest, _ := strings.Cut(u, "/")
			uip, uport, _ := strings.Cut(urest, "/")
			if uproto == proto && uport == port && (ip == "0.0.0.0" || uip == "0.0.0.0") {
				return w
			}
		}
	}
	return ""
}

// PodRequirements are the node requirements of the pod's nodeSelector and first required
// node affinity term, without preferences.
func PodRequirements(p *corev1.Pod) scheduling.Requirements { return podRequirements(p, 0, nil) }
