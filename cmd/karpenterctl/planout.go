package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	karpv1 "github.com/karpenter-policy/karpenter/api/karpenter/v1"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
)

func joinKeys[V any](a, b map[string]V) map[string]struct{} {
	out := map[string]struct{}{}
	for k := range a {
		out[k] = struct{}{}
	}
	for k := range b {
		out[k] = struct{}{}
	}
	return out
}

func sortNatural(s []string) {
	slices.SortFunc(s, func(a, b string) int {
		switch {
		case simulate.NaturalLess(a, b):
			return -1
		case simulate.NaturalLess(b, a):
			return 1
		}
		return 0
	})
}

// headline is the plan in one line: "$/hour 12.30 -> 14.10 (+1.80, +14.6%); $/month +1314".
// When the head blocks pods the base places, a lower $/hour is not a saving: the headline
// leads with the pods that would stay pending, and gives the prices as what the pods placed
// cost.
func headline(r *planReport) string {
	b, h := r.Base.Totals.PricePerHour, r.Head.Totals.PricePerHour
	pct := "new"
	switch {
	case b != 0:
		pct = fmt.Sprintf("%+.1f%%", (h-b)/b*100)
	case h == 0:
		pct = "+0.0%"
	}
	if n := len(r.Delta.NewlyBlocked); n > 0 {
		return fmt.Sprintf("%d pods would stay pending that the base places; $/hour %.2f -> %.2f (%+.2f, %s) for the pods placed, not a saving; $/month %+.0f",
			n, b, h, r.Delta.PricePerHour, pct, r.Delta.PricePerMonth)
	}
	return fmt.Sprintf("$/hour %.2f -> %.2f (%+.2f, %s); $/month %+.0f", b, h, r.Delta.PricePerHour, pct, r.Delta.PricePerMonth)
}

// gateLine is a gate's result in one line: "gate max-increase failed: ...".
func gateLine(g gateResult) string {
	if g.Passed {
		return fmt.Sprintf("gate %s passed: %s", g.Name, g.Message)
	}
	return fmt.Sprintf("gate %s failed: %s", g.Name, g.Message)
}

// writeAdmission writes the head's admission warnings and undecided rules as lines.
func writeAdmission(w io.Writer, r *planReport) {
	for _, p := range r.Warnings {
		fmt.Fprintln(w, "warning: "+p.String())
	}
	for _, p := range r.Undecided {
		fmt.Fprintln(w, "undecided: "+p.String())
	}
}

// poolCost is a NodePool's new nodes on one side: their $/hour and the share of it on Spot.
type poolCost struct {
	price, spot float64
	nodes       int
}

func (p poolCost) spotPercent() float64 {
	if p.price == 0 {
		return 0
	}
	return p.spot / p.price * 100
}

func pools(r *simulate.Report) map[string]poolCost {
	out := map[string]poolCost{}
	for _, c := range r.NodeClaims {
		p := out[c.NodePool]
		p.price += c.PricePerHour
		p.nodes++
		if c.CapacityType == karpv1.CapacityTypeSpot {
			p.spot += c.PricePerHour
		}
		out[c.NodePool] = p
	}
	return out
}

// reasons are the reasons pods stay pending on the head, for the newly blocked.
func reasons(r *planReport) map[string]string { return blocked(r.Head) }

func writePlanText(w io.Writer, r *planReport) {
	fmt.Fprintln(w, headline(r))
	for _, g := range r.Gates {
		fmt.Fprintln(w, gateLine(g))
	}
	fmt.Fprintf(w, "nodes %d -> %d (%+d)\n", r.Base.Totals.Nodes, r.Head.Totals.Nodes, r.Delta.Nodes)
	bp, hp := pools(r.Base), pools(r.Head)
	for _, name := range slices.Sorted(maps.Keys(joinKeys(bp, hp))) {
		b, h := bp[name], hp[name]
		fmt.Fprintf(w, "nodepool %s: $/hour %.4f -> %.4f (%+.4f), %d -> %d nodes, Spot %.1f%% -> %.1f%%\n",
			name, b.price, h.price, h.price-b.price, b.nodes, h.nodes, b.spotPercent(), h.spotPercent())
	}
	for _, name := range slices.Sorted(maps.Keys(r.Delta.Namespaces)) {
		b, h := nsOf(r.Base, name), nsOf(r.Head, name)
		fmt.Fprintf(w, "namespace %s: $/hour %.4f -> %.4f (%+.4f), Spot %.1f%% -> %.1f%%\n", name, b.PricePerHour, h.PricePerHour,
			r.Delta.Namespaces[name].PricePerHour, b.SpotPercent, h.SpotPercent)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Delta.Teams)) {
		b, h := teamOf(r.Base, name), teamOf(r.Head, name)
		fmt.Fprintf(w, "team %s (ClusterCapacityBudget, %d namespaces): $/hour %.4f -> %.4f (%+.4f)%s, Spot %.1f%% -> %.1f%%\n", name, len(h.Namespaces), b.PricePerHour, h.PricePerHour,
			r.Delta.Teams[name].PricePerHour, limitNote(h.HourlyLimit), b.SpotPercent, h.SpotPercent)
	}
	why := reasons(r)
	for _, g := range podGroups(r.Delta.NewlyBlocked, func(pod string) string { return why[pod] }) {
		if g.listed() {
			for _, pod := range g.pods {
				fmt.Fprintf(w, "newly blocked %s: %s\n", pod, g.reason)
			}
			continue
		}
		fmt.Fprintf(w, "newly blocked %s: %s\n", g.summary(), g.reason)
	}
	for _, g := range podGroups(r.Delta.Unblocked, nil) {
		if g.listed() {
			for _, pod := range g.pods {
				fmt.Fprintf(w, "unblocked %s\n", pod)
			}
			continue
		}
		fmt.Fprintf(w, "unblocked %s\n", g.summary())
	}
	writeAdmission(w, r)
}

// listAtMost is how many pods of one workload with one reason a plan names one by one;
// beyond it they are one line (a pull-request comment holds at most 65536 characters).
const listAtMost = 10

// podGroup are the pods of one workload (a pod name without its "-<index>", as simulate
// names a workload's pods) with one reason.
type podGroup struct {
	owner, reason string
	pods          []string
}

func (g podGroup) listed() bool { return len(g.pods) <= listAtMost }

// summary is "2000 pods of team-a/web (team-a/web-0 ... team-a/web-1999)".
func (g podGroup) summary() string {
	return fmt.Sprintf("%d pods of %s (%s ... %s)", len(g.pods), g.owner, g.pods[0], g.pods[len(g.pods)-1])
}

// podGroups groups pods (in their order) by workload and reason; reason may be nil.
func podGroups(pods []string, reason func(string) string) []podGroup {
	var out []podGroup
	index := map[[2]string]int{}
	for _, pod := range pods {
		owner := pod
		if i := strings.LastIndexByte(pod, '-'); i > 0 && i < len(pod)-1 && strings.Trim(pod[i+1:], "0123456789") == "" {
			owner = pod[:i]
		}
		why := ""
		if reason != nil {
			why = reason(pod)
		}
		k := [2]string{owner, why}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, podGroup{owner: owner, reason: why})
		}
		out[i].pods = append(out[i].pods, pod)
	}
	return out
}

func nsOf(r *simulate.Report, name string) simulate.NamespaceReport {
	if n := r.Namespaces[name]; n != nil {
		return *n
	}
	return simulate.NamespaceReport{}
}

func teamOf(r *simulate.Report, name string) simulate.TeamReport {
	if t := r.Teams[name]; t != nil {
		return *t
	}
	return simulate.TeamReport{}
}

// limitNote is ", limit X" for a team with an hourly limit in force.
func limitNote(l *float64) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf(", limit %.2f", *l)
}

func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }

// writePlanMarkdown writes the plan as a pull-request comment: the marker line, the
// headline, a table per NodePool and per namespace, the pods newly blocked with the policy's
// reason, and each side's simulation in a collapsed block.
func writePlanMarkdown(w io.Writer, r *planReport) {
	fmt.Fprintln(w, PlanMarker)
	fmt.Fprintf(w, "**karpenterctl plan: %s**\n\n", headline(r))
	if len(r.Gates) > 0 {
		fmt.Fprintln(w, "| gate | result | |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, g := range r.Gates {
			result := "passed"
			if !g.Passed {
				result = "**failed**"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", g.Name, result, cell(g.Message))
		}
		fmt.Fprintln(w)
	}
	if len(r.Warnings)+len(r.Undecided) > 0 {
		fmt.Fprintf(w, "Admission would warn (%d):\n\n", len(r.Warnings)+len(r.Undecided))
		for _, p := range r.Warnings {
			fmt.Fprintf(w, "- `%s`\n", cell(p.String()))
		}
		for _, p := range r.Undecided {
			fmt.Fprintf(w, "- undecided offline: `%s`\n", cell(p.String()))
		}
		fmt.Fprintln(w)
	}
	bp, hp := pools(r.Base), pools(r.Head)
	if names := slices.Sorted(maps.Keys(joinKeys(bp, hp))); len(names) > 0 {
		fmt.Fprintln(w, "| NodePool | before $/hour | after $/hour | delta | nodes | Spot share |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		for _, name := range names {
			b, h := bp[name], hp[name]
			fmt.Fprintf(w, "| %s | %.4f | %.4f | %+.4f | %d -> %d | %.1f%% -> %.1f%% |\n", cell(name), b.price, h.price, h.price-b.price,
				b.nodes, h.nodes, b.spotPercent(), h.spotPercent())
		}
		fmt.Fprintln(w)
	}
	if names := slices.Sorted(maps.Keys(r.Delta.Namespaces)); len(names) > 0 {
		fmt.Fprintln(w, "| namespace | before $/hour | after $/hour | delta | limit | Spot share |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		for _, name := range names {
			b, h := nsOf(r.Base, name), nsOf(r.Head, name)
			limit := "-"
			if h.HourlyLimit != nil {
				limit = fmt.Sprintf("%.2f", *h.HourlyLimit)
			}
			fmt.Fprintf(w, "| %s | %.4f | %.4f | %+.4f | %s | %.1f%% -> %.1f%% |\n", cell(name), b.PricePerHour, h.PricePerHour,
				r.Delta.Namespaces[name].PricePerHour, limit, b.SpotPercent, h.SpotPercent)
		}
		fmt.Fprintln(w)
	}
	if names := slices.Sorted(maps.Keys(r.Delta.Teams)); len(names) > 0 {
		fmt.Fprintln(w, "| team (ClusterCapacityBudget) | namespaces | before $/hour | after $/hour | delta | limit | Spot share |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		for _, name := range names {
			b, h := teamOf(r.Base, name), teamOf(r.Head, name)
			limit := "-"
			if h.HourlyLimit != nil {
				limit = fmt.Sprintf("%.2f", *h.HourlyLimit)
			}
			fmt.Fprintf(w, "| %s | %d | %.4f | %.4f | %+.4f | %s | %.1f%% -> %.1f%% |\n", cell(name), len(h.Namespaces), b.PricePerHour, h.PricePerHour,
				r.Delta.Teams[name].PricePerHour, limit, b.SpotPercent, h.SpotPercent)
		}
		fmt.Fprintln(w)
	}
	if len(r.Delta.NewlyBlocked) > 0 {
		why := reasons(r)
		fmt.Fprintf(w, "%d pods newly blocked:\n\n", len(r.Delta.NewlyBlocked))
		for _, g := range podGroups(r.Delta.NewlyBlocked, func(pod string) string { return why[pod] }) {
			if g.listed() {
				for _, pod := range g.pods {
					fmt.Fprintf(w, "- `%s`: %s\n", pod, cell(g.reason))
				}
				continue
			}
			fmt.Fprintf(w, "- %d pods of `%s` (`%s` ... `%s`): %s\n", len(g.pods), g.owner, g.pods[0], g.pods[len(g.pods)-1], cell(g.reason))
		}
		fmt.Fprintln(w)
	}
	if len(r.Delta.Unblocked) > 0 {
		var names []string
		for _, g := range podGroups(r.Delta.Unblocked, nil) {
			if g.listed() {
				names = append(names, "`"+strings.Join(g.pods, "`, `")+"`")
				continue
			}
			names = append(names, fmt.Sprintf("%d pods of `%s`", len(g.pods), g.owner))
		}
		fmt.Fprintf(w, "%d pods no longer blocked: %s\n\n", len(r.Delta.Unblocked), strings.Join(names, ", "))
	}
	var details strings.Builder
	fmt.Fprintln(&details, "Before (base):")
	fmt.Fprintln(&details)
	writeMarkdown(&details, r.Base)
	fmt.Fprintln(&details)
	fmt.Fprintln(&details, "After (head):")
	fmt.Fprintln(&details)
	writeMarkdown(&details, r.Head)
	fmt.Fprintln(&details)
	fmt.Fprintln(w, "<details><summary>Simulation of each side</summary>")
	fmt.Fprintln(w)
	if details.Len() > detailsAtMost {
		fmt.Fprintf(w, "The two simulations take %d characters, more than a pull-request comment holds; "+
			"`karpenterctl plan -o json` (or `simulate -o markdown` on each side) prints them.\n\n", details.Len())
	} else {
		fmt.Fprint(w, details.String())
	}
	fmt.Fprintln(w, "</details>")
}

// detailsAtMost bounds the collapsed block of a plan's markdown, so that the comment stays
// under GitHub's 65536 characters with the tables above it.
const detailsAtMost = 40000

// writePlanGitHub writes workflow commands: a notice with the headline, a warning per pod
// newly blocked.
func writePlanGitHub(w io.Writer, r *planReport) {
	fmt.Fprintf(w, "::notice title=karpenterctl plan::%s\n", escapeWorkflow(headline(r)))
	for _, g := range r.Gates {
		level := "notice"
		if !g.Passed {
			level = "error"
		}
		fmt.Fprintf(w, "::%s title=gate %s::%s\n", level, g.Name, escapeWorkflow(gateLine(g)))
	}
	for _, p := range r.Warnings {
		fmt.Fprintf(w, "::warning file=%s,line=%d::%s\n", p.File, p.Line, escapeWorkflow(located(p)))
	}
	for _, p := range r.Undecided {
		fmt.Fprintf(w, "::warning file=%s,line=%d,title=undecided offline::%s\n", p.File, p.Line, escapeWorkflow(located(p)))
	}
	why := reasons(r)
	for _, g := range podGroups(r.Delta.NewlyBlocked, func(pod string) string { return why[pod] }) {
		if g.listed() {
			for _, pod := range g.pods {
				fmt.Fprintf(w, "::warning title=pod newly blocked::%s\n", escapeWorkflow(pod+": "+g.reason))
			}
			continue
		}
		fmt.Fprintf(w, "::warning title=pods newly blocked::%s\n", escapeWorkflow(g.summary()+": "+g.reason))
	}
}

// writeInvalid reports an invalid head: the problems as `validate` prints them; the gates
// are not checked.
func writeInvalid(w io.Writer, output string, r *planReport, g *planGates) {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
	case "junit":
		writePlanJUnit(w, r, g)
	case "github":
		writeProblemsGitHub(w, r.Invalid)
	case "markdown":
		fmt.Fprintln(w, PlanMarker)
		fmt.Fprintf(w, "**karpenterctl plan: the change is invalid (%d problems); the cluster would refuse it**\n\n", len(r.Invalid))
		for _, p := range r.Invalid {
			fmt.Fprintf(w, "- `%s`\n", cell(p.String()))
		}
	default:
		for _, p := range r.Invalid {
			fmt.Fprintln(w, p.String())
		}
	}
}
