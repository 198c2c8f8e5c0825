package provisioning

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// Batcher gathers triggers into batches: a batch closes when no trigger came for the idle
// duration, or when it has been open for the max duration.
type Batcher struct {
	clock     clock.Clock
	idle, max time.Duration
	trigger   chan struct{}
	nudge     chan struct{}
	// seen are the pods that triggered the batch being gathered: kube-scheduler updates a
	// pending pod each time it fails again (as nodes appear), and those updates must not hold
	// the batch open as if new pods kept arriving.
	mu   sync.Mutex
	seen sets.Set[types.UID]
}

// NewBatcher returns a batcher with the given windows.
func NewBatcher(clk clock.Clock, idle, max time.Duration) *Batcher {
	return &Batcher{clock: clk, idle: idle, max: max, trigger: make(chan struct{}, 1), nudge: make(chan struct{}, 1), seen: sets.New[types.UID]()}
}

// TriggerFor asks for a batch for a pod; a pod that triggered the batch being gathered does
// not again.
func (b *Batcher) TriggerFor(uid types.UID) {
	b.mu.Lock()
	seen := b.seen.Has(uid)
	b.seen.Insert(uid)
	b.mu.Unlock()
	if !seen {
		b.Trigger()
	}
}

// Trigger asks for a batch, or holds the one being gathered open for the idle duration
// more; it never blocks.
func (b *Batcher) Trigger() {
	select {
	case b.trigger <- struct{}{}:
	default:
	}
}

// Nudge asks for a batch if none is being gathered, and never holds one open: for pods that
// are no new work (already nominated) and for the periodic retry.
func (b *Batcher) Nudge() {
	select {
	case b.nudge <- struct{}{}:
	default:
	}
}

// Wait blocks until a batch closes, and reports false when ctx ended first.
func (b *Batcher) Wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-b.trigger:
	case <-b.nudge:
	}
	defer func() {
		b.mu.Lock()
		b.seen = sets.New[types.UID]()
		b.mu.Unlock()
	}()
	deadline := b.clock.After(b.max)
	idle := b.clock.After(b.idle)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return true
		case <-idle:
			return true
		case <-b.trigger:
			// More pods arrived: wait for them to settle.
			idle = b.clock.After(b.idle)
		case <-b.nudge:
		}
	}
}
