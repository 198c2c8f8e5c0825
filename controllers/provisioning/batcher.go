package provisioning

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Batcher gathers triggers into batches: a batch closes when no trigger came for the idle
// duration, or when it has been open for the max duration.
type Batcher struct {
	clock     clock.Clock
	idle, max time.Duration
	trigger   chan struct{}
}

// NewBatcher returns a batcher with the given windows.
func NewBatcher(clk clock.Clock, idle, max time.Duration) *Batcher {
	return &Batcher{clock: clk, idle: idle, max: max, trigger: make(chan struct{}, 1)}
}

// Trigger asks for a batch; it never blocks.
func (b *Batcher) Trigger() {
	select {
	case b.trigger <- struct{}{}:
	default:
	}
}

// Wait blocks until a batch closes, and reports false when ctx ended first.
func (b *Batcher) Wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-b.trigger:
	}
	deadline := b.clock.After(b.max)
	for {
		idle := b.clock.After(b.idle)
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return true
		case <-idle:
			return true
		case <-b.trigger:
			// More pods arrived: wait for them to settle.
		}
	}
}
