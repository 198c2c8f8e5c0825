package main

import (
	"encoding/csv"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/karpenter-policy/karpenter/scheduling/showback"
)

// costFixture: two NodePools and a node of none; team red has two namespaces, blue one, and
// "lone" has no team label; "quiet" runs nothing.
func costFixture() (*showback.Showback, map[string]map[string]string) {
	s := &showback.Showback{
		Namespaces: map[string]*showback.Namespace{
			"red-a": {Cost: 1.5, Pods: 3, CPU: 3, Memory: 6 << 30},
			"red-b": {Cost: 0.5, Pods: 1, CPU: 1, Memory: 2 << 30},
			"blue":  {Cost: 2, Pods: 2, CPU: 4, Memory: 8 << 30, GPU: 1},
			"lone":  {Cost: 0.25, Pods: 1, CPU: 0.5, Memory: 1 << 30},
			"quiet": {},
		},
		Nodes: []showback.Node{
			{Name: "n1", NodePool: "general", Price: 2.5, Idle: 0.5, Pods: 4, CPU: 4, Memory: 8 << 30, Priced: true},
			{Name: "n2", NodePool: "gpu", Price: 3, Idle: 1, Pods: 2, CPU: 4, Memory: 8 << 30, GPU: 1, Priced: true},
			{Name: "n3", Price: 0.5, Idle: 0.25, Pods: 1, CPU: 0.5, Memory: 1 << 30, Priced: true},
			{Name: "n4", NodePool: "general", Pods: 0},
		},
	}
	labels := map[string]map[string]string{"red-a": {"team": "red"}, "red-b": {"team": "red"}, "blue": {"team": "blue"}, "lone": {}}
	return s, labels
}

func rowsByName(rows []costRow) map[string]costRow {
	out := map[string]costRow{}
	for _, r := range rows {
		out[r.Name] = r
	}
	return out
}

// Every grouping lists what it groups, the idle room apart by NodePool, and charged plus idle
// is the sum of the node prices to the cent.
func TestCostReportGroupsAndAddsUp(t *testing.T) {
	s, labels := costFixture()
	for _, by := range []string{"namespace", "team", "nodepool"} {
		r := newCostReport(s, labels, by, "team")
		if math.Abs(r.ChargedPerHour+r.IdlePerHour-r.NodePricesPerHour) > 0.005 || math.Abs(r.NodePricesPerHour-6) > 1e-9 {
			t.Errorf("by %s: charged %v + idle %v, node prices %v (want 6)", by, r.ChargedPerHour, r.IdlePerHour, r.NodePricesPerHour)
		}
		idle := rowsByName(r.Idle)
		if len(idle) != 3 || idle["general"].CostPerHour != 0.5 || idle["gpu"].CostPerHour != 1 || idle[noGroup].CostPerHour != 0.25 || idle["general"].Nodes != 2 {
			t.Errorf("by %s: idle %+v", by, r.Idle)
		}
		if len(r.Unpriced) != 1 || r.Unpriced[0] != "n4" {
			t.Errorf("by %s: unpriced %v, want [n4]", by, r.Unpriced)
		}
	}
	ns := newCostReport(s, labels, "namespace", "team")
	if len(ns.Rows) != 5 || ns.Rows[0].Name != "blue" || ns.Rows[4].Name != "quiet" || ns.Rows[4].CostPerHour != 0 {
		t.Errorf("by namespace: every namespace, the costliest first, want blue first and quiet last: %+v", ns.Rows)
	}
	team := rowsByName(newCostReport(s, labels, "team", "team").Rows)
	if team["red"].CostPerHour != 2 || team["red"].Namespaces != 2 || team["blue"].GPU != 1 || team[noGroup].Namespaces != 2 || team[noGroup].CostPerHour != 0.25 {
		t.Errorf("by team: %+v", team)
	}
	pools := rowsByName(newCostReport(s, labels, "nodepool", "team").Rows)
	if pools["general"].CostPerHour != 2 || pools["general"].Nodes != 2 || pools["gpu"].CostPerHour != 2 || pools[noGroup].CostPerHour != 0.25 {
		t.Errorf("by nodepool: %+v", pools)
	}
}

// The text states the rule and the idle apart; the CSV's rows, idle included, add up to its
// total row.
func TestCostReportFormats(t *testing.T) {
	s, labels := costFixture()
	r := newCostReport(s, labels, "team", "team")
	var text strings.Builder
	writeCostText(&text, r)
	for _, want := range []string{"Teams are the values of the namespace label team", attributionRule, "TEAM", "Idle (room no pod requests), by NodePool:", "= 6.0000 $/hour", "Not priced", "n4"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text has no %q:\n%s", want, text.String())
		}
	}
	var out strings.Builder
	if err := writeCostCSV(&out, r); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	sum, total := 0.0, 0.0
	for _, rec := range records[1:] {
		v, err := strconv.ParseFloat(rec[8], 64)
		if err != nil {
			t.Fatalf("record %v: %v", rec, err)
		}
		switch rec[0] {
		case "team", "idle":
			sum += v
		case "total":
			total = v
		default:
			t.Errorf("record of group %q", rec[0])
		}
	}
	if math.Abs(sum-total) > 0.005 || total != 6 {
		t.Errorf("the CSV's rows add to %v, its total is %v (want 6)", sum, total)
	}
}

// Flags are checked before the cluster is read, each error naming the flag.
func TestCostRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--by", "zone"}, "--by must be namespace, team or nodepool"},
		{[]string{"--by", "team", "--team-label", ""}, "--by team needs a --team-label"},
		{[]string{"-o", "yaml"}, "-o must be text, json or csv"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--instance-types", "testdata/does-not-exist.json"}, "does-not-exist.json"},
		{[]string{"--kubeconfig", "testdata/does-not-exist.kubeconfig"}, "does-not-exist.kubeconfig"},
	} {
		code, _, stderr := karpenterctl(t, "", append([]string{"cost"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("cost %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}
