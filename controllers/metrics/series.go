package metrics

import (
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Series tracks the gauges a controller rebuilds from scratch each pass (the node and
// instance-type metrics controllers): Set records each label set a pass gives a gauge, and
// Flush deletes the series the previous pass set and this one did not, so that a node or
// instance type that is gone loses its series.
type Series struct {
	key       func(prometheus.Labels) string
	last, cur map[*prometheus.GaugeVec]map[string]prometheus.Labels
}

// NewSeries tracks series by key, which must tell label sets apart (nil: their values in the
// order of their sorted names).
func NewSeries(key func(prometheus.Labels) string) *Series {
	if key == nil {
		key = sortedKey
	}
	return &Series{key: key, last: map[*prometheus.GaugeVec]map[string]prometheus.Labels{}}
}

// Set sets the gauge's series of labels to v, for this pass.
func (s *Series) Set(g *prometheus.GaugeVec, labels prometheus.Labels, v float64) {
	g.With(labels).Set(v)
	if s.cur == nil {
		s.cur = map[*prometheus.GaugeVec]map[string]prometheus.Labels{}
	}
	if s.cur[g] == nil {
		s.cur[g] = map[string]prometheus.Labels{}
	}
	s.cur[g][s.key(labels)] = labels
}

// Flush ends a pass: the series of the previous pass this one did not set are deleted.
func (s *Series) Flush() {
	for g, before := range s.last {
		for k, labels := range before {
			if _, ok := s.cur[g][k]; !ok {
				g.Delete(labels)
			}
		}
	}
	s.last, s.cur = s.cur, nil
	if s.last == nil {
		s.last = map[*prometheus.GaugeVec]map[string]prometheus.Labels{}
	}
}

// Keep ends a pass that could not see everything: nothing is deleted, and the series it set
// join those of the previous pass.
func (s *Series) Keep() {
	for g, labels := range s.cur {
		if s.last[g] == nil {
			s.last[g] = map[string]prometheus.Labels{}
		}
		maps.Copy(s.last[g], labels)
	}
	s.cur = nil
}

func sortedKey(l prometheus.Labels) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(l[name])
		b.WriteByte(0)
	}
	return b.String()
}
