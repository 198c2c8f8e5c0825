package solver

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// The cases of upstream's scheduling suite ("Custom Constraints", "Well Known Labels",
// "Instance Type Compatibility"), written here against this solver: what a NodePool's
// requirements and labels and a pod's node selector and required node affinity together
// allow, and what they refuse with which reason.

// requirement is a NodePool requirement.
func requirement(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

// withRequirements adds requirements to a NodePool's template.
func withRequirements(reqs ...karpv1.NodeSelectorRequirementWithMinValues) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, reqs...)
	}
}

// withLabels sets a NodePool template's labels.
func withLabels(kv ...string) func(*karpv1.NodePool) {
	return func(np *karpv1.NodePool) {
		if np.Spec.Template.Labels == nil {
			np.Spec.Template.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			np.Spec.Template.Labels[kv[i]] = kv[i+1]
		}
	}
}

// selector sets a pod's node selector.
func selector(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

// requireAll sets one required node affinity term of several expressions (ANDed).
func requireAll(exprs ...corev1.NodeSelectorRequirement) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// bothCapacityTypes is a NodePool allowing Spot and on-demand.
func bothCapacityTypes(np *karpv1.NodePool) {
	np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}
}

// zonesOf are the zones a NodeClaim may launch in (its requirement, else its offering's).
func zonesOf(c *NodeClaim) []string {
	if r, ok := c.Requirements[karpv1.LabelTopologyZone]; ok && !r.Complement() {
		return r.Values()
	}
	return []string{c.Offering.Zone}
}

func TestWellKnownLabelsAndCustomConstraints(t *testing.T) {
	for name, tc := range map[string]struct {
		np  []func(*karpv1.NodePool)
		pod []func(*corev1.Pod)
		// want: the NodeClaim's instance type, zone and capacity type (as "type/zone/ct",
		// any part "" not checked); "" with because: the pod stays pending.
		want    string
		because string
	}{
		// Zones.
		"a zone the NodePool allows":          {pod: []func(*corev1.Pod){selector(karpv1.LabelTopologyZone, "z-b")}, want: "m6g.large/z-b/"},
		"a zone the NodePool leaves out":      {np: []func(*karpv1.NodePool){withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a"))}, pod: []func(*corev1.Pod){selector(karpv1.LabelTopologyZone, "z-b")}, because: "topology.kubernetes.io/zone"},
		"a zone no type offers":               {pod: []func(*corev1.Pod){selector(karpv1.LabelTopologyZone, "z-unknown")}, because: "topology.kubernetes.io/zone"},
		"zones NotIn leaves the third":        {pod: []func(*corev1.Pod){requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "z-a", "z-b"))}, want: "m6g.large/z-c/"},
		"zones In two of them":                {pod: []func(*corev1.Pod){requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-b", "z-c"))}, want: "m6g.large//"},
		"a zone the pod and the pool agree":   {np: []func(*karpv1.NodePool){withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a", "z-c"))}, pod: []func(*corev1.Pod){requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-b", "z-c"))}, want: "m6g.large/z-c/"},
		"zones pod and pool have none common": {np: []func(*karpv1.NodePool){withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a"))}, pod: []func(*corev1.Pod){requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpNotIn, "z-a"))}, because: "topology.kubernetes.io/zone"},
		// Capacity types.
		"Spot when the pod asks and the pool allows":   {np: []func(*karpv1.NodePool){bothCapacityTypes}, pod: []func(*corev1.Pod){selector(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot)}, want: "m6g.large/z-a/spot"},
		"on-demand when the pod asks":                  {np: []func(*karpv1.NodePool){bothCapacityTypes}, pod: []func(*corev1.Pod){selector(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand)}, want: "m6g.large/z-a/on-demand"},
		"Spot, the cheaper, when the pod says nothing": {np: []func(*karpv1.NodePool){bothCapacityTypes}, want: "m6g.large/z-a/spot"},
		"Spot the pool does not allow":                 {pod: []func(*corev1.Pod){selector(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot)}, because: "karpenter.sh/capacity-type"},
		"a capacity type nobody offers":                {np: []func(*karpv1.NodePool){bothCapacityTypes}, pod: []func(*corev1.Pod){selector(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeReserved)}, because: "karpenter.sh/capacity-type"},
		"NotIn Spot on a pool of both":                 {np: []func(*karpv1.NodePool){bothCapacityTypes}, pod: []func(*corev1.Pod){requireAll(expr(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpNotIn, karpv1.CapacityTypeSpot))}, want: "m6g.large//on-demand"},
		// Instance types, families, sizes, architecture, operating system.
		"an instance type by name":          {pod: []func(*corev1.Pod){selector(corev1.LabelInstanceTypeStable, "r5.large")}, want: "r5.large//"},
		"an instance type too small":        {pod: []func(*corev1.Pod){selector(corev1.LabelInstanceTypeStable, "c5.large")}, because: "", want: "c5.large//"},
		"an instance type the pool refuses": {np: []func(*karpv1.NodePool){withRequirements(requirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpNotIn, "r5.large"))}, pod: []func(*corev1.Pod){selector(corev1.LabelInstanceTypeStable, "r5.large")}, because: "node.kubernetes.io/instance-type"},
		"types NotIn the cheapest two":      {pod: []func(*corev1.Pod){requireAll(expr(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpNotIn, "m6g.large", "c5.large"))}, want: "m5.large//"},
		"a family":                          {pod: []func(*corev1.Pod){selector(karpv1.LabelInstanceFamily, "m5")}, want: "m5.large//"},
		"a category":                        {pod: []func(*corev1.Pod){selector(karpv1.LabelInstanceCategory, "r")}, want: "r5.large//"},
		"a size":                            {pod: []func(*corev1.Pod){selector(karpv1.LabelInstanceSize, "xlarge")}, want: "m5.xlarge//"},
		"sizes Gt and Lt on cpu together":   {pod: []func(*corev1.Pod){requireAll(expr(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "2"), expr(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "16"))}, want: "m5.xlarge//"},
		"Gt and Lt that leave nothing":      {pod: []func(*corev1.Pod){requireAll(expr(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "4"), expr(karpv1.LabelInstanceCPU, corev1.NodeSelectorOpLt, "16"))}, because: "karpenter.k8s.aws/instance-cpu"},
		"arm64 by selector":                 {pod: []func(*corev1.Pod){selector(corev1.LabelArchStable, "arm64")}, want: "m6g.large//"},
		"amd64 by selector":                 {pod: []func(*corev1.Pod){selector(corev1.LabelArchStable, "amd64")}, want: "c5.large//"},
		"arm64 the pool leaves out":         {np: []func(*karpv1.NodePool){withRequirements(requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))}, pod: []func(*corev1.Pod){selector(corev1.LabelArchStable, "arm64")}, because: "kubernetes.io/arch"},
		"a pool of amd64 picks amd64":       {np: []func(*karpv1.NodePool){withRequirements(requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))}, want: "c5.large//"},
		"linux":                             {pod: []func(*corev1.Pod){selector(corev1.LabelOSStable, "linux")}, want: "m6g.large//"},
		"windows no type runs":              {pod: []func(*corev1.Pod){selector(corev1.LabelOSStable, "windows")}, because: "kubernetes.io/os"},
		// Labels the NodePool sets (template labels) or requires, and labels nobody defines.
		"a template label selected":              {np: []func(*karpv1.NodePool){withLabels("team", "a")}, pod: []func(*corev1.Pod){selector("team", "a")}, want: "m6g.large//"},
		"a template label with another value":    {np: []func(*karpv1.NodePool){withLabels("team", "a")}, pod: []func(*corev1.Pod){selector("team", "b")}, because: "team"},
		"a template label Exists":                {np: []func(*karpv1.NodePool){withLabels("team", "a")}, pod: []func(*corev1.Pod){requireAll(expr("team", corev1.NodeSelectorOpExists))}, want: "m6g.large//"},
		"a template label DoesNotExist":          {np: []func(*karpv1.NodePool){withLabels("team", "a")}, pod: []func(*corev1.Pod){requireAll(expr("team", corev1.NodeSelectorOpDoesNotExist))}, because: "team"},
		"a template label NotIn its value":       {np: []func(*karpv1.NodePool){withLabels("team", "a")}, pod: []func(*corev1.Pod){requireAll(expr("team", corev1.NodeSelectorOpNotIn, "a"))}, because: "team"},
		"a template label NotIn another value":   {np: []func(*karpv1.NodePool){withLabels("team", "a")}, pod: []func(*corev1.Pod){requireAll(expr("team", corev1.NodeSelectorOpNotIn, "b"))}, want: "m6g.large//"},
		"a required label In one of its values":  {np: []func(*karpv1.NodePool){withRequirements(requirement("team", corev1.NodeSelectorOpIn, "a", "b"))}, pod: []func(*corev1.Pod){selector("team", "b")}, want: "m6g.large//"},
		"a required label not in its values":     {np: []func(*karpv1.NodePool){withRequirements(requirement("team", corev1.NodeSelectorOpIn, "a", "b"))}, pod: []func(*corev1.Pod){selector("team", "c")}, because: "team"},
		"a required label Exists on the pool":    {np: []func(*karpv1.NodePool){withRequirements(requirement("team", corev1.NodeSelectorOpExists))}, pod: []func(*corev1.Pod){selector("team", "anything")}, want: "m6g.large//"},
		"a label required absent, pod selects":   {np: []func(*karpv1.NodePool){withRequirements(requirement("team", corev1.NodeSelectorOpDoesNotExist))}, pod: []func(*corev1.Pod){selector("team", "a")}, because: "team"},
		"a label required absent, pod NotIn":     {np: []func(*karpv1.NodePool){withRequirements(requirement("team", corev1.NodeSelectorOpDoesNotExist))}, pod: []func(*corev1.Pod){requireAll(expr("team", corev1.NodeSelectorOpNotIn, "a"))}, want: "m6g.large//"},
		"an undefined label selected":            {pod: []func(*corev1.Pod){selector("example.com/rack", "r1")}, because: "example.com/rack"},
		"an undefined label Exists":              {pod: []func(*corev1.Pod){requireAll(expr("example.com/rack", corev1.NodeSelectorOpExists))}, because: "example.com/rack"},
		"an undefined label NotIn":               {pod: []func(*corev1.Pod){requireAll(expr("example.com/rack", corev1.NodeSelectorOpNotIn, "r1"))}, want: "m6g.large//"},
		"an undefined label DoesNotExist":        {pod: []func(*corev1.Pod){requireAll(expr("example.com/rack", corev1.NodeSelectorOpDoesNotExist))}, want: "m6g.large//"},
		"a selector and an affinity that agree":  {pod: []func(*corev1.Pod){selector(karpv1.LabelInstanceFamily, "m5"), requireAll(expr(karpv1.LabelInstanceSize, corev1.NodeSelectorOpIn, "xlarge"))}, want: "m5.xlarge//"},
		"a selector and an affinity that differ": {pod: []func(*corev1.Pod){selector(karpv1.LabelInstanceFamily, "m5"), requireAll(expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "r5"))}, because: "karpenter.k8s.aws/instance-family"},
		"two expressions of one term both hold":  {pod: []func(*corev1.Pod){requireAll(expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5", "r5"), expr(karpv1.LabelInstanceSize, corev1.NodeSelectorOpIn, "large"))}, want: "m5.large//"},
		// The pod's requests narrow what its constraints allow.
		"a family whose sizes are too small": {pod: []func(*corev1.Pod){selector(karpv1.LabelInstanceFamily, "c5"), func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
		}}, because: "no instance type fits cpu=3"},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", tc.pod...)}, NodePools: pools(nodePool("default", tc.np...))})
			if tc.want == "" {
				expectUnschedulable(t, r, tc.because)
				return
			}
			expectPlaced(t, r)
			if len(r.NodeClaims) != 1 {
				t.Fatalf("%d NodeClaims, want 1", len(r.NodeClaims))
			}
			c := r.NodeClaims[0]
			want := strings.Split(tc.want, "/")
			if want[0] != "" && c.InstanceType.Name != want[0] {
				t.Errorf("type %s, want %s", c.InstanceType.Name, want[0])
			}
			if want[1] != "" && c.Offering.Zone != want[1] {
				t.Errorf("zone %s, want %s", c.Offering.Zone, want[1])
			}
			if want[2] != "" && c.Offering.CapacityType != want[2] {
				t.Errorf("capacity type %s, want %s", c.Offering.CapacityType, want[2])
			}
			// Whatever the solver chose, the NodeClaim's requirements allow its own type and
			// what every pod on it selects.
			if err := allowsType(c, c.InstanceType); err != nil {
				t.Errorf("the NodeClaim's requirements refuse its own type: %v", err)
			}
			for _, p := range c.Pods {
				if err := c.Requirements.Compatible(selectedBy(p)); err != nil {
					t.Errorf("pod %s does not fit its NodeClaim's requirements: %v", p.Name, err)
				}
			}
		})
	}
}

// allowsType says which label of a type the NodeClaim's requirements refuse, if any.
func allowsType(c *NodeClaim, it *cloudprovider.InstanceType) error {
	for k, v := range it.Labels {
		if r, ok := c.Requirements[k]; ok && !r.Has(v) {
			return fmt.Errorf("%s=%s against %s", k, v, r)
		}
	}
	return nil
}

// selectedBy are a pod's node selector and first required term as requirements.
func selectedBy(p *corev1.Pod) scheduling.Requirements {
	rs := scheduling.LabelRequirements(p.Spec.NodeSelector)
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, e := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions {
			rs.Add(scheduling.NewRequirement(e.Key, e.Operator, e.Values...))
		}
	}
	return rs
}

// A NodeClaim's requirements carry the NodePool's labels and the pod's narrowing, so that the
// node registers with them.
func TestNodeClaimRequirementsCarryLabelsAndNarrowing(t *testing.T) {
	np := nodePool("default", withLabels("team", "a"), bothCapacityTypes,
		withRequirements(requirement(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a", "z-b")))
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", selector(karpv1.LabelTopologyZone, "z-b"))}, NodePools: pools(np)})
	expectPlaced(t, r)
	c := r.NodeClaims[0]
	if v, ok := c.Requirements["team"].Single(); !ok || v != "a" {
		t.Errorf("team requirement %s, want In [a]", reqString(c.Requirements, "team"))
	}
	if v, ok := c.Requirements[karpv1.LabelTopologyZone].Single(); !ok || v != "z-b" {
		t.Errorf("zone requirement %s, want In [z-b]", reqString(c.Requirements, karpv1.LabelTopologyZone))
	}
	if v, ok := c.Requirements[karpv1.NodePoolLabelKey].Single(); !ok || v != "default" {
		t.Errorf("nodepool requirement %s, want In [default]", reqString(c.Requirements, karpv1.NodePoolLabelKey))
	}
	if ct := c.Requirements[karpv1.CapacityTypeLabelKey]; ct.Has("reserved") {
		t.Errorf("capacity type requirement %s allows what the pool does not", ct)
	}
	// The offering chosen is one the requirements allow.
	if !c.Requirements[karpv1.LabelTopologyZone].Has(c.Offering.Zone) || !c.Requirements[karpv1.CapacityTypeLabelKey].Has(c.Offering.CapacityType) {
		t.Errorf("offering %s/%s outside the NodeClaim's requirements", c.Offering.Zone, c.Offering.CapacityType)
	}
}

// Every type a NodeClaim offers the cloud provider fits all of its pods and is allowed by its
// requirements, cheapest first; the first is the one priced.
func TestInstanceTypeOptionsAllFit(t *testing.T) {
	ps := append(pods("small", 3, "500m", "1Gi"), pods("mem", 1, "500m", "10Gi")...)
	r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	for _, c := range r.NodeClaims {
		if len(c.InstanceTypes) == 0 || c.InstanceTypes[0] != c.InstanceType {
			t.Fatalf("the priced type %s must come first among %d", c.InstanceType.Name, len(c.InstanceTypes))
		}
		prev := -1.0
		for _, it := range c.InstanceTypes {
			if err := allowsType(c, it); err != nil {
				t.Errorf("%s offered but not allowed: %v", it.Name, err)
			}
			alloc := it.Allocatable()
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				want := c.Requests[res]
				have := alloc[res]
				if have.Cmp(want) < 0 {
					t.Errorf("%s offered with %s %s for requests of %s", it.Name, res, have.String(), want.String())
				}
			}
			ok := false
			for _, off := range it.Offerings {
				if off.Available && c.Requirements[karpv1.CapacityTypeLabelKey].Has(off.CapacityType) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s offered without an offering the NodeClaim allows", it.Name)
			}
			price := cheapestAllowed(c, it.Name)
			if price < prev {
				t.Errorf("%s at %.4f after a type at %.4f: not cheapest first", it.Name, price, prev)
			}
			prev = price
		}
	}
}

// cheapestAllowed is the cheapest available offering of the named type the NodeClaim allows.
func cheapestAllowed(c *NodeClaim, name string) float64 {
	best := -1.0
	for _, it := range c.InstanceTypes {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || !c.Requirements[karpv1.CapacityTypeLabelKey].Has(o.CapacityType) {
				continue
			}
			if z, ok := c.Requirements[karpv1.LabelTopologyZone]; ok && !z.Has(o.Zone) {
				continue
			}
			if best < 0 || o.Price < best {
				best = o.Price
			}
		}
	}
	return best
}

// Pods with incompatible constraints get NodeClaims of their own; compatible ones share.
func TestIncompatiblePodsDoNotShare(t *testing.T) {
	ps := []*corev1.Pod{
		pod("arm", "500m", "512Mi", selector(corev1.LabelArchStable, "arm64")),
		pod("amd", "500m", "512Mi", selector(corev1.LabelArchStable, "amd64")),
		pod("za", "500m", "512Mi", selector(karpv1.LabelTopologyZone, "z-a")),
		pod("zb", "500m", "512Mi", selector(karpv1.LabelTopologyZone, "z-b")),
	}
	r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	expectPlaced(t, r)
	where := map[string]*NodeClaim{}
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			where[p.Name] = c
		}
	}
	if where["arm"] == where["amd"] {
		t.Error("arm64 and amd64 pods share a NodeClaim")
	}
	if where["za"] == where["zb"] {
		t.Error("pods of zones a and b share a NodeClaim")
	}
	if len(r.NodeClaims) > 3 {
		t.Errorf("%d NodeClaims: the zone pods fit beside the architecture pods (want at most 3)", len(r.NodeClaims))
	}
	for _, c := range r.NodeClaims {
		for _, p := range c.Pods {
			if arch, ok := p.Spec.NodeSelector[corev1.LabelArchStable]; ok && c.InstanceType.Labels[corev1.LabelArchStable] != arch {
				t.Errorf("pod %s wants %s, NodeClaim is %s", p.Name, arch, c.InstanceType.Labels[corev1.LabelArchStable])
			}
			if z, ok := p.Spec.NodeSelector[karpv1.LabelTopologyZone]; ok && !sameSet(zonesOf(c), []string{z}) {
				t.Errorf("pod %s wants %s, NodeClaim may be in %v", p.Name, z, zonesOf(c))
			}
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// Upstream's "Preferential Fallback": required terms are ORed and tried in order until one
// can be met; preferences are dropped from the lightest up only when they cannot be met.
func TestPreferentialFallback(t *testing.T) {
	terms := func(ts ...[]corev1.NodeSelectorRequirement) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			var out []corev1.NodeSelectorTerm
			for _, e := range ts {
				out = append(out, corev1.NodeSelectorTerm{MatchExpressions: e})
			}
			if p.Spec.Affinity == nil {
				p.Spec.Affinity = &corev1.Affinity{}
			}
			if p.Spec.Affinity.NodeAffinity == nil {
				p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
			}
			p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: out}
		}
	}
	prefs := func(ws ...corev1.PreferredSchedulingTerm) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			if p.Spec.Affinity == nil {
				p.Spec.Affinity = &corev1.Affinity{}
			}
			if p.Spec.Affinity.NodeAffinity == nil {
				p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
			}
			p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = ws
		}
	}
	weighted := func(w int32, exprs ...corev1.NodeSelectorRequirement) corev1.PreferredSchedulingTerm {
		return corev1.PreferredSchedulingTerm{Weight: w, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}}
	}
	for name, tc := range map[string]struct {
		pod     []func(*corev1.Pod)
		want    string // type
		because string
	}{
		"the first term that can be met": {pod: []func(*corev1.Pod){terms(
			[]corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "x1")},
			[]corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5")},
			[]corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "c5")})}, want: "m5.large"},
		"no term can be met": {pod: []func(*corev1.Pod){terms(
			[]corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "x1")},
			[]corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "x2")})}, because: "karpenter.k8s.aws/instance-family"},
		"a term with an empty expression list matches nothing, the next does": {pod: []func(*corev1.Pod){terms(
			[]corev1.NodeSelectorRequirement{expr(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "s390x")},
			[]corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "r5")})}, want: "r5.large"},
		"the heaviest preference first": {pod: []func(*corev1.Pod){prefs(
			weighted(1, expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "c5")),
			weighted(50, expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "r5")))}, want: "r5.large"},
		"a preference that cannot be met gives way to the next": {pod: []func(*corev1.Pod){prefs(
			weighted(50, expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "x9")),
			weighted(10, expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5")))}, want: "m5.large"},
		"preferences never widen a required term": {pod: []func(*corev1.Pod){
			terms([]corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5")}),
			prefs(weighted(50, expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "r5")))}, want: "m5.large"},
		"a preference within the required term is honoured": {pod: []func(*corev1.Pod){
			terms([]corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5")}),
			prefs(weighted(50, expr(karpv1.LabelInstanceSize, corev1.NodeSelectorOpIn, "xlarge")))}, want: "m5.xlarge"},
		"preferences all unmet: the cheapest": {pod: []func(*corev1.Pod){prefs(
			weighted(50, expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "x9")),
			weighted(10, expr(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "s390x")))}, want: "m6g.large"},
		"a preference on a zone": {pod: []func(*corev1.Pod){prefs(weighted(10, expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-c")))}, want: "m6g.large"},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", tc.pod...)}, NodePools: pools(nodePool("default"))})
			if tc.want == "" {
				expectUnschedulable(t, r, tc.because)
				return
			}
			expectPlaced(t, r)
			if got := r.NodeClaims[0].InstanceType.Name; got != tc.want {
				t.Fatalf("type %s, want %s", got, tc.want)
			}
			if name == "a preference on a zone" && r.NodeClaims[0].Offering.Zone != "z-c" {
				t.Fatalf("zone %s, want the preferred z-c", r.NodeClaims[0].Offering.Zone)
			}
		})
	}
}

// Upstream's "Instance Type Compatibility": pods that need different types share a NodeClaim
// only on a type that serves them all, and a type that cannot serve one is not offered.
func TestInstanceTypeCompatibility(t *testing.T) {
	gpu := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
	}
	t.Run("a GPU pod and a plain pod may share the GPU type", func(t *testing.T) {
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("train", "1", "1Gi", gpu), pod("web", "1", "1Gi")}, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			for _, p := range c.Pods {
				if p.Name == "train" {
					for _, it := range c.InstanceTypes {
						if q := it.Capacity["nvidia.com/gpu"]; q.IsZero() {
							t.Errorf("%s offered for a GPU pod", it.Name)
						}
					}
				}
			}
		}
	})
	t.Run("GPU pods pack by their extended resource", func(t *testing.T) {
		r := solve(t, &Input{Pods: pods("train", 3, "500m", "512Mi", gpu), NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if len(r.NodeClaims) != 3 {
			t.Fatalf("3 pods of one GPU each on types of one GPU: %d NodeClaims, want 3", len(r.NodeClaims))
		}
	})
	t.Run("an extended resource no type has", func(t *testing.T) {
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("fpga", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["example.com/fpga"] = resource.MustParse("1")
		})}, NodePools: pools(nodePool("default"))})
		expectUnschedulable(t, r, "example.com/fpga")
	})
	t.Run("an extended resource set to zero asks for nothing", func(t *testing.T) {
		r := solve(t, &Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests["example.com/fpga"] = resource.MustParse("0")
		})}, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
	})
	// The solver takes pods as the API server admitted them (the provisioner's come from it;
	// karpenterctl admits its manifests' pods the same way, scheduling.Admission).
	t.Run("limits without requests count as requests once admitted", func(t *testing.T) {
		p := pod("p", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = nil
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		})
		r := solve(t, &Input{Pods: []*corev1.Pod{scheduling.Admission{}.Admit(p)}, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if cpu := r.NodeClaims[0].InstanceType.Capacity[corev1.ResourceCPU]; cpu.Value() < 4 {
			t.Fatalf("a 3-cpu limit on %s (%s cpu)", r.NodeClaims[0].InstanceType.Name, cpu.String())
		}
	})
	t.Run("init containers count by their largest", func(t *testing.T) {
		p := pod("p", "500m", "512Mi", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}
		})
		r := solve(t, &Input{Pods: []*corev1.Pod{p}, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if cpu := r.NodeClaims[0].InstanceType.Capacity[corev1.ResourceCPU]; cpu.Value() < 4 {
			t.Fatalf("an init container of 3 cpu on %s", r.NodeClaims[0].InstanceType.Name)
		}
	})
	t.Run("sidecar init containers add to the containers", func(t *testing.T) {
		always := corev1.ContainerRestartPolicyAlways
		p := pod("p", "1500m", "512Mi", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}
		})
		r := solve(t, &Input{Pods: []*corev1.Pod{p}, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if cpu := r.NodeClaims[0].InstanceType.Capacity[corev1.ResourceCPU]; cpu.Value() < 4 {
			t.Fatalf("1.5 cpu and a 1 cpu sidecar on %s", r.NodeClaims[0].InstanceType.Name)
		}
	})
	t.Run("pod overhead counts", func(t *testing.T) {
		p := pod("p", "1500m", "512Mi", func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		})
		r := solve(t, &Input{Pods: []*corev1.Pod{p}, NodePools: pools(nodePool("default"))})
		expectPlaced(t, r)
		if cpu := r.NodeClaims[0].InstanceType.Capacity[corev1.ResourceCPU]; cpu.Value() < 4 {
			t.Fatalf("1.5 cpu and 1 cpu of overhead on %s", r.NodeClaims[0].InstanceType.Name)
		}
	})
	t.Run("the pods resource caps how many pods a node takes", func(t *testing.T) {
		types := testCatalog()
		for _, it := range types {
			it.Capacity[corev1.ResourcePods] = resource.MustParse("4")
		}
		r := solve(t, &Input{Pods: pods("tiny", 10, "10m", "16Mi"), NodePools: []*NodePool{{NodePool: nodePool("default"), InstanceTypes: types}}})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			if len(c.Pods) > 4 {
				t.Fatalf("%d pods on a type of 4 pods", len(c.Pods))
			}
		}
		if len(r.NodeClaims) != 3 {
			t.Fatalf("10 pods at 4 a node: %d NodeClaims, want 3", len(r.NodeClaims))
		}
	})
	t.Run("minValues keeps enough types on every NodeClaim", func(t *testing.T) {
		np := nodePool("default", func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
				Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists, MinValues: ptr.To(3)})
		})
		r := solve(t, &Input{Pods: pods("w", 4, "1", "1Gi"), NodePools: pools(np)})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			if len(c.InstanceTypes) < 3 {
				t.Fatalf("a NodeClaim with %d types under minValues 3", len(c.InstanceTypes))
			}
		}
	})
}
