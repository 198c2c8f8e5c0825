package budget

import (
	"math"
	"testing"

	"github.com/karpenter-policy/karpenter/scheduling/showback"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The gauges keep the costliest namespaces by name and sum the rest under "(other)", so the
// series stay bounded and the sum of the gauge still is the namespaces' cost; teams sum
// their namespaces by label; nodes of no NodePool are reported under "(none)".
func TestShowbackFiguresBoundCardinalityAndKeepTheSums(t *testing.T) {
	s := &showback.Showback{
		Namespaces: map[string]*showback.Namespace{
			"big": {Cost: 3}, "mid": {Cost: 2}, "small": {Cost: 0.5}, "tiny": {Cost: 0.25}, "empty": {},
		},
		Nodes: []showback.Node{
			{Name: "a", NodePool: "general", Price: 5, Idle: 1},
			{Name: "b", NodePool: "general", Price: 2, Idle: 0.5},
			{Name: "c", Price: 0.5, Idle: 0.25},
		},
	}
	labels := map[string]map[string]string{
		"big": {"team": "red"}, "mid": {"team": "blue"}, "small": {"team": "red"}, "tiny": {"other": "x"},
	}
	got := ShowbackFigures(s, labels, "team", 2)
	want := map[string]float64{"big": 3, "mid": 2, OtherNamespaces: 0.75}
	if len(got.Namespaces) != len(want) {
		t.Errorf("namespaces %v, want %v", got.Namespaces, want)
	}
	for k, v := range want {
		if !near(got.Namespaces[k], v) {
			t.Errorf("namespace %s: %v, want %v (all: %v)", k, got.Namespaces[k], v, got.Namespaces)
		}
	}
	if len(got.Teams) != 2 || !near(got.Teams["red"], 3.5) || !near(got.Teams["blue"], 2) {
		t.Errorf("teams %v, want red 3.5 and blue 2 (a namespace without the label is in no team)", got.Teams)
	}
	if !near(got.NodePools["general"], 7) || !near(got.NodePools[NoNodePool], 0.5) || !near(got.Idle["general"], 1.5) || !near(got.Idle[NoNodePool], 0.25) {
		t.Errorf("nodepools %v, idle %v", got.NodePools, got.Idle)
	}
	charged := 0.0
	for _, v := range got.Namespaces {
		charged += v
	}
	idle := 0.0
	for _, v := range got.Idle {
		idle += v
	}
	if !near(charged+idle, s.Total()) {
		t.Errorf("namespaces %v + idle %v = %v, want the node prices %v", charged, idle, charged+idle, s.Total())
	}
	if none := ShowbackFigures(s, labels, "", 10); len(none.Teams) != 0 || len(none.Namespaces) != 5 {
		t.Errorf("without a team label: teams %v, namespaces %v", none.Teams, none.Namespaces)
	}
}
