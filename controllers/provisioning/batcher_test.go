package provisioning

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// waitBatch starts gathering a batch and returns a channel that receives when it closes.
func waitBatch(t *testing.T, b *Batcher, clk *clocktesting.FakeClock, open func()) chan bool {
	t.Helper()
	// Fire the timers a previous batch left, so that waiters mean this batch's.
	clk.Step(time.Hour)
	done := make(chan bool, 1)
	go func() { done <- b.Wait(context.Background()) }()
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
// (The tests also sleep a moment after each trigger, for the goroutine to re-arm its timer
// before the fake clock moves on.)
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
	done := waitBatch(t, b, clk, func() { b.TriggerFor("a") })
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		clk.Step(600 * time.Millisecond)
		b.TriggerFor("a")
	}
	if !closed(done) {
		t.Fatal("the batch is still open 1.8s in, 1s after its only pod")
	}
}

// A new pod holds the batch open for the idle duration more; a nudge does not.
func TestBatchIsHeldOpenByNewPodsOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(clk, time.Second, 10*time.Second)
	done := waitBatch(t, b, clk, func() { b.TriggerFor("a") })
	time.Sleep(100 * time.Millisecond)
	clk.Step(600 * time.Millisecond)
	b.TriggerFor("b")
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
	done = waitBatch(t, b, clk, func() { b.TriggerFor("a") })
	clk.Step(time.Second)
	if !closed(done) {
		t.Fatal("pod a opened a new batch, which closes after 1s")
	}
	done = waitBatch(t, b, clk, b.Nudge)
	clk.Step(time.Second)
	if !closed(done) {
		t.Fatal("a nudge opened a batch, which closes after 1s")
	}
}
