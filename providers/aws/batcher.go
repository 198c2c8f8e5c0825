package aws

import (
	"context"
	"sync"
	"time"
)

// Batch windows, as upstream's: a batch goes out once no request has joined it for
// BatchIdle, or BatchMax after its first request, whichever comes first.
const (
	BatchIdle = 35 * time.Millisecond
	BatchMax  = time.Second
)

// batcher gathers requests that can share one EC2 call: requests with the same key join one
// batch, which run sends as one call once the batch is idle or old enough, and whose answers
// it hands back in the order the requests joined. A caller that gives up (its context ends)
// stops waiting; the batch still goes out for the others.
type batcher[T, R any] struct {
	idle, max time.Duration
	// maxItems closes a batch early when it is full (EC2's per-call limits); 0: no limit.
	maxItems int
	run      func(ctx context.Context, items []T) []result[R]
	// sent, when set, is told each batch's size and how long its window was open.
	sent func(size int, window time.Duration)

	mu      sync.Mutex
	batches map[string]*batch[T, R]
}

type result[R any] struct {
	out R
	err error
}

type batch[T, R any] struct {
	ctx     context.Context
	items   []T
	waiters []chan result[R]
	joined  chan struct{} // a request joined: restart the idle timer
	full    chan struct{} // closed when maxItems joined
	opened  time.Time
}

func newBatcher[T, R any](maxItems int, run func(ctx context.Context, items []T) []result[R], sent func(size int, window time.Duration)) *batcher[T, R] {
	return &batcher[T, R]{idle: BatchIdle, max: BatchMax, maxItems: maxItems, run: run, sent: sent, batches: map[string]*batch[T, R]{}}
}

// add puts item into the open batch of key (or opens one) and waits for its answer.
func (b *batcher[T, R]) add(ctx context.Context, key string, item T) (R, error) {
	ch := make(chan result[R], 1)
	b.mu.Lock()
	bt, ok := b.batches[key]
	if !ok {
		// The batch's call outlives any one caller, but keeps the first caller's values
		// (loggers, deadlines are not carried).
		bt = &batch[T, R]{ctx: context.WithoutCancel(ctx), joined: make(chan struct{}, 1), full: make(chan struct{}), opened: time.Now()}
		b.batches[key] = bt
		go b.wait(key, bt)
	}
	bt.items = append(bt.items, item)
	bt.waiters = append(bt.waiters, ch)
	if b.maxItems > 0 && len(bt.items) == b.maxItems {
		delete(b.batches, key) // later requests open a new batch
		close(bt.full)
	} else {
		select {
		case bt.joined <- struct{}{}:
		default:
		}
	}
	b.mu.Unlock()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// wait sends the batch once it is idle, old or full.
func (b *batcher[T, R]) wait(key string, bt *batch[T, R]) {
	deadline := time.NewTimer(b.max)
	defer deadline.Stop()
	idle := time.NewTimer(b.idle)
	defer idle.Stop()
wait:
	for {
		select {
		case <-bt.joined:
			idle.Reset(b.idle)
		case <-idle.C:
			break wait
		case <-deadline.C:
			break wait
		case <-bt.full:
			break wait
		}
	}
	b.mu.Lock()
	if b.batches[key] == bt {
		delete(b.batches, key)
	}
	items, waiters := bt.items, bt.waiters
	b.mu.Unlock()
	if b.sent != nil {
		b.sent(len(items), time.Since(bt.opened))
	}
	results := b.run(bt.ctx, items)
	for i, ch := range waiters {
		ch <- results[i] // buffered: a caller that left does not block the others
	}
}
