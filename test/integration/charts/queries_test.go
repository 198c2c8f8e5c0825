package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/karpenter-policy/karpenter/controllers/metrics"
	"github.com/karpenter-policy/karpenter/test/env"
)

// exportedMetrics is what the manager registers (controllers/metrics.Collectors): every
// collector's fully-qualified name, with its variable labels.
func exportedMetrics(t *testing.T) map[string]map[string]bool {
	t.Helper()
	exported := map[string]map[string]bool{}
	descs := make(chan *prometheus.Desc)
	go func() {
		for _, c := range metrics.Collectors {
			c.Describe(descs)
		}
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	variable := regexp.MustCompile(`variableLabels: \{([a-z_,]*)\}`)
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			exported[m[1]] = map[string]bool{}
			if v := variable.FindStringSubmatch(d.String()); v != nil {
				for _, l := range strings.Split(v[1], ",") {
					exported[m[1]][l] = true
				}
			}
		}
	}
	if len(exported) < len(metrics.Collectors) {
		t.Fatalf("read %d metric names from %d collectors; the description format changed?", len(exported), len(metrics.Collectors))
	}
	return exported
}

var (
	metricName = regexp.MustCompile(`karpenter_[a-z0-9_]+`)
	// The labels a query groups by or matches on: a label the metric does not have (one
	// renamed, as capacity_type became message_type) yields an empty or single series.
	usedLabel = regexp.MustCompile(`by \(([a-z_, ]+)\)|[{,]\s*([a-z_]+)=`)
)

// checkQuery fails t for each metric expr queries that the controller does not export and
// each label it groups by or matches on that none of its metrics has.
func checkQuery(t *testing.T, where, expr string, exported map[string]map[string]bool) {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s queries none of the controller's metrics: %s", where, expr)
	}
	for _, name := range names {
		if exported[name] == nil {
			t.Errorf("%s queries %s, which the controller does not export", where, name)
		}
	}
	for _, m := range usedLabel.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1]+m[2], ",") {
			l = strings.TrimSpace(l)
			if l == "" || slices.ContainsFunc(names, func(n string) bool { return exported[n][l] }) {
				continue
			}
			t.Errorf("%s uses label %s, which none of %v has", where, l, names)
		}
	}
}

// Every metric the dashboard queries is one the controller exports, with the labels it uses.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(env.RepoRoot(), "charts", "karpenter", "dashboards", "karpenter.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	exported := exportedMetrics(t)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, target := range p.Targets {
			checkQuery(t, "panel "+p.Title, target.Expr, exported)
		}
	}
}

// Every alert of the PrometheusRule queries metrics the controller exports, with their
// labels, and its annotations name only labels the expression keeps.
func TestPrometheusRulesQueryExportedMetrics(t *testing.T) {
	var rule *unstructured.Unstructured
	for _, o := range render(t, "charts/karpenter", "--set", "policy.prometheusRules.enabled=true,policy.prometheusRules.additionalLabels.release=kube-prometheus-stack") {
		if o.GetKind() == "PrometheusRule" {
			rule = o
		}
	}
	if rule == nil {
		t.Fatal("policy.prometheusRules.enabled=true rendered no PrometheusRule")
	}
	if rule.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("additionalLabels not on the PrometheusRule: %v", rule.GetLabels())
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	exported := exportedMetrics(t)
	kept := regexp.MustCompile(`by \(([a-z_, ]+)\)`)
	annotated := regexp.MustCompile(`\$labels\.([a-z_]+)`)
	alerts := 0
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			name, expr := r["alert"].(string), r["expr"].(string)
			alerts++
			checkQuery(t, "alert "+name, expr, exported)
			if r["for"] == nil || r["for"] == "" {
				t.Errorf("alert %s has no for", name)
			}
			// An annotation naming a label the aggregation dropped renders empty.
			var by []string
			for _, m := range kept.FindAllStringSubmatch(expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					by = append(by, strings.TrimSpace(l))
				}
			}
			annotations, _, _ := unstructured.NestedStringMap(r, "annotations")
			for _, a := range annotations {
				for _, m := range annotated.FindAllStringSubmatch(a, -1) {
					if !slices.Contains(by, m[1]) {
						t.Errorf("alert %s annotates $labels.%s, which %q does not keep", name, m[1], expr)
					}
				}
			}
		}
	}
	if alerts == 0 {
		t.Error("the PrometheusRule has no alerts")
	}
}
