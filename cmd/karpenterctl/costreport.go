package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-policy/karpenter/scheduling/showback"
)

// attributionRule is the cost attribution, stated in every report of `karpenterctl cost`
// (docs/architecture.md, "Cost attribution").
const attributionRule = "A pod pays its node's price times the mean of its shares of the node's allocatable cpu and memory; " +
	"on a node with GPUs the GPUs' part of the price (by reference prices of $0.95 a GPU, $0.031611 a vCPU and $0.004237 a GiB an hour) " +
	"is paid by GPU share instead. What no pod requests is idle, charged to no namespace."

// noGroup names the team of namespaces without the team label, and the NodePool of nodes of none.
const noGroup = "(none)"

// costRow is one line of a cost report: a namespace, a team or a NodePool, or a NodePool's
// idle room.
type costRow struct {
	Name        string  `json:"name"`
	Namespaces  int     `json:"namespaces,omitempty"`
	Nodes       int     `json:"nodes,omitempty"`
	Pods        int     `json:"pods"`
	CPU         float64 `json:"cpu"`
	MemoryBytes float64 `json:"memoryBytes"`
	GPU         float64 `json:"gpu,omitempty"`
	CostPerHour float64 `json:"costPerHour"`
}

// costReport is what `karpenterctl cost` prints: the rows by the grouping asked for, the idle
// cost apart by NodePool, and the totals, which add up to the node prices.
type costReport struct {
	Context           string    `json:"context"`
	By                string    `json:"by"`
	TeamLabel         string    `json:"teamLabel,omitempty"`
	Prices            string    `json:"prices"`
	Attribution       string    `json:"attribution"`
	Rows              []costRow `json:"rows"`
	Idle              []costRow `json:"idle"`
	ChargedPerHour    float64   `json:"chargedPerHour"`
	IdlePerHour       float64   `json:"idlePerHour"`
	NodePricesPerHour float64   `json:"nodePricesPerHour"`
	Nodes             int       `json:"nodes"`
	Unpriced          []string  `json:"unpricedNodes,omitempty"`
}

// newCostReport groups a showback by namespace, by the value of the namespaces' label
// teamLabel, or by NodePool.
func newCostReport(s *showback.Showback, labels map[string]map[string]string, by, teamLabel string) *costReport {
	r := &costReport{By: by, Attribution: attributionRule, NodePricesPerHour: s.Total(), Nodes: len(s.Nodes), Unpriced: s.Unpriced()}
	rows := map[string]*costRow{}
	row := func(name string) *costRow {
		if rows[name] == nil {
			rows[name] = &costRow{Name: name}
		}
		return rows[name]
	}
	switch by {
	case "nodepool":
		for _, n := range s.Nodes {
			x := row(orNone(n.NodePool))
			x.Nodes++
			x.Pods += n.Pods
			x.CPU, x.MemoryBytes, x.GPU = x.CPU+n.CPU, x.MemoryBytes+n.Memory, x.GPU+n.GPU
			x.CostPerHour += n.Price - n.Idle
		}
	default:
		for name, ns := range s.Namespaces {
			key := name
			if by == "team" {
				r.TeamLabel = teamLabel
				key = orNone(labels[name][teamLabel])
			}
			x := row(key)
			if by == "team" {
				x.Namespaces++
			}
			x.Pods += ns.Pods
			x.CPU, x.MemoryBytes, x.GPU = x.CPU+ns.CPU, x.MemoryBytes+ns.Memory, x.GPU+ns.GPU
			x.CostPerHour += ns.Cost
		}
	}
	for _, x := range rows {
		r.Rows = append(r.Rows, *x)
		r.ChargedPerHour += x.CostPerHour
	}
	sortRows(r.Rows)
	idle := map[string]*costRow{}
	for _, n := range s.Nodes {
		name := orNone(n.NodePool)
		if idle[name] == nil {
			idle[name] = &costRow{Name: name}
		}
		idle[name].Nodes++
		idle[name].CostPerHour += n.Idle
		r.IdlePerHour += n.Idle
	}
	for _, x := range idle {
		r.Idle = append(r.Idle, *x)
	}
	sortRows(r.Idle)
	return r
}

func orNone(s string) string {
	if s == "" {
		return noGroup
	}
	return s
}

// sortRows orders rows the costliest first, then by name.
func sortRows(rows []costRow) {
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].CostPerHour != rows[j].CostPerHour {
			return rows[i].CostPerHour > rows[j].CostPerHour
		}
		return rows[i].Name < rows[j].Name
	})
}

func dollars(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) }

func memory(bytes float64) string {
	return resource.NewQuantity(int64(bytes), resource.BinarySI).String()
}

func percentOf(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*part/whole, 'f', 1, 64) + "%"
}

func writeCostText(w io.Writer, r *costReport) {
	fmt.Fprintf(w, "Cost per hour by %s, context %s: %d nodes, priced by %s.\n", r.By, r.Context, r.Nodes, r.Prices)
	if r.By == "team" {
		fmt.Fprintf(w, "Teams are the values of the namespace label %s.\n", r.TeamLabel)
	}
	fmt.Fprintf(w, "%s\n\n", r.Attribution)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := map[string]string{"namespace": "NAMESPACE", "team": "TEAM\tNAMESPACES", "nodepool": "NODEPOOL\tNODES"}[r.By]
	fmt.Fprintf(tw, "%s\tPODS\tCPU\tMEMORY\tGPU\t$/HOUR\tSHARE\n", header)
	for _, x := range r.Rows {
		name := x.Name
		switch r.By {
		case "team":
			name += "\t" + strconv.Itoa(x.Namespaces)
		case "nodepool":
			name += "\t" + strconv.Itoa(x.Nodes)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", name, x.Pods, strconv.FormatFloat(x.CPU, 'f', -1, 64), memory(x.MemoryBytes),
			strconv.FormatFloat(x.GPU, 'f', -1, 64), dollars(x.CostPerHour), percentOf(x.CostPerHour, r.NodePricesPerHour))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nIdle (room no pod requests), by NodePool:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODEPOOL\tNODES\t$/HOUR\tSHARE")
	for _, x := range r.Idle {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", x.Name, x.Nodes, dollars(x.CostPerHour), percentOf(x.CostPerHour, r.NodePricesPerHour))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nCharged %s + idle %s = %s $/hour, the sum of the %d nodes' prices.\n", dollars(r.ChargedPerHour), dollars(r.IdlePerHour),
		dollars(r.ChargedPerHour+r.IdlePerHour), r.Nodes)
	if len(r.Unpriced) > 0 {
		fmt.Fprintf(w, "Not priced (no catalog knows their instance type; counted at 0): %v\n", r.Unpriced)
	}
}

// writeCostCSV writes one record per row: group (namespace, team or nodepool; idle; total),
// name, namespaces, nodes, pods, cpu, memory_bytes, gpu, cost_per_hour (unrounded).
func writeCostCSV(w io.Writer, r *costReport) error {
	cw := csv.NewWriter(w)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	_ = cw.Write([]string{"group", "name", "namespaces", "nodes", "pods", "cpu", "memory_bytes", "gpu", "cost_per_hour"})
	rec := func(group string, x costRow) {
		_ = cw.Write([]string{group, x.Name, strconv.Itoa(x.Namespaces), strconv.Itoa(x.Nodes), strconv.Itoa(x.Pods), f(x.CPU), f(x.MemoryBytes), f(x.GPU), f(x.CostPerHour)})
	}
	for _, x := range r.Rows {
		rec(r.By, x)
	}
	for _, x := range r.Idle {
		rec("idle", x)
	}
	rec("total", costRow{Name: "node-prices", Nodes: r.Nodes, CostPerHour: r.NodePricesPerHour})
	cw.Flush()
	return cw.Error()
}
