package solver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling"
)

// The NodeClaim object a decision becomes, seeded solves, policy constraints, and pod
// affinity across namespaces.

func TestNodeClaimFor(t *testing.T) {
	np := nodePool("default", withLabels("team", "a"), bothCapacityTypes, func(np *karpv1.NodePool) {
		np.UID = "np-uid"
		np.Spec.Template.Annotations = map[string]string{"example.com/owner": "platform"}
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni", Effect: corev1.TaintEffectNoSchedule}}
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	})
	tolerate := tolerating("dedicated", "a", corev1.TaintEffectNoSchedule)
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi", tolerate, selector(karpv1.LabelTopologyZone, "z-b"))}, NodePools: pools(np)})
	expectPlaced(t, r)
	c := r.NodeClaims[0]
	nc := NodeClaimFor(np, c)
	if !strings.HasPrefix(nc.Name, "default-") {
		t.Errorf("name %s", nc.Name)
	}
	if nc.Labels[karpv1.NodePoolLabelKey] != "default" || nc.Labels["team"] != "a" {
		t.Errorf("labels %v", nc.Labels)
	}
	if nc.Annotations["example.com/owner"] != "platform" || nc.Annotations[karpv1.NodePoolHashAnnotationKey] != np.Hash() {
		t.Errorf("annotations %v", nc.Annotations)
	}
	if nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey] != "false" {
		t.Errorf("min-values-relaxed %q, want false", nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey])
	}
	priced, ok := cloudprovider.PricedOfferingOf(nc)
	if !ok || priced.InstanceType != c.InstanceType.Name || priced.Zone != c.Offering.Zone || priced.CapacityType != c.Offering.CapacityType {
		t.Errorf("priced offering %+v (%v), want %s/%s/%s", priced, ok, c.InstanceType.Name, c.Offering.Zone, c.Offering.CapacityType)
	}
	if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].UID != "np-uid" || nc.OwnerReferences[0].Kind != "NodePool" {
		t.Errorf("owner %+v", nc.OwnerReferences)
	}
	if len(nc.Spec.Taints) != 1 || len(nc.Spec.StartupTaints) != 1 || nc.Spec.ExpireAfter.Duration == nil {
		t.Errorf("spec %+v", nc.Spec)
	}
	reqs := scheduling.NewRequirements(nc.Spec.Requirements...)
	if _, ok := reqs[karpv1.NodePoolLabelKey]; ok {
		t.Error("the nodepool label is a label, not a requirement")
	}
	if z, ok := reqs[karpv1.LabelTopologyZone].Single(); !ok || z != "z-b" {
		t.Errorf("zone requirement %s, want In [z-b]", reqString(reqs, karpv1.LabelTopologyZone))
	}
	types := reqs[karpv1.LabelInstanceType]
	if types == nil || types.Len() != len(c.InstanceTypes) || !types.Has(c.InstanceType.Name) {
		t.Errorf("instance-type requirement %s, want the %d types offered", reqString(reqs, karpv1.LabelInstanceType), len(c.InstanceTypes))
	}
	if cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("requests %v", nc.Spec.Resources.Requests)
	}
}

// A NodeClaim given room in a capacity reservation launches into that reservation only.
func TestNodeClaimForAReservation(t *testing.T) {
	types := testCatalog()
	for _, it := range types {
		if it.Name == "m5.large" {
			it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: "z-b", CapacityType: karpv1.CapacityTypeReserved, Price: 0.001,
				Available: true, ReservationID: "cr-1", ReservationCapacity: 1})
		}
	}
	np := nodePool("default", func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved}
	})
	r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}, NodePools: []*NodePool{{NodePool: np, InstanceTypes: types}}})
	expectPlaced(t, r)
	c := r.NodeClaims[0]
	if c.Offering.ReservationID != "cr-1" {
		t.Fatalf("offering %+v, want the reservation", c.Offering)
	}
	reqs := scheduling.NewRequirements(NodeClaimFor(np, c).Spec.Requirements...)
	for key, want := range map[string]string{karpv1.LabelInstanceType: "m5.large", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeReserved,
		karpv1.LabelTopologyZone: "z-b", karpv1.LabelCapacityReservationID: "cr-1"} {
		if v, ok := reqs[key].Single(); !ok || v != want {
			t.Errorf("%s requirement %s, want In [%s]", key, reqString(reqs, key), want)
		}
	}
}

// A seeded solve (the policy engine solving again after changing a few pods) places each
// pod where the seed had it when it still fits, and is valid whatever the seed.
func TestSeededSolve(t *testing.T) {
	ps := append(pods("web", 12, "700m", "1Gi", labelled("web")), pods("batch", 6, "1500m", "3Gi", labelled("batch"))...)
	first := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default"))})
	expectPlaced(t, first)
	second := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default")), Seed: first.NodeClaims})
	expectPlaced(t, second)
	if len(second.NodeClaims) != len(first.NodeClaims) || second.PricePerHour() > first.PricePerHour()+1e-9 {
		t.Fatalf("seeded: %d NodeClaims at $%.3f, unseeded %d at $%.3f", len(second.NodeClaims), second.PricePerHour(), len(first.NodeClaims), first.PricePerHour())
	}
	together := func(r *Result) map[string]string {
		out := map[string]string{}
		for i, c := range r.NodeClaims {
			for _, p := range c.Pods {
				out[p.Name] = string(rune('A' + i))
			}
		}
		return out
	}
	a, b := together(first), together(second)
	for name, claim := range a {
		if b[name] != claim {
			t.Fatalf("pod %s moved from NodeClaim %s to %s", name, claim, b[name])
		}
	}
	// A pod whose constraints changed since the seed does not stay where it no longer fits.
	changed := append([]*corev1.Pod(nil), ps...)
	changed[0] = pod("web-0", "700m", "1Gi", labelled("web"), selector(corev1.LabelArchStable, "amd64"))
	third := solve(t, &Input{Pods: changed, NodePools: pools(nodePool("default")), Seed: first.NodeClaims})
	expectPlaced(t, third)
	for _, c := range third.NodeClaims {
		for _, p := range c.Pods {
			if p.Name == "web-0" && c.InstanceType.Labels[corev1.LabelArchStable] != "amd64" {
				t.Fatalf("web-0 wants amd64, on %s", c.InstanceType.Name)
			}
		}
	}
	// A seed of a NodePool that is gone is ignored.
	gone := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("other")), Seed: first.NodeClaims})
	expectPlaced(t, gone)
	for _, c := range gone.NodeClaims {
		if c.NodePool != "other" {
			t.Fatalf("a NodeClaim of %s, which is not an input NodePool", c.NodePool)
		}
	}
}

// ladder is a policy hook that gives every pod of namespace ns the same constraints.
type ladder struct {
	ns string
	c  *Constraints
}

func (l ladder) Constraints(p *corev1.Pod, _ string) *Constraints {
	if p.Namespace != l.ns {
		return nil
	}
	return l.c
}

func TestPolicyConstraints(t *testing.T) {
	inTeam := func(p *corev1.Pod) { p.Namespace = "team-a" }
	for name, tc := range map[string]struct {
		c       *Constraints
		np      []func(*karpv1.NodePool)
		want    string // type/capacity type
		because string
	}{
		"a requirement on the family": {c: &Constraints{Requirements: []corev1.NodeSelectorRequirement{expr(karpv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "r5")}}, want: "r5.large/on-demand"},
		"a type filter": {c: &Constraints{AllowType: func(it *cloudprovider.InstanceType) bool { return it.Labels[corev1.LabelArchStable] == "amd64" }},
			want: "c5.large/on-demand"},
		"an offering filter on capacity type": {np: []func(*karpv1.NodePool){bothCapacityTypes},
			c: &Constraints{AllowOffering: func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
				return o.CapacityType == karpv1.CapacityTypeOnDemand
			}},
			want: "m6g.large/on-demand"},
		"an offering filter on price": {c: &Constraints{AllowOffering: func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool { return o.Price >= 0.09 }},
			want: "m5.large/on-demand"},
		"a filter that leaves nothing": {c: &Constraints{AllowType: func(*cloudprovider.InstanceType) bool { return false }, Source: "CapacityPolicy no-types"},
			because: "no-types"},
		"a requirement the pool cannot meet": {c: &Constraints{Requirements: []corev1.NodeSelectorRequirement{expr(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "s390x")}, Source: "CapacityPolicy arch"},
			because: "kubernetes.io/arch"},
		"a requirement on capacity type keeps Spot out": {np: []func(*karpv1.NodePool){bothCapacityTypes},
			c:    &Constraints{Requirements: []corev1.NodeSelectorRequirement{expr(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand)}},
			want: "m6g.large/on-demand"},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi", inTeam)}, NodePools: pools(nodePool("default", tc.np...)), Policy: ladder{"team-a", tc.c}})
			if tc.want == "" {
				expectUnschedulable(t, r, tc.because)
				return
			}
			expectPlaced(t, r)
			c := r.NodeClaims[0]
			if got := c.InstanceType.Name + "/" + c.Offering.CapacityType; got != tc.want {
				t.Fatalf("%s, want %s", got, tc.want)
			}
			// The policy holds for every type offered, not only the priced one.
			for _, it := range c.InstanceTypes {
				if tc.c.AllowType != nil && !tc.c.AllowType(it) {
					t.Errorf("%s offered against the policy's type filter", it.Name)
				}
			}
			// Other namespaces are not constrained.
			other := solve(t, &Input{Pods: []*corev1.Pod{pod("w", "1", "1Gi")}, NodePools: pools(nodePool("default", tc.np...)), Policy: ladder{"team-a", tc.c}})
			expectPlaced(t, other)
			if other.NodeClaims[0].InstanceType.Name != "m6g.large" {
				t.Fatalf("another namespace got %s, want the cheapest", other.NodeClaims[0].InstanceType.Name)
			}
		})
	}
	t.Run("pods of two namespaces do not share a NodeClaim the policy splits", func(t *testing.T) {
		onDemand := &Constraints{AllowOffering: func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
			return o.CapacityType == karpv1.CapacityTypeOnDemand
		}, OfferingKey: "od"}
		ps := append(pods("a", 2, "500m", "512Mi", inTeam), pods("b", 2, "500m", "512Mi")...)
		r := solve(t, &Input{Pods: ps, NodePools: pools(nodePool("default", bothCapacityTypes)), Policy: ladder{"team-a", onDemand}})
		expectPlaced(t, r)
		for _, c := range r.NodeClaims {
			for _, p := range c.Pods {
				if p.Namespace == "team-a" && c.Offering.CapacityType != karpv1.CapacityTypeOnDemand {
					t.Fatalf("a team-a pod on %s", c.Offering.CapacityType)
				}
			}
		}
	})
}

// Pod affinity terms name the namespaces they look in: the pod's own by default, a list, the
// namespaces a namespaceSelector selects by their labels, or every namespace with an empty
// namespaceSelector.
func TestPodAffinityNamespaces(t *testing.T) {
	db := func(ns string) *scheduling.Node {
		return node("db-node", "z-b", "8", "8Gi", func(n *scheduling.Node) {
			n.Pods = []*corev1.Pod{pod("db", "1", "1Gi", labelled("db"), func(p *corev1.Pod) { p.Namespace = ns })}
		})
	}
	affine := func(namespaces []string, selector *metav1.LabelSelector) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: karpv1.LabelTopologyZone, Namespaces: namespaces, NamespaceSelector: selector,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
		}
	}
	for name, tc := range map[string]struct {
		dbNS   string
		affine func(*corev1.Pod)
		placed bool
	}{
		"the pod's own namespace":                   {dbNS: "default", affine: affine(nil, nil), placed: true},
		"another namespace is not looked in":        {dbNS: "data", affine: affine(nil, nil)},
		"a listed namespace":                        {dbNS: "data", affine: affine([]string{"data"}, nil), placed: true},
		"a list without the db's":                   {dbNS: "data", affine: affine([]string{"other"}, nil)},
		"an empty selector: every namespace":        {dbNS: "data", affine: affine(nil, &metav1.LabelSelector{}), placed: true},
		"a list and its own namespace missed":       {dbNS: "default", affine: affine([]string{"data"}, nil)},
		"a selector of the db's namespace's labels": {dbNS: "data", affine: affine(nil, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "storage"}}), placed: true},
		"a selector of other labels":                {dbNS: "data", affine: affine(nil, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}})},
		"a selector and a list together":            {dbNS: "data", affine: affine([]string{"other"}, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "storage"}}), placed: true},
		"a selector matching no namespace":          {dbNS: "default", affine: affine(nil, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "none"}})},
	} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, &Input{Pods: []*corev1.Pod{pod("api", "1", "1Gi", labelled("api"), tc.affine)}, NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{db(tc.dbNS)},
				NamespaceLabels: map[string]map[string]string{"default": {"tier": "web"}, "data": {"tier": "storage"}, "other": {}}})
			if !tc.placed {
				expectUnschedulable(t, r, "pod affinity")
				return
			}
			expectPlaced(t, r)
			zone := ""
			if len(r.Existing["db-node"]) == 1 {
				zone = "z-b"
			} else if len(r.NodeClaims) == 1 {
				zone = label(r.NodeClaims[0], karpv1.LabelTopologyZone)
			}
			if zone != "z-b" {
				t.Fatalf("the api pod is in %q, want z-b with the db", zone)
			}
		})
	}
}

// PodRequirements are the selector and first required term, without preferences.
func TestPodRequirements(t *testing.T) {
	p := pod("p", "1", "1Gi", selector("team", "a"), requireAll(expr(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "z-a")), func(p *corev1.Pod) {
		p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 1,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")}}}}
	})
	rs := PodRequirements(p)
	if v, ok := rs["team"].Single(); !ok || v != "a" {
		t.Errorf("team %s", reqString(rs, "team"))
	}
	if v, ok := rs[karpv1.LabelTopologyZone].Single(); !ok || v != "z-a" {
		t.Errorf("zone %s", reqString(rs, karpv1.LabelTopologyZone))
	}
	if _, ok := rs[corev1.LabelArchStable]; ok {
		t.Error("a preference is not a requirement")
	}
	if len(PodRequirements(pod("bare", "1", "1Gi"))) != 0 {
		t.Error("a pod without constraints has requirements")
	}
	_ = ptr.To(1)
}

// Without the namespaces' labels, a namespaceSelector selects the pod's own namespace.
func TestNamespaceSelectorWithoutLabels(t *testing.T) {
	dbNode := node("db-node", "z-b", "8", "8Gi", func(n *scheduling.Node) {
		n.Pods = []*corev1.Pod{pod("db", "1", "1Gi", labelled("db"))}
	})
	api := pod("api", "1", "1Gi", labelled("api"), func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: karpv1.LabelTopologyZone, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "storage"}},
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
	})
	r := solve(t, &Input{Pods: []*corev1.Pod{api}, NodePools: pools(nodePool("default")), Nodes: []*scheduling.Node{dbNode}})
	expectPlaced(t, r)
}
