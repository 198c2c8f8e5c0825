package provisioning

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// waitBatch starts gathering a batch and returns a channel that receives when it closes.
func waitBatch(t *testing.T, b *Batcher, clk *clocktesting.FakeClock, more func([]types.NamespacedName) bool, open func()) chan bool {
	t.Helper()
	// Fire the timers a previous batch left, so that waiters mean this batch's.
	clk.Step(time.Hour)
	done := make(chan bool, 1)
	go func() { done <- b.Wait(context.Background(), more) }()
	open()
	// The batch is open once its timers are set.
	for i := 0; !clk.HasWaiters(); i++ {
		if i > 1000 {
			t.Fatal("the batch never opened")
		}
		time.Sleep(time.Millisecond)
	}
	return done
}

// closed reports whether the batch closed, giving its goroutine a moment to notice the clock.
func closed(done chan bool) bool {
	select {
	case <-done:
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

// kube-scheduler updates a pending pod each time it fails again; those updates of pods that
// already triggered the batch must not hold it open until the max window.
func TestBatchIgnoresRepeatedTriggersOfAPod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(clk, time.Second, 10*time.Second)
	done := waitBatch(t, b, clk, nil, func() { b.TriggerFor("a", types.NamespacedName{}) })
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		clk.Step(600 * time.Millisecond)
		b.TriggerFor("a", types.NamespacedName{})
	}
	if !closed(done) {
		t.Fatal("the batch is still open 1.8s in, 1s after its only pod")
	}
}

// A new pod holds the batch open for the idle duration more; a nudge does not.
func TestBatchIsHeldOpenByNewPodsOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(clk, time.Second, 10*time.Second)
	done := waitBatch(t, b, clk, nil, func() { b.TriggerFor("a", types.NamespacedName{}) })
	time.Sleep(100 * time.Millisecond)
	clk.Step(600 * time.Millisecond)
	b.TriggerFor("b", types.NamespacedName{})
	time.Sleep(100 * time.Millisecond)
	clk.Step(600 * time.Millisecond)
	if closed(done) {
		t.Fatal("pod b arrived 0.6s ago: the batch waits 1s for more")
	}
	b.Nudge()
	time.Sleep(100 * time.Millisecond)
	clk.Step(500 * time.Millisecond)
	if !closed(done) {
		t.Fatal("1.1s after pod b the batch closes; a nudge does not hold it open")
	}

	// After a batch, the same pod triggers the next one; a nudge alone opens one too.
	done = waitBatch(t, b, clk, nil, func() { b.TriggerFor("a", types.NamespacedName{}) })
	clk.Step(time.Second)
	if !closed(done) {
		t.Fatal("pod a opened a new batch, which closes after 1s")
	}
	done = waitBatch(t, b, clk, nil, b.Nudge)
	clk.Step(time.Second)
	if !closed(done) {
		t.Fatal("a nudge opened a batch, which closes after 1s")
	}
}

// While the ReplicaSets of the batch's pods are still creating pods, the idle window does not
// close the batch; the max window does.
func TestBatchWaitsForPodsStillComing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(clk, time.Second, 10*time.Second)
	web := types.NamespacedName{Namespace: "default", Name: "web-5d8f"}
	var coming atomic.Bool
	coming.Store(true)
	// asked is what the batch's goroutine asked about last.
	var asked atomic.Pointer[[]types.NamespacedName]
	more := func(sets []types.NamespacedName) bool {
		asked.Store(&sets)
		return coming.Load() && len(sets) > 0
	}
	done := waitBatch(t, b, clk, more, func() { b.TriggerFor("a", web) })
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		clk.Step(1100 * time.Millisecond)
	}
	if closed(done) {
		t.Fatal("3.3s without a new pod, but its ReplicaSet is still creating pods: the batch waits")
	}
	if got := asked.Load(); got == nil || len(*got) != 1 || (*got)[0] != web {
		t.Errorf("asked about %v, want the pod's ReplicaSet %v", got, web)
	}
	coming.Store(false)
	clk.Step(1100 * time.Millisecond)
	if !closed(done) {
		t.Fatal("no pod is coming any more: the batch closes at the next idle window")
	}

	// A pod no ReplicaSet owns does not wait for anyone's.
	coming.Store(true)
	done = waitBatch(t, b, clk, more, func() { b.TriggerFor("b", types.NamespacedName{}) })
	clk.Step(1100 * time.Millisecond)
	if !closed(done) {
		t.Fatal("the last batch's ReplicaSet is not this batch's: it closes after 1s")
	}

	done = waitBatch(t, b, clk, more, func() { b.TriggerFor("c", web) })
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		clk.Step(1100 * time.Millisecond)
	}
	if !closed(done) {
		t.Fatal("the max window closes the batch even while pods are coming")
	}
}
