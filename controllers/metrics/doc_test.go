package metrics

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// described are the name, labels and type of every metric in Collectors.
func described(t *testing.T) map[string]struct{ labels, kind string } {
	out := map[string]struct{ labels, kind string }{}
	desc := regexp.MustCompile(`fqName: "([a-z0-9_]+)".*variableLabels: \{([a-z0-9_,]*)\}`)
	for _, c := range Collectors {
		kind := "gauge"
		switch c.(type) {
		case *prometheus.GaugeVec, prometheus.Gauge:
			// A Gauge has a Counter's method set: it is matched first.
		case *prometheus.CounterVec, prometheus.Counter:
			kind = "counter"
		case *prometheus.SummaryVec:
			kind = "summary"
		case *prometheus.HistogramVec, prometheus.Histogram:
			// A Summary has a Histogram's method set: its concrete type tells them apart.
			kind = "histogram"
			if strings.Contains(fmt.Sprintf("%T", c), "summary") {
				kind = "summary"
			}
		}
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := desc.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			labels := strings.Split(m[2], ",")
			slices.Sort(labels)
			out[m[1]] = struct{ labels, kind string }{strings.Join(labels, ","), kind}
		}
	}
	return out
}

// docs/metrics.md lists every metric the manager exports with its type and labels, and
// nothing it does not export.
func TestMetricsDocMatchesTheRegistry(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	want := described(t)
	row := regexp.MustCompile("^\\| `(karpenter_[a-z0-9_]+)` \\| (counter|gauge|histogram|summary) \\| ([^|]*) \\|")
	seen := map[string]bool{}
	for i, line := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		seen[name] = true
		w, ok := want[name]
		if !ok {
			t.Errorf("docs/metrics.md:%d: %s is not exported", i+1, name)
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "none" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		if got := strings.Join(labels, ","); got != w.labels {
			t.Errorf("docs/metrics.md:%d: %s has labels %q, the registry %q", i+1, name, got, w.labels)
		}
		if m[2] != w.kind {
			t.Errorf("docs/metrics.md:%d: %s is a %s, not a %s", i+1, name, w.kind, m[2])
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("docs/metrics.md does not list %s", name)
		}
	}
}
