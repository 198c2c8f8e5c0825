package solver

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/karpenter-policy/karpenter/scheduling"
)

type groupKind int

const (
	spread groupKind = iota
	affinity
	antiAffinity
)

func (k groupKind) String() string {
	return [...]string{"topology spread", "pod affinity", "pod anti-affinity"}[k]
}

// group counts, per domain of a topology key, the pods a selector matches; for
// anti-affinity it also counts, per domain, the pods that own the term.
type group struct {
	kind       groupKind
	key        string
	maxSkew    int32
	minDomains int32
	// ignoreAffinity (nodeAffinityPolicy: Ignore) counts domains the pod's node affinity
	// excludes; honorTaints (nodeTaintsPolicy: Honor) leaves out domains whose every node
	// has a taint the pod does not tolerate.
	ignoreAffinity, honorTaints bool
	namespaces                  sets.Set[string] // nil: every namespace
	selector                    labels.Selector
	selectorID                  string
	counts                      map[string]int
	owners                      map[string]int
	// open are the NodeClaims, in creation order, that may still take a pod gated by the
	// group (hostnameGate), and synced how many of the solver's NodeClaims were looked at.
	open   []*NodeClaim
	synced int
}

func (g *group) matches(p *corev1.Pod) bool {
	if g.namespaces != nil && !g.namespaces.Has(p.Namespace) {
		return false
	}
	return g.selector.Matches(labels.Set(p.Labels))
}

// constraint is one topology constraint of a pod, pointing at its group.
type constraint struct {
	group *group
	// required is false for preferences (ScheduleAnyway, preferred pod (anti-)affinity), which
	// only the strict attempt enforces.
	required bool
	// selfMatch: the pod matches its own affinity selector, so the first of a group may go
	// anywhere.
	selfMatch bool
	// rank orders a pod's preferences for relaxing them one at a time: preferred pod
	// affinity, then preferred anti-affinity, then ScheduleAnyway spreads; within a kind the
	// lightest first (weight).
	rank   int
	weight int32
}

// soft reports whether an attempt skips the constraint: a preference, when the attempt is
// not strict or has relaxed the first t.relaxed preferences.
func (t *topology) soft(c constraint, strict bool) bool {
	return !c.required && (!strict || c.rank < t.relaxed)
}

// preferences counts a pod's preferences: pod (anti-)affinity ones, and all.
func (t *topology) preferences(p *corev1.Pod) (affinity, all int) {
	for _, c := range t.constraints(p) {
		if c.required {
			continue
		}
		all++
		if c.group.kind != spread {
			affinity++
		}
	}
	return affinity, all
}

// topology holds every group of the solve and the domains each key can take.
type topology struct {
	// namespaceLabels are the namespaces' labels, for namespaceSelectors (Input.NamespaceLabels).
	namespaceLabels map[string]map[string]string
	// relaxed is how many of the pod being placed's preferences the attempt drops, by rank.
	relaxed int
	groups  map[string]*group
	byPod   map[*corev1.Pod][]constraint
	// lastPod and lastCons cache constraints' last answer.
	lastPod  *corev1.Pod
	lastCons []constraint
	anti     []*group
	domains  map[string]sets.Set[string]
	// taints are, by key and domain, the distinct taint sets of the nodes and NodePools that
	// provide the domain, for nodeTaintsPolicy: Honor.
	taints map[string]map[string]map[string][]corev1.Taint
	// ignorePreferences leaves the pods' preferred pod (anti-)affinities, ScheduleAnyway
	// spreads and preferred node affinities out (Input.IgnorePreferences).
	ignorePreferences bool
}

// preferredTerms are a pod's preferred node affinity terms, heaviest first; none when
// preferences are ignored.
func (t *topology) preferredTerms(p *corev1.Pod) []corev1.PreferredSchedulingTerm {
	if t.ignorePreferences {
		return nil
	}
	return preferredTerms(p)
}

func newTopology() *topology {
	return &topology{groups: map[string]*group{}, byPod: map[*corev1.Pod][]constraint{}, domains: map[string]sets.Set[string]{},
		taints: map[string]map[string]map[string][]corev1.Taint{}}
}

// taintsKey identifies a taint set, so that a NodePool's types add it once per domain.
func taintsKey(taints []corev1.Taint) string {
	keys := make([]string, len(taints))
	for i, t := range taints {
		keys[i] = scheduling.TaintString(&t)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// addDomain records a domain a node or a NodePool with these taints (identified by tk, see
// taintsKey) provides.
func (t *topology) addDomain(key, value string, taints []corev1.Taint, tk string) {
	byValue, ok := t.taints[key]
	if !ok {
		byValue = map[string]map[string][]corev1.Taint{}
		t.taints[key] = byValue
	}
	byTaints, ok := byValue[value]
	if !ok {
		byTaints = map[string][]corev1.Taint{}
		byValue[value] = byTaints
	}
	if _, seen := byTaints[tk]; !seen && len(byTaints) < maxTaintSets {
		byTaints[tk] = taints
	}
	s, ok := t.domains[key]
	if !ok {
		s = sets.New[string]()
		t.domains[key] = s
	}
	s.Insert(value)
}

// maxTaintSets bounds the distinct taint sets kept per domain; a domain with more counts as
// tolerable.
const maxTaintSets = 64

// tolerable reports whether some provider of the domain has only taints the pod tolerates.
func (t *topology) tolerable(p *corev1.Pod, key, value string) bool {
	byTaints := t.taints[key][value]
	if len(byTaints) == 0 || len(byTaints) >= maxTaintSets {
		return true
	}
	for _, ts := range byTaints {
		if scheduling.Tolerates(p, ts, true) {
			return true
		}
	}
	return false
}

func (t *topology) group(kind groupKind, key string, sel *metav1.LabelSelector, namespaces sets.Set[string], maxSkew, minDomains int32, policies ...bool) (*group, error) {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	ns := "*"
	if namespaces != nil {
		ns = strings.Join(sets.List(namespaces), ",")
	}
	ignoreAffinity, honorTaints := len(policies) > 0 && policies[0], len(policies) > 1 && policies[1]
	id := fmt.Sprintf("%d|%s|%s|%s|%d|%d|%t|%t", kind, key, selector.String(), ns, maxSkew, minDomains, ignoreAffinity, honorTaints)
	if g, ok := t.groups[id]; ok {
		return g, nil
	}
	g := &group{kind: kind, key: key, maxSkew: maxSkew, minDomains: minDomains, namespaces: namespaces, selector: selector,
		selectorID: selector.String(), counts: map[string]int{}, owners: map[string]int{}, ignoreAffinity: ignoreAffinity, honorTaints: honorTaints}
	t.groups[id] = g
	if kind == antiAffinity {
		t.anti = append(t.anti, g)
	}
	return g, nil
}

// withLabelKeys is a selector with the pod's own values of matchLabelKeys (key In [value])
// and mismatchLabelKeys (key NotIn [value]) added, as kube-scheduler reads a topology spread
// constraint or a pod (anti-)affinity term: a Deployment's matchLabelKeys [pod-template-hash]
// spreads each ReplicaSet on its own. Keys the pod has no label for are ignored; the selector
// is returned as it is when there are none.
func withLabelKeys(sel *metav1.LabelSelector, p *corev1.Pod, match, mismatch []string) *metav1.LabelSelector {
	var add []metav1.LabelSelectorRequirement
	for _, k := range match {
		if v, ok := p.Labels[k]; ok {
			add = append(add, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
		}
	}
	for _, k := range mismatch {
		if v, ok := p.Labels[k]; ok {
			add = append(add, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{v}})
		}
	}
	if len(add) == 0 {
		return sel
	}
	out := sel.DeepCopy()
	out.MatchExpressions = append(out.MatchExpressions, add...)
	return out
}

// termNamespaces are the namespaces a pod affinity term looks in, as kube-scheduler reads it:
// those it lists and those its namespaceSelector selects (an empty selector: every
// namespace, nil here); the pod's own when it names none. Without the namespaces' labels
// (Input.NamespaceLabels nil) a selector selects only the pod's own namespace.
func (t *topology) termNamespaces(p *corev1.Pod, term corev1.PodAffinityTerm) sets.Set[string] {
	sel := term.NamespaceSelector
	if sel != nil && len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return nil // {} selects every namespace
	}
	out := sets.New(term.Namespaces...)
	if sel != nil {
		selector, err := metav1.LabelSelectorAsSelector(sel)
		switch {
		case err != nil:
		case t.namespaceLabels == nil:
			out.Insert(p.Namespace)
		default:
			for name, l := range t.namespaceLabels {
				if selector.Matches(labels.Set(l)) {
					out.Insert(name)
				}
			}
		}
	}
	if sel == nil && out.Len() == 0 {
		out.Insert(p.Namespace)
	}
	return out
}

// register records a pending pod's constraints, creating their groups.
func (t *topology) register(p *corev1.Pod) error {
	var cs []constraint
	for _, tsc := range p.Spec.TopologySpreadConstraints {
		if t.ignorePreferences && tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			continue
		}
		sel := tsc.LabelSelector
		if sel == nil {
			sel = &metav1.LabelSelector{}
		} else {
			sel = withLabelKeys(sel, p, tsc.MatchLabelKeys, nil)
		}
		minDomains := int32(0)
		if tsc.MinDomains != nil {
			minDomains = *tsc.MinDomains
		}
		ignoreAffinity := tsc.NodeAffinityPolicy != nil && *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore
		honorTaints := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
		g, err := t.group(spread, tsc.TopologyKey, sel, sets.New(p.Namespace), tsc.MaxSkew, minDomains, ignoreAffinity, honorTaints)
		if err != nil {
			return err
		}
		cs = append(cs, constraint{group: g, required: tsc.WhenUnsatisfiable != corev1.ScheduleAnyway})
	}
	if a := p.Spec.Affinity; a != nil {
		add := func(kind groupKind, term corev1.PodAffinityTerm, required bool, weight int32) error {
			sel := term.LabelSelector
			if sel == nil {
				return nil // matches nothing
			}
			sel = withLabelKeys(sel, p, term.MatchLabelKeys, term.MismatchLabelKeys)
			g, err := t.group(kind, term.TopologyKey, sel, t.termNamespaces(p, term), 0, 0)
			if err != nil {
				return err
			}
			cs = append(cs, constraint{group: g, required: required, selfMatch: g.matches(p), weight: weight})
			return nil
		}
		if a.PodAffinity != nil {
			for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if err := add(affinity, term, true, 0); err != nil {
					return err
				}
			}
			for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				if t.ignorePreferences {
					break
				}
				if err := add(affinity, w.PodAffinityTerm, false, w.Weight); err != nil {
					return err
				}
			}
		}
		if a.PodAntiAffinity != nil {
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if err := add(antiAffinity, term, true, 0); err != nil {
					return err
				}
			}
			for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				if t.ignorePreferences {
					break
				}
				if err := add(antiAffinity, w.PodAffinityTerm, false, w.Weight); err != nil {
					return err
				}
			}
		}
	}
	if len(cs) > 0 {
		order := map[groupKind]int{affinity: 0, antiAffinity: 1, spread: 2}
		var soft []int
		for i, c := range cs {
			if !c.required {
				soft = append(soft, i)
			}
		}
		// By kind, then the lightest first: kube-scheduler scores a node by the weights of the
		// preferences it meets, so the heavier ones are kept the longest.
		sort.SliceStable(soft, func(a, b int) bool {
			x, y := cs[soft[a]], cs[soft[b]]
			if order[x.group.kind] != order[y.group.kind] {
				return order[x.group.kind] < order[y.group.kind]
			}
			return x.weight < y.weight
		})
		for rank, i := range soft {
			cs[i].rank = rank
		}
		t.byPod[p] = cs
	}
	return nil
}

// registerExisting records a bound pod's required anti-affinity terms, which constrain the
// pods placed near it.
func (t *topology) registerExisting(p *corev1.Pod, nodeLabels map[string]string) {
	if a := p.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
		return
	}
	for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.LabelSelector == nil {
			continue
		}
		sel := withLabelKeys(term.LabelSelector, p, term.MatchLabelKeys, term.MismatchLabelKeys)
		g, err := t.group(antiAffinity, term.TopologyKey, sel, t.termNamespaces(p, term), 0, 0)
		if err != nil {
			continue
		}
		if d, ok := nodeLabels[term.TopologyKey]; ok {
			g.owners[d]++
		}
	}
}

// count adds a pod that is on a node with the given domains to every group it matches.
// hostCounts, when set, also counts the pod for the hostname groups it matches: a NodeClaim
// keeps its own, so that precheckHostname does not hash hostnames.
func (t *topology) count(p *corev1.Pod, domainOf func(key string) (string, bool), hostCounts map[*group]int) {
	for _, g := range t.groups {
		if g.matches(p) {
			if d, ok := domainOf(g.key); ok {
				g.counts[d]++
				if hostCounts != nil && g.key == corev1.LabelHostname {
					hostCounts[g]++
				}
			}
		}
	}
	for _, c := range t.constraints(p) {
		if c.group.kind == antiAffinity && c.required {
			if d, ok := domainOf(c.group.key); ok {
				c.group.owners[d]++
			}
		}
	}
}

// choose picks, for each of a pod's constraints, a domain among the candidate's possible
// domains for its key; the result narrows a NodeClaim that could still be in several. It
// returns why no domain works otherwise.
func (t *topology) choose(p *corev1.Pod, strict bool, podReqs scheduling.Requirements, domainsOf func(key string) []string) (map[string]string, error) {
	var chosen map[string]string // most pods have no constraint: no map for them
	choose := func(key, d string) {
		if chosen == nil {
			chosen = make(map[string]string, 2)
		}
		chosen[key] = d
	}
	for _, c := range t.constraints(p) {
		if t.soft(c, strict) {
			continue
		}
		g := c.group
		candidates := domainsOf(g.key)
		if v, ok := chosen[g.key]; ok {
			candidates = []string{v}
		}
		if len(candidates) == 0 {
			if g.kind == antiAffinity {
				continue // no such label, nothing to be near
			}
			return nil, fmt.Errorf("%s on %s: the node would have no %s label", g.kind, g.key, g.key)
		}
		best, bestCount := "", math.MaxInt
		switch g.kind {
		case spread:
			low := t.globalMin(g, p, podReqs)
			for _, d := range candidates {
				if n := g.counts[d]; int32(n+1-low) <= g.maxSkew && n < bestCount {
					best, bestCount = d, n
				}
			}
			if best == "" {
				return nil, fmt.Errorf("topology spread on %s: every possible domain would exceed maxSkew %d", g.key, g.maxSkew)
			}
		case affinity:
			anyMatch := false
			for _, n := range g.counts {
				if n > 0 {
					anyMatch = true
					break
				}
			}
			for _, d := range candidates {
				if n := g.counts[d]; (n > 0 || (!anyMatch && c.selfMatch)) && (best == "" || n > bestCount) {
					best, bestCount = d, n
				}
			}
			if best == "" {
				return nil, fmt.Errorf("pod affinity on %s: no pod matching %s in a domain the node could be in", g.key, g.selectorID)
			}
		case antiAffinity:
			for _, d := range candidates {
				if g.counts[d] == 0 {
					best = d
					break
				}
			}
			if best == "" {
				return nil, fmt.Errorf("pod anti-affinity on %s: pods matching %s already in every domain the node could be in", g.key, g.selectorID)
			}
		}
		choose(g.key, best)
	}
	// Pods already placed may not want this one near them.
	for _, g := range t.anti {
		if !g.matches(p) {
			continue
		}
		d, ok := chosen[g.key]
		if !ok {
			ds := domainsOf(g.key)
			if len(ds) != 1 {
				// Pick a domain free of owners for an undecided NodeClaim.
				for _, cand := range ds {
					if g.owners[cand] == 0 {
						ok = true
						choose(g.key, cand)
						break
					}
				}
				if !ok && len(ds) > 0 {
					return nil, fmt.Errorf("pod anti-affinity of pods already placed on %s: every domain is taken", g.key)
				}
				continue
			}
			d = ds[0]
		}
		if g.owners[d] > 0 {
			return nil, fmt.Errorf("pod anti-affinity of a pod on %s=%s excludes pods matching %s", g.key, d, g.selectorID)
		}
	}
	return chosen, nil
}

// globalMin is the smallest count among the domains a pod could land in (0 when fewer than
// minDomains exist, or when the key is the hostname: a new node is always a new domain). As
// kube-scheduler counts them: domains the pod's node affinity excludes are left out unless
// nodeAffinityPolicy is Ignore, and with nodeTaintsPolicy Honor so are domains whose every
// node has a taint the pod does not tolerate.
func (t *topology) globalMin(g *group, p *corev1.Pod, podReqs scheduling.Requirements) int {
	if g.key == corev1.LabelHostname {
		return 0
	}
	eligible, low := 0, math.MaxInt
	for d := range t.domains[g.key] {
		if r, ok := podReqs[g.key]; ok && !r.Has(d) && !g.ignoreAffinity {
			continue
		}
		if g.honorTaints && !t.tolerable(p, g.key, d) {
			continue
		}
		eligible++
		low = min(low, g.counts[d])
	}
	if eligible == 0 || int32(eligible) < g.minDomains {
		return 0
	}
	return low
}

// precheckHostname turns a pod away from a NodeClaim whose hostname domain already breaks one
// of its hostname constraints, before any other work; counts are the NodeClaim's own counts of
// the hostname groups.
func (t *topology) precheckHostname(p *corev1.Pod, strict bool, counts map[*group]int) error {
	if len(counts) == 0 {
		return nil
	}
	for _, c := range t.constraints(p) {
		if t.soft(c, strict) || c.group.key != corev1.LabelHostname {
			continue
		}
		g := c.group
		switch g.kind {
		case spread:
			if int32(counts[g]+1) > g.maxSkew {
				return hostnameConflict{g}
			}
		case antiAffinity:
			if counts[g] > 0 {
				return hostnameConflict{g}
			}
		}
	}
	return nil
}

// hostnameGate is the pod's first required hostname constraint that a NodeClaim, once it
// refuses it, refuses for good (anti-affinity, or a spread whose maxSkew is reached: counts
// only grow); nil when it has none. The solver then tries the pod only on the NodeClaims
// the group leaves open, instead of every NodeClaim: with thousands of NodeClaims, that scan
// made large solves quadratic.
func (t *topology) hostnameGate(p *corev1.Pod) *group {
	for _, c := range t.constraints(p) {
		if c.required && c.group.key == corev1.LabelHostname && (c.group.kind == antiAffinity || c.group.kind == spread) {
			return c.group
		}
	}
	return nil
}

// closes reports whether a NodeClaim with these hostname counts refuses the group's pods.
func (g *group) closes(counts map[*group]int) bool {
	if g.kind == spread {
		return int32(counts[g]+1) > g.maxSkew
	}
	return counts[g] > 0
}

// constraints are the pod's topology constraints.
// The last pod's are kept: a pod is tried on many NodeClaims in a row.
func (t *topology) constraints(p *corev1.Pod) []constraint {
	if p != t.lastPod {
		t.lastPod, t.lastCons = p, t.byPod[p]
	}
	return t.lastCons
}

// waitsOnOthers reports whether placing other pods may let the pod in: it has a pod
// affinity or a topology spread (required or preferred).
func (t *topology) waitsOnOthers(p *corev1.Pod) bool {
	for _, c := range t.constraints(p) {
		if c.group.kind == affinity || c.group.kind == spread {
			return true
		}
	}
	return false
}

// hostnameConflict is precheckHostname's refusal. It is formatted only when read: most
// refusals are of NodeClaims the pod is merely tried on, and formatting them was most of a
// large solve's time.
type hostnameConflict struct{ g *group }

func (e hostnameConflict) Error() string {
	if e.g.kind == spread {
		return fmt.Sprintf("topology spread on %s: maxSkew %d reached on this node", e.g.key, e.g.maxSkew)
	}
	return fmt.Sprintf("pod anti-affinity on %s: a pod matching %s is on this node", e.g.key, e.g.selectorID)
}
