package methods

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
)

// Budgets track, for one pass, how many more nodes each NodePool may have disrupted for
// each reason; a command takes from them as it is decided.
type Budgets struct {
	allowed map[budgetKey]int
}

type budgetKey struct {
	pool   string
	reason Reason
}

// BudgetReasons are the reasons a NodePool budget can name (expiration is not disruption's:
// controllers/nodeclaim/expiration deletes expired NodeClaims, budgets or not).
var BudgetReasons = []Reason{ReasonEmpty, ReasonDrifted, ReasonUnderutilized, ReasonUnhealthy}

// NewBudgets computes every NodePool's allowance per reason at c.Now.
func NewBudgets(c *Cluster) *Budgets {
	b := &Budgets{allowed: map[budgetKey]int{}}
	for name := range c.NodePools {
		for _, r := range BudgetReasons {
			total, consuming := BudgetUse(c, name, r)
			b.allowed[budgetKey{name, r}] = max(0, total-consuming)
		}
	}
	return b
}

// BudgetUse is how many of the NodePool's nodes its budgets let be disrupting at once for
// the reason at c.Now, and how many consume that now: the nodes being disrupted, and the
// NotReady ones except for Unhealthy (nodes merely NotReady are what repair is for, not
// disruptions in flight). Upstream exports the two as karpenter_nodepools_allowed_disruptions
// and karpenter_nodepools_nodes_consuming_budgets.
func BudgetUse(c *Cluster, pool string, r Reason) (total, consuming int) {
	np, ok := c.NodePools[pool]
	if !ok {
		return 0, 0
	}
	consuming = c.Disrupting[pool]
	if r == ReasonUnhealthy {
		consuming -= c.NotReady[pool]
	}
	return AllowedDisruptions(np.NodePool, r, c.Now, c.PoolSizes[pool], 0), consuming
}

// Allowed is how many more of the NodePool's nodes may be disrupted for the reason now.
func (b *Budgets) Allowed(pool string, r Reason) int {
	return b.allowed[budgetKey{pool, r}]
}

// Take records that n of the NodePool's nodes are disrupted for the reason: they count
// against every reason's allowance, since a budget bounds the nodes disrupting at once.
func (b *Budgets) Take(pool string, n int) {
	for _, r := range BudgetReasons {
		k := budgetKey{pool, r}
		b.allowed[k] = max(0, b.allowed[k]-n)
	}
}

// AllowedDisruptions is how many of a NodePool's nodes may be disrupted for the reason now:
// the least of its budgets that are active and apply to the reason (no reasons: all), each a
// count or a percentage of the pool's nodes rounded up, less the nodes already disrupting
// or NotReady. A NodePool with no budgets allows 10% (the API's default); a budget that
// cannot be read (a bad count, percentage or schedule) allows nothing.
func AllowedDisruptions(np *karpv1.NodePool, r Reason, now time.Time, nodes, disrupting int) int {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []karpv1.Budget{{Nodes: "10%"}}
	}
	allowed := math.MaxInt
	for _, b := range budgets {
		if !appliesTo(b, r) {
			continue
		}
		active, err := budgetActive(b, now)
		if err != nil {
			return 0
		}
		if !active {
			continue
		}
		n, err := budgetNodes(b.Nodes, nodes)
		if err != nil {
			return 0
		}
		allowed = min(allowed, n)
	}
	if allowed == math.MaxInt {
		// No active budget for the reason: upstream allows disruption unbounded then.
		allowed = nodes
	}
	return max(0, allowed-disrupting)
}

func appliesTo(b karpv1.Budget, r Reason) bool {
	if len(b.Reasons) == 0 {
		return true
	}
	for _, br := range b.Reasons {
		if string(br) == string(r) {
			return true
		}
	}
	return false
}

// budgetNodes reads "5" or "10%" of nodes, a percentage rounded up.
func budgetNodes(s string, nodes int) (int, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 100 {
			return 0, errBadBudget
		}
		return (v*nodes + 99) / 100, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, errBadBudget
	}
	return v, nil
}

// budgetActive reports whether a budget is in force: always without a schedule, else within
// duration of the schedule's last firing (cron, UTC).
func budgetActive(b karpv1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil && b.Duration == nil {
		return true, nil
	}
	if b.Schedule == nil || b.Duration == nil {
		return false, errBadBudget
	}
	sched, err := cron.ParseStandard(*b.Schedule)
	if err != nil {
		return false, errBadBudget
	}
	d := b.Duration.Duration
	now = now.UTC()
	// Active when it fired in the last d: its first firing after now-d is not after now.
	next := sched.Next(now.Add(-d))
	return !next.After(now), nil
}

type budgetError struct{}

func (budgetError) Error() string { return "unparsable disruption budget" }

var errBadBudget = budgetError{}
