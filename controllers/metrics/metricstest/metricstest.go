// Package metricstest reads what a Prometheus collector holds, for the controllers' tests:
// how many series match some labels, and how many observations a histogram or summary has
// and what they add up to. It gathers from a registry of its own, so a test sees the
// collector's state without scraping. It is for tests only: nothing outside a _test.go file
// may import it.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// matching are the collector's series whose labels include every label in want (nil: all).
func matching(t testing.TB, c prometheus.Collector, want map[string]string) []*dto.Metric {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, f := range families {
		for _, m := range f.GetMetric() {
			n := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					n++
				}
			}
			if n == len(want) {
				out = append(out, m)
			}
		}
	}
	return out
}

// Series is how many series of the collector have every label in want.
func Series(t testing.TB, c prometheus.Collector, want map[string]string) int {
	t.Helper()
	return len(matching(t, c, want))
}

// Observations are how many observations the histogram's or summary's series with every label
// in want hold together, and their sum.
func Observations(t testing.TB, c prometheus.Collector, want map[string]string) (count uint64, sum float64) {
	t.Helper()
	for _, m := range matching(t, c, want) {
		count += m.GetHistogram().GetSampleCount() + m.GetSummary().GetSampleCount()
		sum += m.GetHistogram().GetSampleSum() + m.GetSummary().GetSampleSum()
	}
	return count, sum
}
