package aws

import (
	"context"
	"testing"
	"time"
)

// A held Pricing makes instance types wait for the first spot answer, and nothing else waits:
// an unheld one, or a held one once the first update is over.
func TestSpotKnownWaitsForTheFirstSpotUpdate(t *testing.T) {
	defer func(d time.Duration) { FirstSpotWait = d }(FirstSpotWait)
	FirstSpotWait = time.Hour
	NewPricing(nil, false).SpotKnown(context.Background()) // not held: returns at once

	p := NewPricing(nil, false)
	p.HoldUntilFirstSpot()
	done := make(chan struct{})
	go func() { p.SpotKnown(context.Background()); close(done) }()
	select {
	case <-done:
		t.Fatal("SpotKnown returned before the first spot update")
	case <-time.After(100 * time.Millisecond):
	}
	p.firstOnce.Do(func() { close(p.firstSpot) })
	<-done
	p.SpotKnown(context.Background()) // over: returns at once

	q := NewPricing(nil, false)
	q.HoldUntilFirstSpot()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q.SpotKnown(ctx) // an ended context does not wait
}
