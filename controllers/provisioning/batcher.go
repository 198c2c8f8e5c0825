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
	// replicaSets own the pods that triggered the batch being gathered.
	replicaSets sets.Set[types.NamespacedName]
}

// NewBatcher returns a batcher with the given windows.
func NewBatcher(clk clock.Clock, idle, maxWindow time.Duration) *Batcher {
	return &Batcher{clock: clk, idle: idle, max: maxWindow, trigger: make(chan struct{}, 1), nudge: make(chan struct{}, 1),
		seen: sets.New[types.UID](), replicaSets: sets.New[types.NamespacedName]()}
}

// TriggerFor asks for a batch for a pod, owned by replicaSet if that is not empty; a pod that
// triggered the batch being gathered does not again.
func (b *Batcher) TriggerFor(uid types.UID, replicaSet types.NamespacedName) {
	b.mu.Lock()
	seen := b.seen.Has(uid)
	b.seen.Insert(uid)
	if replicaSet.Name != "" {
		b.replicaSets.Insert(replicaSet)
	}
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

// Wait blocks until a batch closes, and reports false when ctx ended first. When the idle
// duration passes while more reports that the ReplicaSets of the batch's pods are still
// creating pods, the batch waits on for them (up to the max duration).
func (b *Batcher) Wait(ctx context.Context, more func([]types.NamespacedName) bool) bool {
	select {
	case <-ctx.Done():
		return false
	case <-b.trigger:
	case <-b.nudge:
	}
	defer func() {
		b.mu.Lock()
		b.seen = sets.New[types.UID]()
		b.replicaSets = sets.New[types.NamespacedName]()
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
			b.mu.Lock()
			owners := b.replicaSets.UnsortedList()
			b.mu.Unlock()
			if more == nil || !more(owners) {
				return true
			}
			idle = b.clock.After(b.idle)
		case <-b.trigger:
			// More pods arrived: wait for them to settle.
			idle = b.clock.After(b.idle)
		case <-b.nudge:
		}
	}
}
