package metrics

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// clusterStateValues scrapes the cluster-state gauges by name.
func clusterStateValues(t *testing.T) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(clusterState)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			out[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The unsynced time grows while the model is not synced and is 0 once it is; a later loss of
// sync counts from when it was seen.
func TestClusterStateUnsyncedTime(t *testing.T) {
	clock := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = time.Now })
	var synced atomic.Bool
	SetClusterStateSource(ClusterStateSource{NodeCount: func() int { return 3 }, Synced: synced.Load})
	clock = clock.Add(20 * time.Second)
	v := clusterStateValues(t)
	if v["karpenter_cluster_state_synced"] != 0 || v["karpenter_cluster_state_unsynced_time_seconds"] != 20 || v["karpenter_cluster_state_node_count"] != 3 {
		t.Errorf("not synced 20 s after start: %v", v)
	}
	synced.Store(true)
	if v := clusterStateValues(t); v["karpenter_cluster_state_synced"] != 1 || v["karpenter_cluster_state_unsynced_time_seconds"] != 0 {
		t.Errorf("synced: %v", v)
	}
	synced.Store(false)
	clusterStateValues(t)
	clock = clock.Add(5 * time.Second)
	if v := clusterStateValues(t); v["karpenter_cluster_state_unsynced_time_seconds"] != 5 {
		t.Errorf("a new loss of sync counts from when it was seen (5 s ago), not from the start: %v", v)
	}
	for name := range clusterStateValues(t) {
		if !strings.HasPrefix(name, "karpenter_cluster_state_") {
			t.Errorf("unexpected %s", name)
		}
	}
}
