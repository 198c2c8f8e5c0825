package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/karpenter-policy/karpenter/cmd/karpenter/options"
	"github.com/karpenter-policy/karpenter/cmd/karpenterctl/internal/simulate"
	"github.com/karpenter-policy/karpenter/scheduling/methods"
)

// disruptOptions reads --feature-gates for simulate --disrupt, as the manager does.
func disruptOptions(gates string) (methods.Options, error) {
	parsed, err := options.ParseFeatureGates(gates)
	if err != nil {
		return methods.Options{}, err
	}
	return methods.Options{}.WithFeatureGates(parsed), nil
}

func writeDisruptionTable(w io.Writer, d *simulate.DisruptionReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tREASON\tDECISION\tNODES\tREPLACEMENTS\t$/HOUR BEFORE\t$/HOUR AFTER")
	for i, c := range d.Commands {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.4f\t%.4f\n", i+1, c.Reason, c.Decision, strings.Join(c.Nodes, ","), replacements(c, " "),
			c.PricePerHourBefore, c.PricePerHourAfter)
	}
	_ = tw.Flush()
	for _, u := range d.Unconsolidatable {
		fmt.Fprintf(w, "unconsolidatable %s: %s\n", u.Node, u.Reason)
	}
	t := d.Totals
	fmt.Fprintf(w, "total: %d commands; %d nodes at $%.4f/hour -> %d nodes at $%.4f/hour\n", len(d.Commands), t.NodesBefore, t.PricePerHourBefore, t.NodesAfter, t.PricePerHourAfter)
}

func writeDisruptionMarkdown(w io.Writer, d *simulate.DisruptionReport) {
	t := d.Totals
	fmt.Fprintf(w, "**%d disruption commands: %d nodes at $%.4f/hour -> %d nodes at $%.4f/hour**\n\n", len(d.Commands), t.NodesBefore, t.PricePerHourBefore, t.NodesAfter, t.PricePerHourAfter)
	if len(d.Commands) > 0 {
		fmt.Fprintln(w, "| # | reason | decision | nodes | replacements | $/hour before | $/hour after |")
		fmt.Fprintln(w, "|---:|---|---|---|---|---:|---:|")
		for i, c := range d.Commands {
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %.4f | %.4f |\n", i+1, c.Reason, c.Decision, strings.Join(c.Nodes, ", "), replacements(c, ", "),
				c.PricePerHourBefore, c.PricePerHourAfter)
		}
		fmt.Fprintln(w)
	}
	if len(d.Unconsolidatable) > 0 {
		fmt.Fprintln(w, "Left alone:")
		fmt.Fprintln(w)
		for _, u := range d.Unconsolidatable {
			fmt.Fprintf(w, "- `%s`: %s\n", u.Node, strings.ReplaceAll(u.Reason, "|", "\\|"))
		}
	}
}

// replacements are a command's replacements, "name (type<sep>capacity<sep>$price)" each, or "-".
func replacements(c simulate.CommandReport, sep string) string {
	if len(c.Replacements) == 0 {
		return "-"
	}
	out := make([]string, 0, len(c.Replacements))
	for _, r := range c.Replacements {
		out = append(out, fmt.Sprintf("%s (%s%s%s%s$%.4f)", r.Name, r.InstanceType, sep, r.CapacityType, sep, r.PricePerHour))
	}
	return strings.Join(out, ", ")
}
