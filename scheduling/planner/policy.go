// Package planner puts the policy engine around the solver for one provisioning batch, the
// same way for the provisioner and for `karpenterctl simulate --policies`:
//
//  1. once per (namespace, NodePool) the engine turns budgets and CapacityPolicies into
//     constraints: instance types and capacity types refused, a price ceiling, the budget in
//     force;
//  2. the solver places the pods with those constraints through its policy hook;
//  3. Spot NodeClaims are launched on-demand until every namespace's Spot share ends within
//     its bounds above the on-demand base, or, when that cannot do it, the pods are assigned
//     Spot or on-demand and solved again (spot.go);
//  4. pods that would take a namespace past its hourly limit are held back, cheapest kept
//     first, and the rest solved again; then the held pods are tried again on NodeClaims no
//     dearer than what their namespace has left (refill.go);
//  5. every new NodeClaim passes the launch gate with the cost it attributes to each
//     namespace, counting the NodeClaims in flight and those let through before it.
//
// It does no I/O.
package planner

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	policyv1 "github.com/karpenter-policy/karpenter/api/policy/v1"
	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/policies"
	"github.com/karpenter-policy/karpenter/scheduling"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// Planner applies the policies in force to one batch.
type Planner struct {
	Engine *policies.Engine
	// Namespaces by name, with their labels; a pod's namespace missing here has no labels.
	Namespaces map[string]policies.Namespace
	// Budgets are the CapacityBudgets by namespace.
	Budgets map[string]*policyv1.CapacityBudget
	// ClusterBudgets are the ClusterCapacityBudgets, by name (teams.go).
	ClusterBudgets []*ClusterBudget
	Now            time.Time
	// AssumeGated treats every pending pod of a namespace whose budget holds pods back as
	// the CapacityBudget gate's admission would leave it, gated (karpenterctl, whose pods come
	// from manifests); otherwise a pod is gated when it carries the gate.
	AssumeGated bool
}

// Outcome is a batch's decision with the policies applied.
type Outcome struct {
	// Result is the solver's decision; Unschedulable includes the pods policies hold back,
	// and NodeClaims only those the launch gate let through.
	Result *solver.Result
	// Blocked are the pods a Deny holds back, each with the violation.
	Blocked []Blocked
	// Warnings are Warn results and the violations of Warn sources; DryRun those of DryRun
	// sources. Neither blocked anything.
	Warnings []policies.Violation
	DryRun   []policies.Violation
	Errors   []policies.EvalError
	// Exemptions are what CapacityExceptions let through in the batch, deduplicated.
	Exemptions []policies.Exemption
	// Namespaces are the namespaces with pending pods, by name.
	Namespaces map[string]*Namespace
	// Teams are the ClusterCapacityBudgets that select a namespace with pending pods, by
	// TeamKey: their namespaces' usage together, what the batch adds, and the pods they hold.
	Teams map[string]*Namespace
}

// Blocked is a pod a policy keeps pending.
type Blocked struct {
	Pod       *corev1.Pod
	Violation policies.Violation
}

// Namespace is one namespace's account of the batch.
type Namespace struct {
	// Before is its usage on running nodes and in-flight NodeClaims before the batch.
	Before policies.Usage
	// Added is what the batch's placements add, new NodeClaims counted in flight.
	Added policies.Usage
	// Budget is its budget in force, nil when it has none.
	Budget  *policies.BudgetInForce
	Blocked []Blocked
	// Members are, for a ClusterCapacityBudget's account (Outcome.Teams), the namespaces it
	// selects.
	Members []string

	// teams are the accounts of the ClusterCapacityBudgets that select a namespace; cluster
	// is a team account's budget.
	teams   []string
	cluster *ClusterBudget
}

// After is the namespace's usage once the batch's NodeClaims launch.
func (n *Namespace) After() policies.Usage { return n.Before.Add(n.Added) }

// PricePerHour is its run-rate once the batch launches.
func (n *Namespace) PricePerHour() float64 {
	a := n.After()
	return a.HourlyCost + a.InFlightHourlyCost
}

// budgetTolerance keeps rounding in attribution from refusing what exactly fits; the Rego
// library uses the same.
const budgetTolerance = 0.005

type nsPool struct{ namespace, pool string }

// Solve runs the batch through the policies and the solver.
func (p *Planner) Solve(ctx context.Context, in *solver.Input) (*Outcome, error) {
	book := NewPriceBook(poolTypes(in.NodePools)...)
	if in.Requests == nil || in.Catalog == nil {
		// One cache of requests and one of prepared instance types for the planner and
		// every solve of the batch.
		withCache := *in
		if withCache.Requests == nil {
			withCache.Requests = scheduling.NewPodRequestCache()
		}
		if withCache.Catalog == nil {
			withCache.Catalog = solver.NewCatalog()
		}
		in = &withCache
	}
	z := sizes{in.Requests}
	before := usageOf(in.Nodes, book, z)
	p.uncommitIdle(in.Pods, in.Nodes, book, z, before)
	out := &Outcome{Namespaces: map[string]*Namespace{}}
	var order []string
	for _, pod := range in.Pods {
		if _, ok := out.Namespaces[pod.Namespace]; !ok {
			out.Namespaces[pod.Namespace] = &Namespace{Before: before[pod.Namespace]}
			order = append(order, pod.Namespace)
		}
	}
	accounts := p.openTeams(before, out)
	cons, err := p.evaluate(ctx, in, order, before, out)
	if err != nil {
		return nil, err
	}
	h := newHook(cons)
	pending := make([]*corev1.Pod, 0, len(in.Pods))
	for _, pod := range in.Pods {
		if v, blocked := deniedEverywhere(cons, pod.Namespace, in.NodePools); blocked {
			out.block(pod, v)
			continue
		}
		pending = append(pending, pod)
	}
	tr := &trimmer{p: p, in: in, h: h, book: book, accounts: accounts, z: z}
	first, err := tr.trim(pending, h, nil)
	if err != nil {
		return nil, err
	}
	final, err := tr.refill(first)
	if err != nil {
		return nil, err
	}
	for _, b := range final.held {
		out.block(b.Pod, b.Violation)
	}
	res := final.res
	p.gate(ctx, res, out, z)
	p.account(res, in.Nodes, book, out, z)
	accountTeams(out)
	for _, b := range out.Blocked {
		res.Unschedulable = append(res.Unschedulable, solver.Unschedulable{Pod: b.Pod, Reason: b.Violation.Message})
	}
	out.Result, out.Warnings, out.DryRun = res, dedupe(out.Warnings), dedupe(out.DryRun)
	out.Exemptions = dedupeExemptions(out.Exemptions)
	return out, nil
}

// uncommitIdle bounds the idle room of a namespace's nodes counted as committed by what
// kube-scheduler can fill it with: the namespace's pending pods that the CapacityBudget gate
// does not hold, each at no less than it could cost on any node. When its budget holds pods back
// and the gate holds every pending pod, that is nothing: they run only where the planner
// places them, at their own cost (docs/architecture.md, "CapacityBudget gate"). Charging the
// whole idle room anyway left gated namespaces at a fraction of their budgets.
func (p *Planner) uncommitIdle(pods []*corev1.Pod, nodes []*scheduling.Node, book PriceBook, z sizes, before map[string]policies.Usage) {
	// The most a vCPU and a byte cost on any node bound what a pod can cost on one (see
	// policies.AttributedCost), in one pass over the nodes.
	var perCPU, perByte float64
	for _, n := range nodes {
		price := n.PricePerHour
		if price == 0 {
			price, _ = book.Price(n.Labels)
		}
		if c := float64(n.Allocatable.Cpu().MilliValue()) / 1000; c > 0 {
			perCPU = max(perCPU, price/c)
		}
		if m := float64(n.Allocatable.Memory().Value()); m > 0 {
			perByte = max(perByte, price/m)
		}
	}
	open := map[string]float64{}
	for _, pod := range pods {
		if p.AssumeGated || scheduling.IsBudgetGated(pod) {
			continue
		}
		if !p.HoldsPods(pod.Namespace) {
			continue
		}
		cpu, mem := z.of(pod)
		open[pod.Namespace] += (perCPU*cpu + perByte*mem) / 2
	}
	for ns, u := range before {
		if !p.HoldsPods(ns) {
			continue
		}
		u.IdleHourlyCost = min(u.IdleHourlyCost, open[ns])
		before[ns] = u
	}
}

func (o *Outcome) block(pod *corev1.Pod, v policies.Violation) {
	b := Blocked{Pod: pod, Violation: v}
	o.Blocked = append(o.Blocked, b)
	if ns, ok := o.Namespaces[pod.Namespace]; ok {
		ns.Blocked = append(ns.Blocked, b)
	}
}

// evaluate runs the provisioning decision point once per (namespace, NodePool).
func (p *Planner) evaluate(ctx context.Context, in *solver.Input, namespaces []string, before map[string]policies.Usage, out *Outcome) (map[nsPool]*policies.Constraints, error) {
	types := make(map[string]*policies.InstanceTypes, len(in.NodePools))
	for _, np := range in.NodePools {
		its, err := p.Engine.InstanceTypes(InstanceTypeInfos(np.InstanceTypes))
		if err != nil {
			return nil, fmt.Errorf("nodepool %s: %w", np.NodePool.Name, err)
		}
		types[np.NodePool.Name] = its
	}
	keys := make([]nsPool, 0, len(namespaces)*len(in.NodePools))
	for _, name := range namespaces {
		for _, np := range in.NodePools {
			keys = append(keys, nsPool{name, np.NodePool.Name})
		}
	}
	results := make([]*policies.Constraints, len(keys))
	parallel(len(keys), func(i int) {
		k := keys[i]
		ns, ok := p.Namespaces[k.namespace]
		if !ok {
			ns = policies.Namespace{Name: k.namespace}
		}
		results[i] = p.Engine.Provisioning(ctx, policies.ProvisioningInput{Namespace: ns, NodePool: k.pool,
			InstanceTypes: types[k.pool], Budget: p.Budgets[k.namespace], Usage: before[k.namespace], Now: p.Now})
	})
	cons := make(map[nsPool]*policies.Constraints, len(keys))
	for i, k := range keys {
		c := results[i]
		cons[k] = c
		out.Warnings = append(out.Warnings, c.Warned()...)
		out.DryRun = append(out.DryRun, c.DryRun()...)
		out.Errors = append(out.Errors, c.Errors...)
		out.Exemptions = append(out.Exemptions, c.Exemptions...)
		if c.Budget != nil && out.Namespaces[k.namespace].Budget == nil {
			out.Namespaces[k.namespace].Budget = c.Budget
		}
	}
	p.evaluateTeams(ctx, in, types, cons, out)
	return cons, nil
}

// parallel runs f(0) to f(n-1) on every core; the engine evaluates concurrently.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}

// InstanceTypeInfos are instance types as policies see them (the engine's input).
func InstanceTypeInfos(its []*cloudprovider.InstanceType) []policies.InstanceTypeInfo {
	out := make([]policies.InstanceTypeInfo, 0, len(its))
	for _, it := range its {
		info := policies.InstanceTypeInfo{Name: it.Name, Family: Family(it), Category: it.Labels[karpv1.LabelInstanceCategory],
			Architecture: it.Labels[corev1.LabelArchStable], GPUName: it.Labels[karpv1.LabelInstanceGPUName],
			CPU: float64(it.Capacity.Cpu().MilliValue()) / 1000, MemoryGiB: float64(it.Capacity.Memory().Value()) / (1 << 30)}
		// Absent or malformed labels leave zero.
		info.Generation, _ = strconv.Atoi(it.Labels[karpv1.LabelInstanceGeneration])
		info.GPUs, _ = strconv.Atoi(it.Labels[karpv1.LabelInstanceGPUCount])
		cts := map[string]bool{}
		first := true
		for _, o := range it.Offerings.Available() {
			if !cts[o.CapacityType] {
				cts[o.CapacityType] = true
				info.CapacityTypes = append(info.CapacityTypes, o.CapacityType)
			}
			if first || o.Price < info.MinPricePerHour {
				info.MinPricePerHour, first = o.Price, false
			}
		}
		sort.Strings(info.CapacityTypes)
		out = append(out, info)
	}
	return out
}

// deniedEverywhere reports a Deny that keeps the namespace off every NodePool.
func deniedEverywhere(cons map[nsPool]*policies.Constraints, ns string, pools []*solver.NodePool) (policies.Violation, bool) {
	var first policies.Violation
	for i, np := range pools {
		d := cons[nsPool{ns, np.NodePool.Name}].Denied()
		if len(d) == 0 {
			return policies.Violation{}, false
		}
		if i == 0 {
			first = d[0]
		}
	}
	return first, len(pools) > 0
}

// overBudget finds the pods that would take a namespace past its hourly limit: with what
// the namespace already commits and its placements on existing nodes counted first, the
// pods on new NodeClaims are kept cheapest first while they fit.
func (p *Planner) overBudget(res *solver.Result, nodes []*scheduling.Node, book PriceBook, namespaces map[string]*Namespace, z sizes) []Blocked {
	over := p.overBudgetByPod(res, nodes, book, namespaces, z)
	return append(over, p.overBudgetBySpareRoom(res, namespaces, z, over)...)
}

// overBudgetByPod holds back, per namespace, the pods placed past its limit, on nodes with
// room or on new NodeClaims, cheapest kept first.
func (p *Planner) overBudgetByPod(res *solver.Result, nodes []*scheduling.Node, book PriceBook, namespaces map[string]*Namespace, z sizes) []Blocked {
	running := denyLimited(namespaces)
	if len(running) == 0 {
		return nil
	}
	type placed struct {
		pod  *corev1.Pod
		cost float64
		key  string
	}
	onClaims := map[string][]placed{}
	added := map[string]float64{}
	charge := func(account string, pod *corev1.Pod, cost float64) {
		onClaims[account] = append(onClaims[account], placed{pod: pod, cost: cost})
		added[account] += cost
	}
	// A pod placed on a node with room adds its share of that node to the run-rate as much as
	// one on a new NodeClaim, and with the CapacityBudget gate it runs only if let through.
	onExisting(res, nodes, book, z, running, namespaces, charge)
	for name, shares := range nsShares(res, z, nil, namespaces) {
		if _, ok := running[name]; ok {
			for _, sh := range shares {
				for i, pod := range sh.pods {
					charge(name, pod, sh.costs[i])
				}
			}
		}
	}
	var over []Blocked
	heldNow := map[*corev1.Pod]bool{}
	// Namespaces' own budgets first, then the ClusterCapacityBudgets, which do not count what
	// the namespaces' budgets held.
	names := slices.Sorted(maps.Keys(onClaims))
	sort.SliceStable(names, func(i, j int) bool { return !isTeam(names[i]) && isTeam(names[j]) })
	for _, name := range names {
		ps, b := onClaims[name], namespaces[name].Budget
		if isTeam(name) {
			kept := ps[:0:0]
			for _, x := range ps {
				if !heldNow[x.pod] {
					kept = append(kept, x)
				}
			}
			ps = kept
			added[name] = 0
			for _, x := range ps {
				added[name] += x.cost
			}
		}
		if running[name]+added[name] <= b.HourlyLimit+budgetTolerance {
			continue // all of them fit
		}
		for i := range ps {
			ps[i].key = solver.PodKey(ps[i].pod)
		}
		sort.SliceStable(ps, func(i, j int) bool {
			if ps[i].cost != ps[j].cost {
				return ps[i].cost < ps[j].cost
			}
			return ps[i].key < ps[j].key
		})
		total := running[name]
		for _, x := range ps {
			if total+x.cost <= b.HourlyLimit+budgetTolerance {
				total += x.cost
				continue
			}
			if !heldNow[x.pod] {
				heldNow[x.pod] = true
				over = append(over, overrun(b, x.pod.Namespace, x.pod, total, x.cost))
			}
		}
	}
	return over
}

func overrun(b *policies.BudgetInForce, namespace string, pod *corev1.Pod, committed, cost float64) Blocked {
	return Blocked{Pod: pod, Violation: policies.Violation{Source: b.Source, Enforcement: b.Enforcement, Namespace: namespace,
		Message: fmt.Sprintf("%s: hourly cost %.2f + %.2f would exceed %.2f (%s)", b.Source, committed, cost, b.HourlyLimit, b.LimitReason)}}
}

// overBudgetBySpareRoom accounts for kube-scheduler: it binds a pending pod to any node with
// room, so a namespace's pods (those held back now, or created later) may take the idle room
// of the nodes launched for it. A namespace is charged for each new NodeClaim it has pods on
// its share plus the NodeClaim's idle room; where that passes its limit, the NodeClaim with
// the most idle room is given up (its pods held too) until what is left fits.
func (p *Planner) overBudgetBySpareRoom(res *solver.Result, namespaces map[string]*Namespace, z sizes, over []Blocked) []Blocked {
	heldNow := map[*corev1.Pod]bool{}
	for _, b := range over {
		heldNow[b.Pod] = true
	}
	byNS := nsShares(res, z, heldNow, namespaces)
	var more []Blocked
	names := slices.Sorted(maps.Keys(byNS))
	sort.SliceStable(names, func(i, j int) bool { return !isTeam(names[i]) && isTeam(names[j]) })
	recounted := false
	for _, name := range names {
		if isTeam(name) && !recounted {
			// The teams' shares without what the namespaces' own budgets gave up (in heldNow).
			recounted = true
			byNS = nsShares(res, z, heldNow, namespaces)
		}
		b := namespaces[name].Budget
		if b == nil || !b.HasLimit || b.Enforcement != policyv1.EnforcementDeny {
			continue
		}
		shares := byNS[name]
		total := b.Committed
		for _, sh := range shares {
			total += sh.cost + sh.idle
		}
		var dropped []*nsShare
		for len(shares) > 0 && total > b.HourlyLimit+budgetTolerance {
			worst := 0
			for i := range shares {
				if shares[i].idle > shares[worst].idle {
					worst = i
				}
			}
			total -= shares[worst].cost + shares[worst].idle
			dropped = append(dropped, shares[worst])
			shares = append(shares[:worst], shares[worst+1:]...)
		}
		// Take back, cheapest first, what fits once the rest is given up; what stays given up
		// would pass the limit on top of what is kept, as its message says.
		sort.SliceStable(dropped, func(i, j int) bool { return dropped[i].cost+dropped[i].idle < dropped[j].cost+dropped[j].idle })
		var gone []*nsShare
		for _, sh := range dropped {
			if total+sh.cost+sh.idle <= b.HourlyLimit+budgetTolerance {
				total += sh.cost + sh.idle
				continue
			}
			gone = append(gone, sh)
		}
		for _, sh := range gone {
			for _, pod := range sh.pods {
				if !heldNow[pod] {
					heldNow[pod] = true
					more = append(more, overrun(b, pod.Namespace, pod, total, sh.cost+sh.idle))
				}
			}
		}
	}
	return more
}

// gate passes each new NodeClaim through the launch decision point, in order, counting the
// ones let through before it as in flight; a denied NodeClaim is dropped and its pods held.
// The evaluations run in parallel on the assumption that every NodeClaim passes; from the
// first denial on, the rest are evaluated again one by one with what was let through. When
// the budgets fit the whole batch (one evaluation, see Engine.LaunchBudgetsFit), only the
// CapacityPolicies are evaluated per NodeClaim.
func (p *Planner) gate(ctx context.Context, res *solver.Result, out *Outcome, z sizes) {
	launched := map[string]float64{}
	inputs := make([]launchInput, len(res.NodeClaims))
	all := make([]policies.LaunchInput, len(res.NodeClaims))
	for i, c := range res.NodeClaims {
		inputs[i] = p.launchInput(c, launched, out, z)
		all[i] = inputs[i].in
		for n, s := range inputs[i].shares {
			launched[n] += s.Cost
		}
	}
	launch := p.Engine.Launch
	if p.Engine.LaunchBudgetsFit(ctx, all) {
		launch = p.Engine.LaunchPolicies
	}
	decisions := make([]*policies.Decision, len(inputs))
	parallel(len(inputs), func(i int) { decisions[i] = launch(ctx, inputs[i].in) })
	launched = map[string]float64{}
	teamLaunched := map[string]float64{}
	kept := res.NodeClaims[:0:0]
	redo := false
	for i, c := range res.NodeClaims {
		in, d := inputs[i], decisions[i]
		if redo {
			in = p.launchInput(c, launched, out, z)
			d = p.Engine.Launch(ctx, in.in)
		}
		teamCosts, over := p.teamOver(c, teamLaunched, out, z)
		if over != nil {
			redo = true
			for _, pod := range c.Pods {
				v := *over
				v.Namespace = pod.Namespace
				out.block(pod, v)
			}
			continue
		}
		out.Warnings = append(out.Warnings, d.Warned()...)
		out.DryRun = append(out.DryRun, d.DryRun()...)
		out.Errors = append(out.Errors, d.Errors...)
		out.Exemptions = append(out.Exemptions, d.Exemptions...)
		if denied := d.Denied(); len(denied) > 0 {
			redo = true
			for _, pod := range c.Pods {
				v := denied[0]
				for _, x := range denied {
					if x.Namespace == pod.Namespace {
						v = x
						break
					}
				}
				if v.Namespace != pod.Namespace {
					v.Message = fmt.Sprintf("NodeClaim %s shared with pods %s denies: %s", c.InstanceType.Name, v.Source, v.Message)
				}
				out.block(pod, v)
			}
			continue
		}
		for n, s := range in.shares {
			launched[n] += s.Cost
		}
		for key, cost := range teamCosts {
			teamLaunched[key] += cost
		}
		kept = append(kept, c)
	}
	res.NodeClaims = kept
}

// launchInput is a NodeClaim's input to the launch decision point, with each namespace's
// share of its cost.
type launchInput struct {
	in     policies.LaunchInput
	shares map[string]*policies.LaunchNamespace
}

// launchInput charges each namespace with pods on the NodeClaim its pods' cost and the idle
// room, on top of its usage and what was launched before.
func (p *Planner) launchInput(c *solver.NodeClaim, launched map[string]float64, out *Outcome, z sizes) launchInput {
	alloc := c.InstanceType.Allocatable()
	idle := c.Offering.Price
	shares := map[string]*policies.LaunchNamespace{}
	var names []string
	for _, pod := range c.Pods {
		s, ok := shares[pod.Namespace]
		if !ok {
			ns, known := p.Namespaces[pod.Namespace]
			if !known {
				ns = policies.Namespace{Name: pod.Namespace}
			}
			usage := out.Namespaces[pod.Namespace].Before
			usage.InFlightHourlyCost += launched[pod.Namespace]
			s = &policies.LaunchNamespace{Namespace: ns, Budget: p.Budgets[pod.Namespace], Usage: usage}
			shares[pod.Namespace] = s
			names = append(names, pod.Namespace)
		}
		cost, cpu := z.cost(pod, c.Offering.Price, alloc)
		s.Cost += cost
		s.CPU += cpu
		s.Pods++
		idle -= cost
	}
	// Each namespace is charged the idle room too, which its pending pods may take.
	for _, sh := range shares {
		sh.Cost += max(0, idle)
	}
	sort.Strings(names)
	in := policies.LaunchInput{NodePool: c.NodePool, InstanceType: c.InstanceType.Name, Family: Family(c.InstanceType),
		CapacityType: c.Offering.CapacityType, Zone: c.Offering.Zone, PricePerHour: c.Offering.Price, Now: p.Now}
	for _, n := range names {
		in.Namespaces = append(in.Namespaces, *shares[n])
	}
	return launchInput{in: in, shares: shares}
}

// account adds the batch's placements to each namespace's usage.
func (p *Planner) account(res *solver.Result, nodes []*scheduling.Node, book PriceBook, out *Outcome, z sizes) {
	added := map[string]policies.Usage{}
	byName := map[string]*scheduling.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for name, pods := range res.Existing {
		if n := byName[name]; n != nil {
			price, _ := book.Price(n.Labels)
			for _, pod := range pods {
				z.charge(added, pod, price, n.Allocatable, capacityTypeOf(n), n.InFlight)
			}
		}
	}
	for _, c := range res.NodeClaims {
		alloc := c.InstanceType.Allocatable()
		for _, pod := range c.Pods {
			z.charge(added, pod, c.Offering.Price, alloc, c.Offering.CapacityType, true)
		}
	}
	for name, u := range added {
		if ns, ok := out.Namespaces[name]; ok {
			ns.Added = u
		}
	}
}

func dedupeExemptions(xs []policies.Exemption) []policies.Exemption {
	seen := map[policies.Exemption]bool{}
	out := xs[:0:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func dedupe(vs []policies.Violation) []policies.Violation {
	seen := map[string]bool{}
	var out []policies.Violation
	for _, v := range vs {
		k := v.Source.String() + "\x00" + v.Message
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

// hook is the solver's view of the constraints: a lookup per pod and NodePool.
type hook struct {
	cons map[nsPool]*policies.Constraints
	// capacityType is the capacity type a pod was assigned to keep its namespace's Spot share.
	capacityType map[*corev1.Pod]string
	built        map[hookKey]*solver.Constraints
	// byContent shares one Constraints among namespaces whose constraints are the same (a
	// CapacityPolicy's price ceiling for all of them, say): the solver then applies them to
	// a NodeClaim once, not once per namespace on it.
	byContent map[string]*solver.Constraints
}

type hookKey struct {
	nsPool
	capacityType string
}

func newHook(cons map[nsPool]*policies.Constraints) *hook {
	return &hook{cons: cons, capacityType: map[*corev1.Pod]string{}, built: map[hookKey]*solver.Constraints{},
		byContent: map[string]*solver.Constraints{}}
}

// Constraints implements solver.PolicyHook.
func (h *hook) Constraints(pod *corev1.Pod, pool string) *solver.Constraints {
	k := hookKey{nsPool{pod.Namespace, pool}, h.capacityType[pod]}
	if c, ok := h.built[k]; ok {
		return c
	}
	pc := h.cons[k.nsPool]
	c := toSolver(pc, k.capacityType)
	if c != nil {
		key := contentKey(pc, c, k.capacityType)
		if same, ok := h.byContent[key]; ok {
			c = same
		} else {
			h.byContent[key] = c
		}
	}
	h.built[k] = c
	return c
}

// contentKey identifies what toSolver made of constraints: the capacity type, the reason
// given, the instance types refused and the offering filter.
func contentKey(pc *policies.Constraints, c *solver.Constraints, capacityType string) string {
	var types []string
	if pc != nil {
		types = slices.Sorted(maps.Keys(pc.DeniedInstanceTypes))
	}
	return fmt.Sprintf("%s\x00%s\x00%v\x00%s\x00%t", capacityType, c.Source, types, c.OfferingKey, c.AllowOffering != nil)
}

// toSolver turns a (namespace, NodePool)'s constraints and a pod's capacity type into the
// solver's requirements and offering filter; nil when nothing constrains.
func toSolver(c *policies.Constraints, capacityType string) *solver.Constraints {
	if c == nil {
		c = &policies.Constraints{}
	}
	denied := c.Denied()
	if len(denied) == 0 && len(c.DeniedInstanceTypes) == 0 && len(c.DeniedCapacityTypes) == 0 && c.PriceCeiling == 0 && capacityType == "" {
		return nil
	}
	out := &solver.Constraints{}
	var sources []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			sources = append(sources, s)
		}
	}
	if capacityType != "" {
		out.Requirements = []corev1.NodeSelectorRequirement{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{capacityType}}}
		if c.Budget != nil {
			add(fmt.Sprintf("%s (Spot share: %s)", c.Budget.Source, capacityType))
		}
	}
	for _, v := range c.DeniedInstanceTypes {
		add(v.Source.String())
	}
	for _, v := range c.DeniedCapacityTypes {
		add(v.Source.String())
	}
	if c.PriceCeiling > 0 {
		add(fmt.Sprintf("%s (at most $%.4f/hour)", c.PriceCeilingBy.Source, c.PriceCeiling))
	}
	if len(denied) > 0 {
		out.AllowOffering = func(*cloudprovider.InstanceType, cloudprovider.Offering) bool { return false }
		out.Source = denied[0].Message
		return out
	}
	if types := c.DeniedInstanceTypes; len(types) > 0 {
		out.AllowType = func(it *cloudprovider.InstanceType) bool {
			_, no := types[it.Name]
			return !no
		}
	}
	cts, ceiling := c.DeniedCapacityTypes, c.PriceCeiling
	if len(cts) > 0 || ceiling > 0 {
		names := slices.Sorted(maps.Keys(cts))
		out.OfferingKey = fmt.Sprintf("ceiling=%g deny=%v", ceiling, names)
	}
	switch {
	case len(cts) > 0:
		out.AllowOffering = func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
			_, no := cts[o.CapacityType]
			return !no && (ceiling == 0 || o.Price <= ceiling)
		}
	case ceiling > 0:
		out.AllowOffering = func(_ *cloudprovider.InstanceType, o cloudprovider.Offering) bool { return o.Price <= ceiling }
	}
	sort.Strings(sources)
	for i, s := range sources {
		if i > 0 {
			out.Source += ", "
		}
		out.Source += s
	}
	return out
}

// New is the planner over the engine for a cluster's namespaces (with their labels),
// CapacityBudgets and ClusterCapacityBudgets: a namespace with several budgets is governed by
// the first by name, and a budget being deleted governs nothing.
func New(engine *policies.Engine, namespaces []*corev1.Namespace, budgets []*policyv1.CapacityBudget, clusterBudgets []*policyv1.ClusterCapacityBudget, now time.Time) *Planner {
	pl := &Planner{Engine: engine, Namespaces: make(map[string]policies.Namespace, len(namespaces)), Budgets: map[string]*policyv1.CapacityBudget{}, Now: now}
	for _, ns := range namespaces {
		pl.Namespaces[ns.Name] = policies.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	for _, b := range budgets {
		if b.DeletionTimestamp != nil {
			continue
		}
		if cur, ok := pl.Budgets[b.Namespace]; !ok || b.Name < cur.Name {
			pl.Budgets[b.Namespace] = b
		}
	}
	pl.ClusterBudgets = ClusterBudgets(clusterBudgets)
	return pl
}
