package solver

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
)

// Every solve of random inputs is checked by a validator that shares no code with the solver
// (its own label matching, resource sums and topology counts): each pod is placed once or
// reported unschedulable; a NodeClaim's instance type and offering are available, allowed by
// its requirements and the cheapest of its types; its pods and the DaemonSets fit that type;
// each pod's node selector, required node affinity and tolerations hold on the node it will
// be; required hostname anti-affinity and zone spreads hold; NodePool limits hold. The same
// input solved with the solver's memos off gives the same NodeClaims.
func TestSolvePropertiesOnRandomInputs(t *testing.T) {
	catalog := ec2Catalog(t)
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		in := randomInput(rng, catalog)
		res, err := Solve(in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, problem := range validate(in, res) {
			t.Errorf("seed %d: %s", seed, problem)
		}
		memoize = false
		plain, err := Solve(randomInput(rand.New(rand.NewPCG(uint64(seed), 7)), catalog))
		memoize = true
		if err != nil {
			t.Fatalf("seed %d without memos: %v", seed, err)
		}
		if a, b := summary(res), summary(plain); a != b {
			t.Errorf("seed %d: the memos changed the solve:\nwith    %s\nwithout %s", seed, a, b)
		}
	}
}

var propZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// randomInput is one to three NodePools over a random slice of the catalog, and 20 to 300
// pods of a few workloads with random requests, selectors, tolerations, anti-affinity and
// zone spreads.
func randomInput(rng *rand.Rand, catalog []*cloudprovider.InstanceType) *Input {
	in := &Input{}
	families := []string{"m5", "c5", "r5", "m6g", "c6g", "t3", "m7i", "c7i"}
	for i := range 1 + rng.IntN(3) {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-%d", i)}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
			ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{"pool": strconv.Itoa(i)}}}}}
		if w := int32(rng.IntN(3)); w > 0 {
			np.Spec.Weight = &w
		}
		var fams []string
		for _, f := range families {
			if rng.IntN(2) == 0 {
				fams = append(fams, f)
			}
		}
		if len(fams) > 0 {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: fams})
		}
		if rng.IntN(3) == 0 {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}})
		}
		if rng.IntN(3) == 0 {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
		}
		if rng.IntN(3) == 0 {
			np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(strconv.Itoa(40 + rng.IntN(200)))}
		}
		var types []*cloudprovider.InstanceType
		for _, it := range catalog {
			if rng.IntN(4) == 0 {
				types = append(types, it)
			}
		}
		overhead := corev1.ResourceList{}
		if rng.IntN(2) == 0 {
			overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
		}
		in.NodePools = append(in.NodePools, &NodePool{NodePool: np, InstanceTypes: types, DaemonSetOverhead: overhead})
	}
	for w := range 2 + rng.IntN(5) {
		app := fmt.Sprintf("app-%d", w)
		cpu := []string{"100m", "250m", "500m", "1", "2", "3500m", "7"}[rng.IntN(7)]
		mem := []string{"128Mi", "512Mi", "1Gi", "3Gi", "8Gi", "30Gi"}[rng.IntN(6)]
		var mods []func(*corev1.Pod)
		if rng.IntN(3) == 0 {
			arch := []string{"amd64", "arm64"}[rng.IntN(2)]
			mods = append(mods, func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.LabelArch: arch} })
		}
		zonal := rng.IntN(4) == 0
		if zonal {
			zone := propZones[rng.IntN(3)]
			mods = append(mods, func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}
			})
		}
		if rng.IntN(2) == 0 {
			mods = append(mods, func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
			})
		}
		switch rng.IntN(4) {
		case 0:
			mods = append(mods, func(p *corev1.Pod) {
				if p.Spec.Affinity == nil {
					p.Spec.Affinity = &corev1.Affinity{}
				}
				p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}
			})
		case 1:
			if !zonal {
				mods = append(mods, func(p *corev1.Pod) {
					p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: karpv1.LabelTopologyZone,
						WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
				})
			}
		}
		tmpl := func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": app}
			for _, m := range mods {
				m(p)
			}
		}
		for i := range 5 + rng.IntN(200) {
			p := pod(fmt.Sprintf("%s-%d", app, i), cpu, mem, tmpl)
			p.UID = types.UID(p.Name)
			in.Pods = append(in.Pods, p)
		}
	}
	return in
}

// validate checks a result against the input without the solver's code.
func validate(in *Input, res *Result) []string {
	var problems []string
	bad := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }
	seen := map[*corev1.Pod]int{}
	for _, c := range res.NodeClaims {
		for _, p := range c.Pods {
			seen[p]++
		}
	}
	for _, ps := range res.Existing {
		for _, p := range ps {
			seen[p]++
		}
	}
	for _, u := range res.Unschedulable {
		seen[u.Pod]++
	}
	for _, p := range in.Pods {
		if seen[p] != 1 {
			bad("pod %s decided %d times", p.Name, seen[p])
		}
	}
	poolOf := map[string]*NodePool{}
	for _, np := range in.NodePools {
		poolOf[np.NodePool.Name] = np
	}
	usedCPU := map[string]int64{}
	spread := map[string]map[string]int{}
	for _, c := range res.NodeClaims {
		np := poolOf[c.NodePool]
		if np == nil || c.InstanceType == nil {
			bad("NodeClaim of pool %q without a pool or instance type", c.NodePool)
			continue
		}
		it, o := c.InstanceType, c.Offering
		if !slices.Contains(np.InstanceTypes, it) || !slices.Contains(c.InstanceTypes, it) {
			bad("%s: instance type %s is not its pool's or not among its types", c.Hostname, it.Name)
		}
		found := false
		for _, off := range it.Offerings {
			found = found || (off == o && off.Available)
		}
		if !found {
			bad("%s: offering %+v is not an available offering of %s", c.Hostname, o, it.Name)
		}
		// The node's labels: the pool's template labels, the type's, the offering's.
		labels := map[string]string{karpv1.NodePoolLabelKey: np.NodePool.Name, karpv1.LabelTopologyZone: o.Zone, karpv1.CapacityTypeLabelKey: o.CapacityType,
			corev1.LabelHostname: c.Hostname}
		for k, v := range np.NodePool.Spec.Template.Labels {
			labels[k] = v
		}
		for k, v := range it.Labels {
			labels[k] = v
		}
		for _, r := range np.NodePool.Spec.Template.Spec.Requirements {
			if !matches(labels, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}) {
				bad("%s: %s/%s/%s breaks its NodePool's requirement %s %s %v", c.Hostname, it.Name, o.Zone, o.CapacityType, r.Key, r.Operator, r.Values)
			}
		}
		// The cheapest of its types (within the solve's own choice of types).
		for _, other := range c.InstanceTypes {
			for _, off := range other.Offerings {
				if off.Available && off.Price < o.Price && allows(c, karpv1.LabelTopologyZone, off.Zone) && allows(c, karpv1.CapacityTypeLabelKey, off.CapacityType) && other != it {
					bad("%s: %s at %v is not the cheapest of its types: %s/%s/%s at %v", c.Hostname, it.Name, o.Price, other.Name, off.Zone, off.CapacityType, off.Price)
				}
			}
		}
		// Resources: the pods and the DaemonSets fit the type's allocatable.
		var cpu, mem int64
		for _, q := range []corev1.ResourceList{np.DaemonSetOverhead} {
			cpu += q.Cpu().MilliValue()
			mem += q.Memory().Value()
		}
		for _, p := range c.Pods {
			for _, ct := range p.Spec.Containers {
				cpu += ct.Resources.Requests.Cpu().MilliValue()
				mem += ct.Resources.Requests.Memory().Value()
			}
		}
		alloc := it.Allocatable()
		if cpu > alloc.Cpu().MilliValue() || mem > alloc.Memory().Value() || int64(len(c.Pods)) > alloc.Pods().Value() {
			bad("%s: %d pods need %dm cpu, %d memory; %s has %v", c.Hostname, len(c.Pods), cpu, mem, it.Name, alloc)
		}
		usedCPU[np.NodePool.Name] += it.Capacity.Cpu().MilliValue()
		validatePods(c, labels, np, spread, bad)
	}
	for app, byZone := range spread {
		lo, hi := -1, 0
		for _, z := range propZones {
			n := byZone[z]
			if lo < 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
		// Some zones may offer no type the pods' pools allow; a skew over 1 is only checked
		// where every zone got some.
		if lo > 0 && hi-lo > 1 {
			bad("%s spreads %v over the zones, a skew over 1", app, byZone)
		}
	}
	for _, np := range in.NodePools {
		if limit, ok := np.NodePool.Spec.Limits[corev1.ResourceCPU]; ok && usedCPU[np.NodePool.Name] > limit.MilliValue() {
			bad("NodePool %s launches %dm cpu over its limit %v", np.NodePool.Name, usedCPU[np.NodePool.Name], limit.String())
		}
	}
	return problems
}

// tolerates is a toleration of a taint, as the API defines it.
func tolerates(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key == "" {
		return tol.Operator == corev1.TolerationOpExists
	}
	if tol.Key != t.Key {
		return false
	}
	return tol.Operator == corev1.TolerationOpExists || tol.Value == t.Value
}

// allows is whether the NodeClaim's requirements allow a value of an offering key.
func allows(c *NodeClaim, key, value string) bool {
	r, ok := c.Requirements[key]
	return !ok || r.Has(value)
}

// validatePods checks the pods of one NodeClaim on the node's labels: selectors, required
// node affinity, tolerations, hostname anti-affinity; it counts the spread pods by zone.
func validatePods(c *NodeClaim, labels map[string]string, np *NodePool, spread map[string]map[string]int, bad func(string, ...any)) {
	o := c.Offering
	apps := map[string]int{}
	for _, p := range c.Pods {
		for k, v := range p.Spec.NodeSelector {
			if labels[k] != v {
				bad("%s: pod %s selects %s=%s, the node has %q", c.Hostname, p.Name, k, v, labels[k])
			}
		}
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			ok := false
			for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				all := true
				for _, r := range term.MatchExpressions {
					all = all && matches(labels, r)
				}
				ok = ok || all
			}
			if !ok {
				bad("%s: pod %s's required node affinity fails on %v", c.Hostname, p.Name, labels)
			}
		}
		for _, taint := range np.NodePool.Spec.Template.Spec.Taints {
			tolerated := false
			for _, tol := range p.Spec.Tolerations {
				tolerated = tolerated || tolerates(tol, taint)
			}
			if !tolerated {
				bad("%s: pod %s does not tolerate %v", c.Hostname, p.Name, taint)
			}
		}
		app := p.Labels["app"]
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			apps[app]++
			if apps[app] > 1 {
				bad("%s: two pods of %s despite their hostname anti-affinity", c.Hostname, app)
			}
		}
		if len(p.Spec.TopologySpreadConstraints) > 0 {
			if spread[app] == nil {
				spread[app] = map[string]int{}
			}
			spread[app][o.Zone]++
		}
	}
}

// matches is a node selector requirement on labels, as the API defines it.
func matches(labels map[string]string, r corev1.NodeSelectorRequirement) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || len(r.Values) != 1 {
			return false
		}
		bound, err := strconv.ParseInt(r.Values[0], 10, 64)
		if err != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return n > bound
		}
		return n < bound
	}
	return false
}

// summary is a result as text: each NodeClaim's pool, type, offering and pods, and the
// unschedulable pods.
func summary(r *Result) string {
	var out []string
	for _, c := range r.NodeClaims {
		var names []string
		for _, p := range c.Pods {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		out = append(out, fmt.Sprintf("%s:%s/%s/%s@%v%v", c.NodePool, c.InstanceType.Name, c.Offering.Zone, c.Offering.CapacityType, c.Offering.Price, names))
	}
	for _, u := range r.Unschedulable {
		out = append(out, "unschedulable:"+u.Pod.Name)
	}
	return fmt.Sprint(out)
}
