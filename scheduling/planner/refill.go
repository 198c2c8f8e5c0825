package planner

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-policy/karpenter/cloudprovider"
	"github.com/karpenter-policy/karpenter/scheduling/solver"
)

// trimRounds bounds how often pods over a budget are held back and the rest solved again;
// the launch gate catches what packing changes after the last round.
const trimRounds = 3

// refillRounds bounds how often the pods a budget held back are tried again on NodeClaims no
// dearer than what their namespace has left.
const refillRounds = 3

// trimmed is a solve of the batch with the pods over a budget held back.
type trimmed struct {
	res *solver.Result
	// solved are the pods of the last solve (those held back left out).
	solved []*corev1.Pod
	held   []Blocked
	// over are pods still over a budget after the last round, left to the launch gate.
	over int
}

// trimmer is what every solve of one batch shares.
type trimmer struct {
	p    *Planner
	in   *solver.Input
	h    *hook
	book PriceBook
	// accounts are the namespaces with pending pods and the ClusterCapacityBudgets' accounts
	// (teams.go).
	accounts map[string]*Namespace
	z        sizes
	// perPod: the pods were assigned capacity types once (spotByPod); not again.
	perPod bool
}

// trim solves pending under the policy hook, seeded with seed: the pods that would take a
// namespace past its limit are held back and the rest solved again, at most trimRounds times.
func (t *trimmer) trim(pending []*corev1.Pod, policy solver.PolicyHook, seed []*solver.NodeClaim) (trimmed, error) {
	out := trimmed{}
	for round := 0; ; round++ {
		solveIn := *t.in
		solveIn.Pods, solveIn.Policy, solveIn.Seed = pending, policy, seed
		res, err := solver.Solve(&solveIn)
		if err != nil {
			return out, err
		}
		if !spotByClaim(res, t.h, t.accounts, t.z) && !t.perPod {
			t.perPod = true
			if res, err = spotByPod(res, &solveIn, t.h, t.accounts, t.z); err != nil {
				return out, err
			}
		}
		out.res, out.solved = res, pending
		over := t.p.overBudget(res, t.in.Nodes, t.book, t.accounts, t.z)
		if len(over) == 0 || round == trimRounds {
			out.over = len(over)
			return out, nil
		}
		out.held = append(out.held, over...)
		pending = without(pending, over)
		// Most pods stay where the last round put them.
		seed = res.NodeClaims
	}
}

// without is pods less those blocked, in order.
func without(pods []*corev1.Pod, blocked []Blocked) []*corev1.Pod {
	drop := make(map[*corev1.Pod]bool, len(blocked))
	for _, b := range blocked {
		drop[b.Pod] = true
	}
	kept := make([]*corev1.Pod, 0, len(pods))
	for _, pod := range pods {
		if !drop[pod] {
			kept = append(kept, pod)
		}
	}
	return kept
}

// refill tries the pods a budget held back again, each capped at what its namespace has left
// (its limit less what it commits with the batch as it stands): holding them back is decided
// per NodeClaim, so pods held off a NodeClaim too dear for the budget may fit on a smaller
// one. A round is kept only if it places more pods than it holds back anew, and holds none
// over a budget; the rest stay held with the reason they were first held for.
func (t *trimmer) refill(cur trimmed) (trimmed, error) {
	for round := 0; round < refillRounds && len(cur.held) > 0 && cur.over == 0; round++ {
		left := t.headroom(cur.res)
		caps := map[*corev1.Pod]float64{}
		var retry, stay []Blocked
		for _, b := range cur.held {
			// The least any of its accounts has left; a pod of a namespace with no limit of its
			// own but under a ClusterCapacityBudget is capped by the team's.
			l, capped := 0.0, false
			for _, a := range accountsOf(t.accounts, b.Pod.Namespace) {
				if x, ok := left[a]; ok && (!capped || x < l) {
					l, capped = x, true
				}
			}
			if capped && l > 0 {
				caps[b.Pod] = l
				retry = append(retry, b)
			} else {
				stay = append(stay, b)
			}
		}
		if len(retry) == 0 {
			break
		}
		pending := append(append([]*corev1.Pod(nil), cur.solved...), podsOf(retry)...)
		next, err := t.trim(pending, &capped{hook: t.h, caps: caps, built: map[cappedKey]*solver.Constraints{}}, cur.res.NodeClaims)
		if err != nil {
			return cur, err
		}
		if next.over > 0 {
			break
		}
		placed := placedIn(next.res)
		gained := 0
		var unplaced []Blocked
		for _, b := range retry {
			if placed[b.Pod] {
				gained++
			} else {
				unplaced = append(unplaced, b)
			}
		}
		heldAgain := map[*corev1.Pod]bool{}
		for _, b := range next.held {
			heldAgain[b.Pod] = true
		}
		for pod := range placedIn(cur.res) {
			if !placed[pod] {
				gained-- // placed before this round, held back or left out now
			}
		}
		if gained <= 0 {
			break
		}
		// A retried pod the capped solve found no room for is still held for its budget, not
		// unschedulable.
		drop := map[*corev1.Pod]bool{}
		for _, b := range unplaced {
			drop[b.Pod] = true
		}
		kept := next.res.Unschedulable[:0:0]
		for _, u := range next.res.Unschedulable {
			if !drop[u.Pod] {
				kept = append(kept, u)
			}
		}
		next.res.Unschedulable = kept
		var held []Blocked
		held = append(held, stay...)
		for _, b := range unplaced {
			if !heldAgain[b.Pod] {
				held = append(held, b)
			}
		}
		next.held = append(held, next.held...)
		next.solved = without(next.solved, unplaced)
		cur = next
	}
	return cur, nil
}

func podsOf(bs []Blocked) []*corev1.Pod {
	out := make([]*corev1.Pod, len(bs))
	for i, b := range bs {
		out[i] = b.Pod
	}
	return out
}

// placedIn are the pods a result places, on nodes with room or new NodeClaims.
func placedIn(res *solver.Result) map[*corev1.Pod]bool {
	out := map[*corev1.Pod]bool{}
	for _, pods := range res.Existing {
		for _, pod := range pods {
			out[pod] = true
		}
	}
	for _, c := range res.NodeClaims {
		for _, pod := range c.Pods {
			out[pod] = true
		}
	}
	return out
}

// headroom is, per account (a namespace, or a ClusterCapacityBudget's) whose budget denies
// past an hourly limit, what is left of the
// limit once the result launches: what it commits, its pods' share of the nodes with room
// they are placed on, and for each new NodeClaim it has pods on its pods' share and the
// NodeClaim's idle room, as overBudget charges them.
func (t *trimmer) headroom(res *solver.Result) map[string]float64 {
	charged := denyLimited(t.accounts)
	if len(charged) == 0 {
		return nil
	}
	onExisting(res, t.in.Nodes, t.book, t.z, charged, t.accounts, func(a string, _ *corev1.Pod, cost float64) { charged[a] += cost })
	for name, shares := range nsShares(res, t.z, nil, t.accounts) {
		if _, ok := charged[name]; ok {
			for _, sh := range shares {
				charged[name] += sh.cost + sh.idle
			}
		}
	}
	left := make(map[string]float64, len(charged))
	for name, c := range charged {
		left[name] = t.accounts[name].Budget.HourlyLimit + budgetTolerance - c
	}
	return left
}

// capped caps the offerings of the pods it names at a price per hour, over the policies'
// constraints: a NodeClaim for them alone then costs no more than their namespace has left.
type capped struct {
	*hook
	caps  map[*corev1.Pod]float64
	built map[cappedKey]*solver.Constraints
}

type cappedKey struct {
	base  *solver.Constraints
	limit float64
}

// Constraints implements solver.PolicyHook.
func (c *capped) Constraints(pod *corev1.Pod, pool string) *solver.Constraints {
	base := c.hook.Constraints(pod, pool)
	limit, ok := c.caps[pod]
	if !ok {
		return base
	}
	k := cappedKey{base, limit}
	if got, ok := c.built[k]; ok {
		return got
	}
	out := &solver.Constraints{Source: "CapacityBudget (what is left of the hourly limit)"}
	if base != nil {
		*out = *base
	}
	allow := out.AllowOffering
	out.AllowOffering = func(it *cloudprovider.InstanceType, o cloudprovider.Offering) bool {
		return o.Price <= limit && (allow == nil || allow(it, o))
	}
	if out.OfferingKey != "" {
		out.OfferingKey = fmt.Sprintf("%s\x00price<=%g", out.OfferingKey, limit)
	}
	c.built[k] = out
	return out
}
