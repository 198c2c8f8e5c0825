package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// A solve's queue depth follows its progress under its own scheduling_id and stays after it
// ends; its unfinished work is there only while it runs; a new solve replaces the last one's
// queue depth.
func TestSolveSeries(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	first := StartSolve("test", 5, clk.Now(), clk.Since)
	if got := testutil.ToFloat64(SchedulerQueueDepth.WithLabelValues("test", first.id)); got != 5 {
		t.Errorf("queue depth at the start %v, want 5", got)
	}
	clk.Step(1500 * time.Millisecond)
	first.Progress(2)
	if got := testutil.ToFloat64(SchedulerQueueDepth.WithLabelValues("test", first.id)); got != 2 {
		t.Errorf("queue depth %v, want 2", got)
	}
	if got := testutil.ToFloat64(SchedulerUnfinishedWork.WithLabelValues("test", first.id)); got != 1.5 {
		t.Errorf("unfinished work %v, want 1.5", got)
	}
	first.Progress(0)
	first.Done()
	if SchedulerUnfinishedWork.DeleteLabelValues("test", first.id) {
		t.Error("the unfinished work of a solve that ended is still exported")
	}
	second := StartSolve("test", 7, clk.Now(), clk.Since)
	if second.id == first.id {
		t.Fatal("two solves share a scheduling_id")
	}
	if SchedulerQueueDepth.DeleteLabelValues("test", first.id) {
		t.Error("a new solve left the last one's queue depth")
	}
	if got := testutil.ToFloat64(SchedulerQueueDepth.WithLabelValues("test", second.id)); got != 7 {
		t.Errorf("the new solve's queue depth %v, want 7", got)
	}
	second.Done()
}
